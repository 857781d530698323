/* The nats suite's engines (a registry with two pools and a NATS publisher) and replicas (an
 * index fed by a NATS consumer), shared by the suite's test programs. Assertions are cmocka's. */
#ifndef KVREG_NATS_WORLD_H
#define KVREG_NATS_WORLD_H

#include <pthread.h>
#include <stdint.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <nats/nats.h>

#include "nats_fixture.h"

extern nats_server server; /* started by each program's setup */

typedef struct engine {
    kvreg_registry *reg;
    kvreg_pool *gpu, *cpu;
    kvreg_nats_publisher *pub;
} engine;

#define MAX_NOTICES 16
typedef struct replica {
    kvreg_index *idx;
    kvreg_nats_consumer *con;
    int n_notices;
    uint32_t kinds[MAX_NOTICES];
    uint32_t has_seq[MAX_NOTICES];
    char texts[MAX_NOTICES][160];
} replica;

#define UNIVERSE 400

typedef struct runner {
    replica *r;
    pthread_t thread;
} runner;

void engine_open(engine *e, uint64_t poll_capacity, int keep_tokens);
void engine_start(engine *e, const char *stream, const char *prefix, uint64_t format, uint64_t worker, ...);
/* engine_open (1024 events of poll room, no tokens) and engine_start as worker in the Dynamo
 * format, one event a batch (the filter and restart tests count batches as events). */
void engine_one_per_batch(engine *e, const char *stream, const char *prefix, uint64_t worker);
/* The same through url (a relay in front of the server, tcp_cut.h). */
void engine_start_at(engine *e, const char *url, const char *stream, const char *prefix, uint64_t format,
                     uint64_t worker, ...);
uint64_t pub_stat(const engine *e, uint32_t stat);
/* A stream made (update 0) or changed (update 1) to cfg, over a connection of its own. */
void put_stream_cfg(const jsStreamConfig *cfg, int update);
/* The same for a file-storage stream of one subject pattern; max_msg_size -1: none. */
void put_stream(const char *name, const char *subjects, int32_t max_msg_size, int update);
/* Messages the stream holds now. */
uint64_t stream_msgs(const char *name);
/* Delete the stream (it must exist). */
void delete_stream(const char *name);
uint64_t engine_finish(engine *e);
void engine_close(engine *e);
int reg_hash(kvreg_pool *pool, uint64_t h, kvreg_block *out);
void on_notice(const kvreg_nats_notice *n, void *user);
void replica_prepare(replica *r, const char *stream, const char *durable, int own_hashes);
/* The same with an index made from cfg. */
void replica_prepare_index(replica *r, const char *stream, const char *durable, const kvreg_index_config *cfg);
void replica_open(replica *r, const char *stream, const char *durable, int own_hashes, uint64_t max_msg_bytes);
void replica_open_ack(replica *r, const char *stream, const char *durable, uint64_t ack_wait_ms);
uint64_t con_stat(const replica *r, uint32_t stat);
void replica_catch_up(replica *r, uint64_t batches);
void replica_close(replica *r);
int index_holds(const kvreg_index *idx, uint64_t h, uint64_t worker);
void assert_same_as_engine(const replica *r, const engine *e, uint64_t worker, uint64_t base, uint64_t universe);
void *run_replica(void *arg);
void random_workload(engine *e, uint64_t base, unsigned ops, unsigned seed);

#endif
