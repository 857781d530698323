/* A publisher restart is detected whatever seq the new process sends (suite net). A hand-made
 * peer plays a kvreg publisher (instance id in its replay end marker) that restarts on the
 * same endpoints and comes back with a seq lower than, equal to and higher than the one the
 * subscriber expects next. The subscriber learns the instance with a probe (a replay request
 * answered by the end marker alone) when the stream starts and again when its SUB socket
 * reconnects; a changed id is a RESET, before any batch of the resync (a replay from 0).
 * Also: the live topic's instance suffix (KVREG_PUB_OPT_TOPIC_INSTANCE) detects a restart at
 * an equal seq without any replay endpoint, and the documented limit: a foreign publisher
 * that carries no id and comes back at the expected seq is not detected. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net_fixture.h"
#include "net_peer.h"

static const char topic[] = "kv@pod-r@model-r";
static const char tag_a[] = "kvreg-instance=00000000000000aa";
static const char tag_b[] = "kvreg-instance=00000000000000bb";
#define HASH_A(seq) (UINT64_C(0xa000) + (seq))
#define HASH_B(seq) (UINT64_C(0xb000) + (seq))

static void live(net_peer *p, const char *t, uint64_t seq, uint64_t h) {
    uint8_t buf[256];
    net_peer_live(p, t, seq, buf, net_payload(h, buf, sizeof buf));
}

static void replayed(net_peer *p, uint64_t seq, uint64_t h) {
    uint8_t buf[256];
    net_peer_replay(p, topic, seq, buf, net_payload(h, buf, sizeof buf));
}

/* A subscriber on p's endpoints (its replay ROUTER's too when it has one; the stream then
 * probes), with options given as (option, value) pairs ended by 0, its batches and notices
 * into c, run until p's XPUB has its subscription. */
static kvreg_subscriber *subscriber_on(net_peer *p, net_collect *c, ...) {
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    va_list ap;
    va_start(ap, c);
    for (uint32_t opt; (opt = va_arg(ap, uint32_t)) != 0;)
        assert_int_equal(kvreg_subscriber_set(sub, opt, va_arg(ap, uint64_t)), KVREG_OK);
    va_end(ap);
    net_collect_init(c, sub);
    assert_int_equal(kvreg_subscriber_add(sub, p->endpoint, p->replay[0] ? p->replay : NULL, NULL), KVREG_OK);
    net_peer_wait_subscribed(p, sub, 1);
    return sub;
}

/* Process A sends 0..2; B restarts on the same endpoints having made `b_next` batches (its
 * ring holds 0..b_next-1) and sends b_next live. */
static void restart_at(uint64_t b_next) {
    net_peer a, b;
    net_peer_open(&a, 1, NULL);
    net_collect c;
    kvreg_subscriber *sub = subscriber_on(&a, &c, KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, (uint64_t)60000, 0u);

    live(&a, topic, 0, HASH_A(0));
    /* The stream started: the probe asks from seq 1 and learns A's id. */
    assert_int_equal(net_peer_request(&a, sub), 1);
    net_peer_replay_end(&a, tag_a);
    live(&a, topic, 1, HASH_A(1));
    live(&a, topic, 2, HASH_A(2));
    assert_true(net_run_until(sub, &c, 3, net_now_ms() + 10000));
    assert_int_equal(c.notices[KVREG_SUB_RESET], 0);

    /* The restart: same endpoints, new process (A's ports are free again once it closed). */
    net_peer where = a;
    net_peer_close(&a);
    net_peer_open(&b, 1, &where);
    net_peer_wait_subscribed(&b, sub, 1);
    /* The SUB socket reconnected: the probe asks from the next seq, 3. B answers from its
     * ring (for a higher seq that is 3..b_next-1: batches the subscriber cannot yet tell from
     * A's), then names itself. */
    assert_int_equal(net_peer_request(&b, sub), 3);
    for (uint64_t s = 3; s < b_next; s++) replayed(&b, s, HASH_B(s));
    net_peer_replay_end(&b, tag_b);
    /* B is not A: RESET, then the resync asks B for everything from 0. */
    assert_int_equal(net_peer_request(&b, sub), 0);
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    const size_t before = (size_t)c.reset_after;
    for (uint64_t s = 0; s < b_next; s++) replayed(&b, s, HASH_B(s));
    net_peer_replay_end(&b, tag_b);
    live(&b, topic, b_next, HASH_B(b_next));
    assert_true(net_run_until(sub, &c, before + b_next + 1, net_now_ms() + 10000));
    /* After the RESET: B's stream from 0, each seq once, with B's contents. */
    assert_int_equal(c.n, before + b_next + 1);
    for (uint64_t s = 0; s <= b_next; s++) {
        assert_int_equal(c.recs[before + s].seq, s);
        assert_int_equal(c.recs[before + s].first_hash, HASH_B(s));
    }
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    assert_int_equal(c.lost, 0);
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_peer_close(&b);
}

