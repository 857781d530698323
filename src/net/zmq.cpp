// libzmq helpers (see net_zmq.hpp). Compiled only with KVREG_WITH_ZMQ.
#include "net/zmq.hpp"

#include <cstring>

#include "net/endpoint.hpp"

#ifdef KVREG_NET_TSAN
extern "C" void __tsan_ignore_thread_begin(void);
extern "C" void __tsan_ignore_thread_end(void);
#endif

namespace kvreg::net {

Frames::Frames() {
    for (auto &m : msgs_) zmq_msg_init(&m);
}

Frames::~Frames() {
    for (auto &m : msgs_) zmq_msg_close(&m);
}

bool Frames::recv(void *socket, int flags) {
    // The last message's frames go first: a frame is kept until the next receive, not until a
    // later message happens to have as many frames (a 4-frame message of MAX_MSG_SIZE frames
    // used to stay held for as long as the reader's loop ran).
    release();
    zmq_msg_t extra;
    zmq_msg_init(&extra);
    for (;;) {
        // Past kMaxFrames each frame is read into `extra`, which zmq_msg_recv empties first:
        // one at a time, released as the next is read. (libzmq already holds the whole
        // message: it hands a multipart message over only once its last frame is in.)
        zmq_msg_t *m = count_ < kMaxFrames ? &msgs_[count_] : &extra;
        if (zmq_msg_recv(m, socket, count_ == 0 ? flags : 0) < 0) {
            // After the first frame the rest of the message is already here: only a closed
            // context makes this fail, and the message is then abandoned.
            zmq_msg_close(&extra);
            release();
            return false;
        }
        count_++;
        if (!zmq_msg_more(m)) break;
    }
    zmq_msg_close(&extra);
    if (count_ > kMaxFrames) {
        // Longer than any message we read: its frames are not read by anyone (every caller
        // checks count() first and rejects it), so none is kept.
        const size_t n = count_;
        release();
        count_ = n;
        return true;
    }
#ifdef KVREG_NET_TSAN
    for (size_t i = 0; i < count_; i++) {
        const auto *p = static_cast<const unsigned char *>(zmq_msg_data(&msgs_[i]));
        std::vector<unsigned char> copy(zmq_msg_size(&msgs_[i]) + 1); // + 1: data() is never null
        __tsan_ignore_thread_begin();
        std::memcpy(copy.data(), p, zmq_msg_size(&msgs_[i]));
        __tsan_ignore_thread_end();
        copies_[i] = std::move(copy); // not resized in place: a large frame's buffer goes with it
    }
#endif
    return true;
}

void Frames::release() noexcept {
    for (size_t i = 0; i < kMaxFrames; i++) {
        zmq_msg_close(&msgs_[i]);
        zmq_msg_init(&msgs_[i]);
#ifdef KVREG_NET_TSAN
        std::vector<unsigned char>().swap(copies_[i]);
#endif
    }
    count_ = 0;
}

void Frames::take(size_t i, Payload &out) noexcept {
#ifdef KVREG_NET_TSAN
    out.size_ = zmq_msg_size(&msgs_[i]);
    out.copy_ = std::move(copies_[i]);
    copies_[i].clear();
#endif
    zmq_msg_move(&out.msg_, &msgs_[i]);
}

bool open_endpoint(void *socket, const std::string &endpoint, bool force_bind, std::string &actual) {
    if (force_bind || endpoint_binds(endpoint)) {
        if (zmq_bind(socket, endpoint.c_str()) != 0) return false;
        char buf[1024];
        size_t len = sizeof buf;
        if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, buf, &len) != 0 || len == 0) return false;
        actual.assign(buf, strnlen(buf, len));
        return true;
    }
    if (zmq_connect(socket, endpoint.c_str()) != 0) return false;
    actual = endpoint;
    return true;
}

bool set_int(void *socket, int option, int value) {
    return zmq_setsockopt(socket, option, &value, sizeof value) == 0;
}

} // namespace kvreg::net
