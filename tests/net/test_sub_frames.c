/* A live message with more frames than any message the subscriber reads (suite net).
 * ZMQ_MAXMSGSIZE bounds one frame, not a message, and libzmq hands a multipart message over
 * only once all of it has arrived: a message of many large frames is held whole by libzmq,
 * whatever the subscriber does (docs/limits.md). What the subscriber adds must be nothing:
 * it reads such a message a frame at a time, lets go of each frame past the ones it keeps,
 * counts the message malformed, and keeps no frame of it afterwards. Before, it kept the
 * message's first 8 frames until later messages with as many frames replaced them, or until
 * kvreg_subscriber_run() returned: with 8 MiB frames, 40 MiB stayed held after the message,
 * for as long as run() ran.
 *
 * A hand-made peer sends a good batch (seq 0), then one message of 16 frames ([topic, seq,
 * 14 x 8 MiB]), then good batches 1 .. 5, all while a single run() call reads them. Asserted:
 *  - the message is reported malformed (a MALFORMED notice, KVREG_SUB_STAT_MALFORMED 1) and
 *    run() keeps going: seqs 0 .. 5 are delivered in order, nothing lost;
 *  - when batch 5 is delivered (inside the same run() call), the process's resident memory
 *    is within 8 MiB of what it was before the message: no frame of it is held;
 *  - the peak is at most the message plus 16 MiB: the frames were never copied.
 * Memory is checked in plain builds only (under sanitizers resident memory is theirs). glibc
 * is told to map every block of 1 MiB or more on its own (M_MMAP_THRESHOLD), so a frame
 * libzmq frees leaves resident memory at once and VmRSS shows what is held. The peer sends its
 * frames zero-copy from one static buffer, part of the baseline. */
#define _GNU_SOURCE /* mallopt */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>
#include <zmq.h>

#include "net_fixture.h"
#include "net_peer.h"

#ifdef SANITIZED
#define TIME_SCALE 5
#else
#define TIME_SCALE 1
#endif

#define FRAME_SIZE (8u << 20)
#define BIG_FRAMES 14 /* after [topic, seq] */
#define GOOD_AFTER 5
static const char topic[] = "kv@pod-f@model-f";
static unsigned char big[FRAME_SIZE];

static void noop_free(void *data, void *hint) {
    (void)data;
    (void)hint;
}

typedef struct watch {
    net_collect c;
    uint64_t rss_at_last; /* VmRSS (KiB) when the last good batch was delivered */
} watch;

static void batch_fn(const kvreg_sub_batch *b, void *ud) {
    watch *w = ud;
    if (b->seq == GOOD_AFTER) w->rss_at_last = net_rss_kib();
    net_batch_fn(b, &w->c);
}

static void good(net_peer *peer, uint64_t seq) {
    uint8_t buf[256];
    const size_t len = net_payload(UINT64_C(0xf00) + seq, buf, sizeof buf);
    net_peer_live(peer, topic, seq, buf, len);
}

static void many_frames_are_not_held(void **state) {
    (void)state;
    memset(big, 'y', sizeof big);
    net_peer peer;
    net_peer_open(&peer, 0, NULL);
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_MALFORMED_PAUSE_MS, 1), KVREG_OK);
    watch w;
    memset(&w, 0, sizeof w);
    net_collect_init(&w.c, sub);
    assert_int_equal(kvreg_subscriber_set_batch_fn(sub, batch_fn, &w), KVREG_OK);
    assert_int_equal(kvreg_subscriber_add(sub, peer.endpoint, NULL, NULL), KVREG_OK);
    net_peer_wait_subscribed(&peer, sub, 1);
    good(&peer, 0);
    assert_true(net_run_until(sub, &w.c, 1, net_now_ms() + 10000 * TIME_SCALE));

    const uint64_t base_kib = net_rss_kib();
    unsigned char s8[8];
    net_be64(s8, 1);
    assert_true(zmq_send(peer.pub, topic, strlen(topic), ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(peer.pub, s8, 8, ZMQ_SNDMORE) >= 0);
    for (int i = 0; i < BIG_FRAMES; i++) {
        zmq_msg_t m;
        assert_int_equal(zmq_msg_init_data(&m, big, sizeof big, noop_free, NULL), 0);
        assert_true(zmq_msg_send(&m, peer.pub, i + 1 < BIG_FRAMES ? ZMQ_SNDMORE : 0) >= 0);
    }
    for (uint64_t seq = 1; seq <= GOOD_AFTER; seq++) good(&peer, seq);

    /* One run() call reads all of it: what it holds after the message is what it kept. */
    w.c.stop_after = 1 + GOOD_AFTER;
    const int64_t t0 = net_now_ms();
    assert_int_equal(kvreg_subscriber_run(sub, 30000 * TIME_SCALE), KVREG_OK);
    const int64_t ms = net_now_ms() - t0;
    const uint64_t hwm_kib = net_hwm_kib();
    const uint64_t held = w.rss_at_last > base_kib ? w.rss_at_last - base_kib : 0;
    const uint64_t peak = hwm_kib > base_kib ? hwm_kib - base_kib : 0;
    uint64_t malformed = 0;
    assert_int_equal(kvreg_subscriber_stat(sub, KVREG_SUB_STAT_MALFORMED, &malformed), KVREG_OK);
    printf("%d frames of %u MiB: held after it %llu KiB, peak %llu KiB, %lld ms, %zu batches, %llu malformed\n",
           BIG_FRAMES + 2, FRAME_SIZE >> 20, (unsigned long long)held, (unsigned long long)peak, (long long)ms,
           w.c.n, (unsigned long long)malformed);

    assert_int_equal(w.c.n, 1 + GOOD_AFTER);
    for (size_t i = 0; i < w.c.n; i++) {
        assert_int_equal(w.c.recs[i].seq, i);
        assert_int_equal(w.c.recs[i].first_hash, UINT64_C(0xf00) + i);
    }
    assert_int_equal(w.c.lost, 0);
    assert_int_equal(malformed, 1);
    assert_int_equal(w.c.notices[KVREG_SUB_MALFORMED], 1);
#ifdef SANITIZED
    printf("memory bounds not checked in a sanitizer build\n");
#else
    assert_true(w.rss_at_last > 0);
    assert_true(held <= (FRAME_SIZE >> 10));
    assert_true(peak <= (uint64_t)BIG_FRAMES * (FRAME_SIZE >> 10) + 16 * 1024);
#endif

    kvreg_subscriber_free(sub);
    net_collect_free(&w.c);
    net_peer_close(&peer);
}

int main(void) {
    /* Blocks of 1 MiB or more get their own mapping, returned when freed (see the top). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_frames_are_not_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