/* Without a replay endpoint, a live topic that names the instance ("<topic>|kvreg-instance=")
 * still shows the restart when the new process's first seq is the one expected. */
static void live_topic_instance_detects_equal_seq(void **state) {
    (void)state;
    char ta[128], tb[128];
    snprintf(ta, sizeof ta, "%s|%s", topic, tag_a);
    snprintf(tb, sizeof tb, "%s|%s", topic, tag_b);
    net_peer a;
    net_peer_open(&a, 0, NULL);
    net_collect c;
    kvreg_subscriber *sub = subscriber_on(&a, &c, 0u);
    for (uint64_t s = 0; s < 3; s++) live(&a, ta, s, HASH_A(s));
    assert_true(net_run_until(sub, &c, 3, net_now_ms() + 10000));
    live(&a, tb, 3, HASH_B(3)); /* the expected seq, from another instance */
    live(&a, tb, 4, HASH_B(4));
    assert_true(net_run_until(sub, &c, 5, net_now_ms() + 10000));
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    assert_int_equal(c.reset_after, 3);
    /* The new stream starts at 3: 0..2 of B's were never received and there is no replay. */
    assert_int_equal(c.lost, 3);
    assert_int_equal(c.recs[3].seq, 3);
    assert_int_equal(c.recs[3].first_hash, HASH_B(3));
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_peer_close(&a);
}

/* The limit, pinned: a foreign publisher (no id anywhere, no replay endpoint) that comes back
 * at the expected seq looks like the same stream. kvreg_net.h says so. */
static void foreign_equal_seq_restart_is_not_seen(void **state) {
    (void)state;
    net_peer a;
    net_peer_open(&a, 0, NULL);
    net_collect c;
    kvreg_subscriber *sub = subscriber_on(&a, &c, 0u);
    for (uint64_t s = 0; s < 3; s++) live(&a, topic, s, HASH_A(s));
    live(&a, topic, 3, HASH_B(3));
    assert_true(net_run_until(sub, &c, 4, net_now_ms() + 10000));
    assert_int_equal(c.notices[KVREG_SUB_RESET], 0);
    /* ... while one that comes back lower is. */
    live(&a, topic, 1, HASH_B(1));
    assert_true(net_run_until(sub, &c, 5, net_now_ms() + 10000));
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_peer_close(&a);
}

typedef struct topic_seen {
    char topic[128];
    uint64_t instance;
    kvreg_subscriber *sub;
    size_t n;
} topic_seen;
static void topic_batch_fn(const kvreg_sub_batch *b, void *ud) {
    topic_seen *t = ud;
    snprintf(t->topic, sizeof t->topic, "%s", b->topic);
    assert_int_equal(kvreg_subscriber_instance(t->sub, b->publisher, b->topic, &t->instance), KVREG_OK);
    t->n++;
}

/* The real publisher: its instance id is a stat, nonzero and new per start; with
 * TOPIC_INSTANCE its topics carry it, the subscriber strips it from batch->topic and answers
 * it from kvreg_subscriber_instance from the first batch on. */
static void publisher_carries_its_instance(void **state) {
    (void)state;
    net_pub p, q;
    net_pub_open(&p, 0, NULL, 100, KVREG_PUB_OPT_TOPIC_INSTANCE, (uint64_t)1, 0u);
    net_pub_open(&q, 0, NULL, 100, 0u);
    uint64_t ip = 0, iq = 0;
    assert_int_equal(kvreg_publisher_stat(p.pub, KVREG_PUB_STAT_INSTANCE, &ip), KVREG_OK);
    assert_int_equal(kvreg_publisher_stat(q.pub, KVREG_PUB_STAT_INSTANCE, &iq), KVREG_OK);
    assert_true(ip != 0 && iq != 0 && ip != iq);
    assert_int_equal(kvreg_publisher_set(q.pub, KVREG_PUB_OPT_TOPIC_INSTANCE, 2), KVREG_ESTATE);
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    topic_seen t = {.sub = sub};
    assert_int_equal(kvreg_subscriber_set_batch_fn(sub, topic_batch_fn, &t), KVREG_OK);
    assert_int_equal(kvreg_subscriber_add(sub, p.endpoint, NULL, NULL), KVREG_OK);
    uint64_t none = 1;
    assert_int_equal(kvreg_subscriber_instance(sub, 0, "kv@pod-a@model-x", &none), KVREG_ENOENT);
    const int64_t deadline = net_now_ms() + 10000;
    while (t.n == 0 && net_now_ms() < deadline) {
        net_pub_register(&p, 1);
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    }
    assert_true(t.n > 0);
    assert_string_equal(t.topic, "kv@pod-a@model-x");
    assert_int_equal(t.instance, ip);
    kvreg_subscriber_free(sub);
    net_pub_close(&p);
    net_pub_close(&q);
}

