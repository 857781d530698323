// Small libzmq helpers for the publisher and the subscriber: open an endpoint by vLLM's rule,
// receive a whole multipart message into reusable frames, and the u64 big-endian seq frame.
#pragma once

#include <zmq.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kvreg::net {

// ThreadSanitizer builds: libzmq is not instrumented, so a frame its I/O thread wrote looks
// racy when our thread reads it (the hand-over goes through atomics TSan cannot see). Frames
// then copies each frame once, with TSan looking away, so that the rest of our code stays
// checked (and a suppressed report per byte does not slow the tests to a halt).
#if defined(__SANITIZE_THREAD__)
#define KVREG_NET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVREG_NET_TSAN 1
#endif
#endif

// Ends a context. zmq_ctx_term waits for the context's sockets to close, and a signal ends
// that wait with EINTR: libzmq's contract is to call it again. Returning early left the I/O
// thread running, and releasing queued replay batches into a freed publisher.
inline void term_context(void *ctx) noexcept {
    while (zmq_ctx_term(ctx) != 0 && errno == EINTR) {
    }
}

// Most frames any message we read has: a replay answer on the subscriber's DEALER, ["",
// topic, seq, payload] (live batches and replay requests have 3). Longer messages are read a
// frame at a time, none kept, and reported as malformed (they are not ours to read).
constexpr size_t kMaxFrames = 4;

// One received frame kept past the next receive (a held live batch). It owns the buffer
// libzmq received the frame into, moved out of Frames: keeping a batch costs no copy and no
// fresh memory on the run() thread however large it is (a hostile peer's held megabytes
// used to be copied there, on the thread every well-behaved publisher waits for). TSan
// builds keep the copy Frames made instead.
class Payload {
  public:
    Payload() noexcept { zmq_msg_init(&msg_); }
    ~Payload() { zmq_msg_close(&msg_); }
    Payload(Payload &&o) noexcept {
        zmq_msg_init(&msg_);
        take_from(o);
    }
    Payload &operator=(Payload &&o) noexcept {
        if (this != &o) take_from(o);
        return *this;
    }
    Payload(const Payload &) = delete;
    Payload &operator=(const Payload &) = delete;
#ifdef KVREG_NET_TSAN
    const unsigned char *data() const { return copy_.data(); }
    size_t size() const { return size_; }
#else
    const unsigned char *data() const {
        return static_cast<const unsigned char *>(zmq_msg_data(const_cast<zmq_msg_t *>(&msg_)));
    }
    size_t size() const { return zmq_msg_size(&msg_); }
#endif

    // Into an exact-size buffer of its own (kept as it is where there is no memory for that).
    // libzmq receives small frames as slices of a shared receive buffer (about 8 KiB): a
    // held 40-byte batch kept the whole buffer alive (100,000 of them: 4 MB counted, 756 MB
    // resident). Large frames have buffers of their own and are kept as they are.
    void own_exact() noexcept {
#ifndef KVREG_NET_TSAN
        const size_t n = size();
        zmq_msg_t copy;
        if (zmq_msg_init_size(&copy, n) != 0) return;
        if (n) std::memcpy(zmq_msg_data(&copy), data(), n);
        zmq_msg_move(&msg_, &copy); // closes the slice: its share of the buffer goes
        zmq_msg_close(&copy);
#endif
    }

  private:
    friend class Frames;
    void take_from(Payload &o) noexcept {
        zmq_msg_move(&msg_, &o.msg_); // closes what msg_ held; o.msg_ is left empty
#ifdef KVREG_NET_TSAN
        copy_ = std::move(o.copy_);
        size_ = o.size_;
        o.size_ = 0;
#endif
    }
    zmq_msg_t msg_;
#ifdef KVREG_NET_TSAN
    std::vector<unsigned char> copy_;
    size_t size_ = 0;
#endif
};

// A received multipart message. Frames are zmq_msg_t kept between receives (no allocation
// per message for small frames).
class Frames {
  public:
    Frames();
    ~Frames();
    Frames(const Frames &) = delete;
    Frames &operator=(const Frames &) = delete;

    // Receive one whole message (flags: 0 or ZMQ_DONTWAIT), first letting go of the frames of
    // the one before. true: got one. count() may exceed kMaxFrames: the message was read a
    // frame at a time and none of it is kept (every frame reads as empty); count() says how
    // many there were. false: nothing ready (EAGAIN) or the socket failed; nothing is kept.
    // So Frames holds at most the kMaxFrames frames of the last message, and only until the
    // next recv(): never a copy (except in TSan builds), never more than libzmq held.
    bool recv(void *socket, int flags);
    size_t count() const { return count_; }
#ifdef KVREG_NET_TSAN
    const unsigned char *data(size_t i) const { return copies_[i].data(); }
#else
    const unsigned char *data(size_t i) const {
        return static_cast<const unsigned char *>(zmq_msg_data(const_cast<zmq_msg_t *>(&msgs_[i])));
    }
#endif
    size_t size(size_t i) const { return zmq_msg_size(&msgs_[i]); }
    // Moves frame i (i < min(count(), kMaxFrames)) into *out; frame i is empty afterwards.
    void take(size_t i, Payload &out) noexcept;

  private:
    void release() noexcept; // every frame closed (empty), count() 0
    zmq_msg_t msgs_[kMaxFrames];
#ifdef KVREG_NET_TSAN
    std::vector<unsigned char> copies_[kMaxFrames];
#endif
    size_t count_ = 0;
};

inline void put_be64(unsigned char out[8], uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        out[i] = static_cast<unsigned char>(v & 0xff);
        v >>= 8;
    }
}
inline uint64_t get_be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

// Bind or connect `socket` to endpoint (vLLM's rule unless force_bind). actual gets the
// endpoint in use: ZMQ_LAST_ENDPOINT for a bind (the port ZeroMQ picked for "*"), endpoint
// for a connect. false: ZeroMQ refused it.
bool open_endpoint(void *socket, const std::string &endpoint, bool force_bind, std::string &actual);

// setsockopt for an int option; false on failure.
bool set_int(void *socket, int option, int value);

} // namespace kvreg::net