/* A gap's replay answered by a new process (its batches tagged with another instance than the
 * stream's, learned from the probe): none of it is applied as the old stream's; RESET, then the
 * resync from 0, each of B's seqs once. (They were delivered under A's numbering, then again
 * after the RESET that the end marker brought.) */
static void replay_answered_by_new_instance(void **state) {
    (void)state;
    char ta[128], tb[128];
    snprintf(ta, sizeof ta, "%s|%s", topic, tag_a);
    snprintf(tb, sizeof tb, "%s|%s", topic, tag_b);
    net_peer a;
    net_peer_open(&a, 1, NULL);
    net_collect c;
    kvreg_subscriber *sub = subscriber_on(&a, &c, KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, (uint64_t)60000, 0u);
    live(&a, ta, 0, HASH_A(0));
    assert_int_equal(net_peer_request(&a, sub), 1); /* the probe: A names itself */
    net_peer_replay_end(&a, tag_a);
    live(&a, ta, 1, HASH_A(1));
    assert_true(net_run_until(sub, &c, 2, net_now_ms() + 10000));
    live(&a, ta, 3, HASH_A(3)); /* 2 missing */
    assert_int_equal(net_peer_request(&a, sub), 2);
    uint8_t buf[256];
    for (uint64_t s = 2; s <= 3; s++) net_peer_replay(&a, tb, s, buf, net_payload(HASH_B(s), buf, sizeof buf));
    net_peer_replay_end(&a, tag_b);
    /* B's first replayed batch ends the answer: RESET, and the resync asks from 0. */
    assert_int_equal(net_peer_request(&a, sub), 0);
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    assert_int_equal(c.reset_after, 2);
    for (uint64_t s = 0; s <= 3; s++) net_peer_replay(&a, tb, s, buf, net_payload(HASH_B(s), buf, sizeof buf));
    net_peer_replay_end(&a, tag_b);
    assert_true(net_run_until(sub, &c, 6, net_now_ms() + 10000));
    kvreg_subscriber_run(sub, 50); /* nothing more may come */
    assert_int_equal(c.n, 6);
    for (uint64_t s = 0; s <= 3; s++) {
        assert_int_equal(c.recs[2 + s].seq, s);
        assert_int_equal(c.recs[2 + s].first_hash, HASH_B(s));
    }
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_peer_close(&a);
}

/* A restart whose first live batch the held bounds refuse (MAX_WAITING 1, one batch held while
 * a probe waits): the next live batch carries the restart. RESET, the refused seq 0 reported
 * lost (the failed probe's back-off allows no replay yet), and B's later seqs delivered as B's.
 * (The restart was forgotten: B's 1..6 went into DUPLICATES and 7..9 out as A's, no RESET.) */
static void restart_refused_by_held_bounds(void **state) {
    (void)state;
    net_peer a;
    net_peer_open(&a, 1, NULL);
    net_collect c;
    kvreg_subscriber *sub = subscriber_on(&a, &c, KVREG_SUB_OPT_MAX_WAITING, (uint64_t)1,
                                          KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, (uint64_t)300, 0u);
    for (uint64_t s = 0; s <= 4; s++) live(&a, topic, s, HASH_A(s)); /* the probe goes unanswered */
    live(&a, topic, 6, HASH_A(6));                                   /* held while it waits */
    assert_true(net_run_until(sub, &c, 5, net_now_ms() + 10000));
    for (uint64_t s = 0; s <= 9; s++) live(&a, topic, s, HASH_B(s)); /* B: seq 0 refused */
    assert_true(net_run_until(sub, &c, 6 + 9, net_now_ms() + 10000)); /* A's 6, then B's 1..9 */
    assert_int_equal(c.notices[KVREG_SUB_RESET], 1);
    assert_int_equal(c.reset_after, 6);
    for (uint64_t s = 1; s <= 9; s++) {
        assert_int_equal(c.recs[5 + s].seq, s);
        assert_int_equal(c.recs[5 + s].first_hash, HASH_B(s));
    }
    assert_int_equal(c.lost, 2); /* A's 5 (the probe did not answer) and B's 0 */
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_peer_close(&a);
}

static void restart_lower(void **state) { (void)state; restart_at(1); }
static void restart_equal(void **state) { (void)state; restart_at(3); }
static void restart_higher(void **state) { (void)state; restart_at(50); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(restart_lower),
        cmocka_unit_test(replay_answered_by_new_instance),
        cmocka_unit_test(restart_refused_by_held_bounds),
        cmocka_unit_test(restart_equal),
        cmocka_unit_test(restart_higher),
        cmocka_unit_test(live_topic_instance_detects_equal_seq),
        cmocka_unit_test(foreign_equal_seq_restart_is_not_seen),
        cmocka_unit_test(publisher_carries_its_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
