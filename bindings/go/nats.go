package kvreg

// The NATS JetStream event plane (include/kvreg_nats.h, docs/nats.md): an engine's
// NatsPublisher takes a Registry's events and publishes them into a stream; a router
// replica's NatsConsumer reads the stream into an Index. NatsAvailable says whether the
// loaded library was built with NATS; without it every call returns ErrNotSupported.
//
// Borrowing: a NatsPublisher uses its Registry and a NatsConsumer its Index until their
// Close: close them first. Registry.Close and Index.Close refuse with an error matching
// ErrBusy (and close nothing) while one is open.
//
// Calls: the C publisher and consumer are driven by one thread at a time, except for their
// Stat (and the consumer's Stop), which may come from anywhere. The binding serialises the
// other calls on one object: a call made while another is in progress waits for it (a Worker
// or Snapshot from another goroutine waits for a Run in progress to end). Close may come from
// any goroutine at any time: calls waiting for their turn give up (ErrStale), a Run in
// progress is stopped, and Close waits for the calls in progress before it frees the object.
//
// Notices (kvreg_nats_consumer_set_notice_fn) are not bound: the library never calls into Go
// (see the package comment); the consumer's counters (NatsStat*) count what the notices would
// say.

/*
#include <stdlib.h>
#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// NatsAvailable reports whether the loaded libkvreg was built with NATS.
func NatsAvailable() bool { return C.kvreg_nats_available() != 0 }

// Publisher options (kvreg_nats_publisher_set) and string options (SetString).
const (
	NatsPubFormat            = uint32(C.KVREG_NATS_PUB_OPT_FORMAT)
	NatsPubWorkerID          = uint32(C.KVREG_NATS_PUB_OPT_WORKER_ID)
	NatsPubDPRank            = uint32(C.KVREG_NATS_PUB_OPT_DP_RANK)
	NatsPubMaxInFlight       = uint32(C.KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT)
	NatsPubAckTimeoutMs      = uint32(C.KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS)
	NatsPubRetryMs           = uint32(C.KVREG_NATS_PUB_OPT_RETRY_MS)
	NatsPubMaxEvents         = uint32(C.KVREG_NATS_PUB_OPT_MAX_EVENTS)
	NatsPubBlockSize         = uint32(C.KVREG_NATS_PUB_OPT_BLOCK_SIZE)
	NatsPubBatchUs           = uint32(C.KVREG_NATS_PUB_OPT_BATCH_US)
	NatsPubLingerMs          = uint32(C.KVREG_NATS_PUB_OPT_LINGER_MS)
	NatsPubInstance          = uint32(C.KVREG_NATS_PUB_OPT_INSTANCE)
	NatsPubCreateStream      = uint32(C.KVREG_NATS_PUB_OPT_CREATE_STREAM)
	NatsPubMaxAgeS           = uint32(C.KVREG_NATS_PUB_OPT_MAX_AGE_S)
	NatsPubDuplicateWindowMs = uint32(C.KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS)
	NatsPubConnectTimeoutMs  = uint32(C.KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS)

	NatsURL           = uint32(C.KVREG_NATS_URL)
	NatsStream        = uint32(C.KVREG_NATS_STREAM)
	NatsSubjectPrefix = uint32(C.KVREG_NATS_SUBJECT_PREFIX)
	NatsNamespace     = uint32(C.KVREG_NATS_NAMESPACE)
	NatsComponent     = uint32(C.KVREG_NATS_COMPONENT)
	NatsSubject       = uint32(C.KVREG_NATS_SUBJECT)
	NatsLoraName      = uint32(C.KVREG_NATS_LORA_NAME)
	NatsDurable       = uint32(C.KVREG_NATS_DURABLE)
	NatsFilter        = uint32(C.KVREG_NATS_FILTER)
)

// Publisher counters (NatsPublisher.Stat).
const (
	NatsPubStatBatches        = uint32(C.KVREG_NATS_PUB_STAT_BATCHES)
	NatsPubStatAcked          = uint32(C.KVREG_NATS_PUB_STAT_ACKED)
	NatsPubStatDuplicates     = uint32(C.KVREG_NATS_PUB_STAT_DUPLICATES)
	NatsPubStatRetries        = uint32(C.KVREG_NATS_PUB_STAT_RETRIES)
	NatsPubStatInFlight       = uint32(C.KVREG_NATS_PUB_STAT_IN_FLIGHT)
	NatsPubStatEventsSent     = uint32(C.KVREG_NATS_PUB_STAT_EVENTS_SENT)
	NatsPubStatEventsLost     = uint32(C.KVREG_NATS_PUB_STAT_EVENTS_LOST)
	NatsPubStatResyncs        = uint32(C.KVREG_NATS_PUB_STAT_RESYNCS)
	NatsPubStatEventsSkipped  = uint32(C.KVREG_NATS_PUB_STAT_EVENTS_SKIPPED)
	NatsPubStatEventsUnsent   = uint32(C.KVREG_NATS_PUB_STAT_EVENTS_UNSENT)
	NatsPubStatBatchesUnacked = uint32(C.KVREG_NATS_PUB_STAT_BATCHES_UNACKED)
	NatsPubStatErrors         = uint32(C.KVREG_NATS_PUB_STAT_ERRORS)
	NatsPubStatEventsHandled  = uint32(C.KVREG_NATS_PUB_STAT_EVENTS_HANDLED)
	NatsPubStatBatchesRefused = uint32(C.KVREG_NATS_PUB_STAT_BATCHES_REFUSED)
)

// Consumer options and counters.
const (
	NatsConFetchBatch       = uint32(C.KVREG_NATS_CON_OPT_FETCH_BATCH)
	NatsConAckWaitMs        = uint32(C.KVREG_NATS_CON_OPT_ACK_WAIT_MS)
	NatsConMaxAckPending    = uint32(C.KVREG_NATS_CON_OPT_MAX_ACK_PENDING)
	NatsConReorderWindow    = uint32(C.KVREG_NATS_CON_OPT_REORDER_WINDOW)
	NatsConReorderMs        = uint32(C.KVREG_NATS_CON_OPT_REORDER_MS)
	NatsConMaxMsgBytes      = uint32(C.KVREG_NATS_CON_OPT_MAX_MSG_BYTES)
	NatsConResume           = uint32(C.KVREG_NATS_CON_OPT_RESUME)
	NatsConConnectTimeoutMs = uint32(C.KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS)
	NatsConSnapshotEvents   = uint32(C.KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS)
	NatsConSnapshotMs       = uint32(C.KVREG_NATS_CON_OPT_SNAPSHOT_MS)
	NatsConSnapshotKeep     = uint32(C.KVREG_NATS_CON_OPT_SNAPSHOT_KEEP)
	NatsConSnapshotPurge    = uint32(C.KVREG_NATS_CON_OPT_SNAPSHOT_PURGE)
	NatsConRestore          = uint32(C.KVREG_NATS_CON_OPT_RESTORE)
	NatsConSnapshotOrphanMs = uint32(C.KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS)
	NatsConMaxHeldBytes     = uint32(C.KVREG_NATS_CON_OPT_MAX_HELD_BYTES)
	NatsSnapshotBucket      = uint32(C.KVREG_NATS_SNAPSHOT_BUCKET)
	NatsSnapshotName        = uint32(C.KVREG_NATS_SNAPSHOT_NAME)
	NatsLivenessBucket      = uint32(C.KVREG_NATS_LIVENESS_BUCKET)

	NatsConStatMessages    = uint32(C.KVREG_NATS_CON_STAT_MESSAGES)
	NatsConStatBatches     = uint32(C.KVREG_NATS_CON_STAT_BATCHES)
	NatsConStatEvents      = uint32(C.KVREG_NATS_CON_STAT_EVENTS)
	NatsConStatDuplicates  = uint32(C.KVREG_NATS_CON_STAT_DUPLICATES)
	NatsConStatLost        = uint32(C.KVREG_NATS_CON_STAT_LOST)
	NatsConStatResets      = uint32(C.KVREG_NATS_CON_STAT_RESETS)
	NatsConStatMalformed   = uint32(C.KVREG_NATS_CON_STAT_MALFORMED)
	NatsConStatStale       = uint32(C.KVREG_NATS_CON_STAT_STALE)
	NatsConStatHeld        = uint32(C.KVREG_NATS_CON_STAT_HELD)
	NatsConStatFetchErrors = uint32(C.KVREG_NATS_CON_STAT_FETCH_ERRORS)
	NatsConStatSnapshots   = uint32(C.KVREG_NATS_CON_STAT_SNAPSHOTS)
	NatsConStatRestored    = uint32(C.KVREG_NATS_CON_STAT_RESTORED)
	NatsConStatOrphans     = uint32(C.KVREG_NATS_CON_STAT_SNAPSHOT_ORPHANS)
	// Microseconds the last Start took, and of that reading and loading snapshots.
	NatsConStatStartUs       = uint32(C.KVREG_NATS_CON_STAT_START_US)
	NatsConStatRestoreReadUs = uint32(C.KVREG_NATS_CON_STAT_RESTORE_READ_US)
	NatsConStatRestoreLoadUs = uint32(C.KVREG_NATS_CON_STAT_RESTORE_LOAD_US)
)

// Index options (NewIndex) and counters (Index.Stat), as kvreg_index.h names them.
const (
	IndexOptBlockSize       = uint32(C.KVREG_INDEX_OPT_BLOCK_SIZE)
	IndexOptHashes          = uint32(C.KVREG_INDEX_OPT_HASHES)
	IndexHashesEngine       = uint64(C.KVREG_INDEX_HASHES_ENGINE)
	IndexHashesOwn          = uint64(C.KVREG_INDEX_HASHES_OWN)
	IndexOptSalt            = uint32(C.KVREG_INDEX_OPT_SALT)
	IndexOptExpectedEntries = uint32(C.KVREG_INDEX_OPT_EXPECTED_ENTRIES)

	IndexStatEntries = uint32(C.KVREG_INDEX_STAT_ENTRIES)
	IndexStatWorkers = uint32(C.KVREG_INDEX_STAT_WORKERS)
)

// Index is a router's kvreg_index, what a NatsConsumer feeds. Close it after its consumers
// (Close returns an error matching ErrBusy while one is open).
type Index struct {
	mu  sync.RWMutex
	ptr *C.kvreg_index
	// consumers counts the open NatsConsumers feeding this index: changed with mu held
	// shared (NewNatsConsumer) or after the consumer is freed (its Close), read by Close.
	consumers atomic.Int32
}

// NewIndex makes an index with options (kvreg_index_config_set pairs; nil: defaults).
func NewIndex(options map[uint32]uint64) (*Index, error) {
	var cfg *C.kvreg_index_config
	if err := check("kvreg_index_config_new", C.kvreg_index_config_new(&cfg)); err != nil {
		return nil, err
	}
	defer C.kvreg_index_config_free(cfg)
	for opt, v := range options {
		if err := check("kvreg_index_config_set", C.kvreg_index_config_set(cfg, C.uint32_t(opt), C.uint64_t(v))); err != nil {
			return nil, err
		}
	}
	x := &Index{}
	if err := check("kvreg_index_new", C.kvreg_index_new(&x.ptr, cfg)); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(x, func(x *Index) { x.Close() })
	return x, nil
}

// Stat returns one counter (IndexStat*).
func (x *Index) Stat(stat uint32) (uint64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return 0, closedErr("kvreg_index_stat")
	}
	var v C.uint64_t
	err := check("kvreg_index_stat", C.kvreg_index_stat(x.ptr, C.uint32_t(stat), &v))
	return uint64(v), err
}

// Digest is kvreg_index_digest: equal for equal contents (workers with their next seqs,
// entries and tiers), whatever order the events came in.
func (x *Index) Digest() (uint64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return 0, closedErr("kvreg_index_digest")
	}
	var v C.uint64_t
	err := check("kvreg_index_digest", C.kvreg_index_digest(x.ptr, &v))
	return uint64(v), err
}

// Dump returns the index's dump (kvreg_index_dump: versioned, checksummed).
func (x *Index) Dump() ([]byte, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return nil, closedErr("kvreg_index_dump_alloc")
	}
	var data unsafe.Pointer
	var n C.size_t
	if err := check("kvreg_index_dump_alloc", C.kvreg_index_dump_alloc(x.ptr, &data, &n)); err != nil {
		return nil, err
	}
	defer C.free(data)
	return C.GoBytes(data, C.int(n)), nil
}

// Load loads a dump into this index, which must know no worker (ErrProto: corrupt,
// ErrInvalid: another configuration, ErrState: not empty).
func (x *Index) Load(dump []byte) error {
	x.mu.Lock() // nothing else may change the index meanwhile
	defer x.mu.Unlock()
	if x.ptr == nil {
		return closedErr("kvreg_index_load")
	}
	var p unsafe.Pointer
	if len(dump) > 0 {
		p = C.CBytes(dump) // C memory: the library never reads Go memory after the call
		defer C.free(p)
	}
	return check("kvreg_index_load", C.kvreg_index_load(x.ptr, p, C.size_t(len(dump))))
}

// Close frees the index. While a NatsConsumer of the index is open it frees nothing and
// returns an error matching ErrBusy: close the consumer first. Waits for calls in progress on
// other goroutines. Idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := x.consumers.Load(); n > 0 {
		return busyErr("Index.Close", int(n), "NatsConsumer")
	}
	if x.ptr != nil {
		C.kvreg_index_free(x.ptr)
		x.ptr = nil
		runtime.SetFinalizer(x, nil)
	}
	return nil
}

// NatsPublisher publishes a Registry's events (the registry must be in POLL delivery: it
// takes them on its own thread, so do not poll that registry yourself). Safe for concurrent
// use: Set, SetString, Start and Stop take turns (see the package's NATS notes), Stat does not
// wait for them.
type NatsPublisher struct {
	g   callGuard
	ptr *C.kvreg_nats_publisher // valid from a successful g.enter to its g.leave
	reg *Registry               // borrowed: kept reachable, counted in reg.publishers until Close
}

// NewNatsPublisher makes a publisher for reg (ErrNotSupported without NATS, ErrInvalid when
// reg does not deliver in POLL mode, ErrBusy when another publisher takes reg's events).
func NewNatsPublisher(reg *Registry) (*NatsPublisher, error) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if reg.ptr == nil {
		return nil, closedErr("kvreg_nats_publisher_new")
	}
	p := &NatsPublisher{reg: reg}
	p.g.init()
	if err := check("kvreg_nats_publisher_new", C.kvreg_nats_publisher_new(&p.ptr, reg.ptr)); err != nil {
		return nil, err
	}
	reg.publishers.Add(1) // with reg.mu held shared: a Registry.Close sees it
	runtime.SetFinalizer(p, func(p *NatsPublisher) { p.Close() })
	return p, nil
}

// call runs f on the live C publisher, or returns the closed error; exclusive calls take the
// turn (the C publisher is configured, started and stopped by one thread at a time).
func (p *NatsPublisher) call(op string, exclusive bool, f func(*C.kvreg_nats_publisher) C.int) error {
	if err := p.g.enter(op, exclusive); err != nil {
		return err
	}
	defer p.g.leave(exclusive)
	return check(op, f(p.ptr))
}

// Set sets a numeric option (NatsPub*) before Start.
func (p *NatsPublisher) Set(opt uint32, v uint64) error {
	return p.call("kvreg_nats_publisher_set", true, func(c *C.kvreg_nats_publisher) C.int {
		return C.kvreg_nats_publisher_set(c, C.uint32_t(opt), C.uint64_t(v))
	})
}

// SetString sets a string option (NatsURL, NatsStream, NatsSubjectPrefix, ...) before Start.
func (p *NatsPublisher) SetString(opt uint32, v string) error {
	cs, err := cString("kvreg_nats_publisher_set_string", v)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	return p.call("kvreg_nats_publisher_set_string", true, func(c *C.kvreg_nats_publisher) C.int {
		return C.kvreg_nats_publisher_set_string(c, C.uint32_t(opt), cs)
	})
}

// Start connects, makes sure the stream exists and starts the sender thread.
func (p *NatsPublisher) Start() error {
	return p.call("kvreg_nats_publisher_start", true, func(c *C.kvreg_nats_publisher) C.int {
		return C.kvreg_nats_publisher_start(c)
	})
}

// Stop publishes what is queued and waits for the acks (bounded by NatsPubLingerMs). Once
// Close has started it returns ErrStale at once (Close stops the publisher itself).
func (p *NatsPublisher) Stop() error {
	return p.call("kvreg_nats_publisher_stop", true, func(c *C.kvreg_nats_publisher) C.int {
		return C.kvreg_nats_publisher_stop(c)
	})
}

// Stat returns one counter (NatsPubStat*).
func (p *NatsPublisher) Stat(stat uint32) (uint64, error) {
	var v C.uint64_t
	err := p.call("kvreg_nats_publisher_stat", false, func(c *C.kvreg_nats_publisher) C.int {
		return C.kvreg_nats_publisher_stat(c, C.uint32_t(stat), &v)
	})
	return uint64(v), err
}

// Close stops the publisher if it runs (as Stop, bounded by NatsPubLingerMs) and frees it,
// after which its Registry can be closed. Safe from any goroutine: calls waiting for their
// turn return ErrStale, and Close waits for the call in progress (each is bounded: Start by
// NatsPubConnectTimeoutMs, Stop by NatsPubLingerMs). Idempotent; a concurrent Close returns
// once the publisher is freed.
func (p *NatsPublisher) Close() error {
	if !p.g.beginClose(nil) {
		return nil
	}
	C.kvreg_nats_publisher_free(p.ptr)
	p.ptr = nil
	p.reg.publishers.Add(-1) // only now: the sender thread used the registry until the free
	p.reg = nil
	runtime.SetFinalizer(p, nil)
	p.g.endClose()
	return nil
}

// NatsConsumer is a router replica: a durable pull consumer applying the stream to an Index.
// Run fetches and applies on the caller's goroutine; Stop, Stat and Close may come from
// others at any time (the other calls take turns: see the package's NATS notes).
type NatsConsumer struct {
	g   callGuard
	ptr *C.kvreg_nats_consumer // valid from a successful g.enter to its g.leave
	idx *Index                 // borrowed: kept reachable, counted in idx.consumers until Close
}

// NewNatsConsumer makes a consumer feeding idx.
func NewNatsConsumer(idx *Index) (*NatsConsumer, error) {
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	if idx.ptr == nil {
		return nil, closedErr("kvreg_nats_consumer_new")
	}
	c := &NatsConsumer{idx: idx}
	c.g.init()
	if err := check("kvreg_nats_consumer_new", C.kvreg_nats_consumer_new(&c.ptr, idx.ptr)); err != nil {
		return nil, err
	}
	idx.consumers.Add(1) // with idx.mu held shared: an Index.Close sees it
	runtime.SetFinalizer(c, func(c *NatsConsumer) { c.Close() })
	return c, nil
}

// call runs f on the live C consumer, or returns the closed error; exclusive calls take the
// turn (one thread at a time runs a C consumer).
func (c *NatsConsumer) call(op string, exclusive bool, f func(*C.kvreg_nats_consumer) C.int) error {
	if err := c.g.enter(op, exclusive); err != nil {
		return err
	}
	defer c.g.leave(exclusive)
	return check(op, f(c.ptr))
}

// Set sets a numeric option (NatsCon*) before Start.
func (c *NatsConsumer) Set(opt uint32, v uint64) error {
	return c.call("kvreg_nats_consumer_set", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_set(p, C.uint32_t(opt), C.uint64_t(v))
	})
}

// SetString sets NatsURL, NatsStream, NatsDurable or NatsFilter before Start.
func (c *NatsConsumer) SetString(opt uint32, v string) error {
	cs, err := cString("kvreg_nats_consumer_set_string", v)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	return c.call("kvreg_nats_consumer_set_string", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_set_string(p, C.uint32_t(opt), cs)
	})
}

// Start connects and (re)creates the durable consumer.
func (c *NatsConsumer) Start() error {
	return c.call("kvreg_nats_consumer_start", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_start(p)
	})
}

// Run fetches and applies for timeoutMs (0: one fetch of what is ready; -1: until Stop or
// Close).
func (c *NatsConsumer) Run(timeoutMs int) error {
	return c.call("kvreg_nats_consumer_run", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_run(p, C.int(timeoutMs))
	})
}

// Stop makes a Run in progress return within one fetch wait (a Stop while no Run is in
// progress makes the next Run return at once, as in C). Safe from any goroutine and never
// waits for another call; once Close has started it returns ErrStale (Close stops a Run
// itself).
func (c *NatsConsumer) Stop() error {
	// mu (held for the C call, which only sets a flag) keeps Close from freeing meanwhile.
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.g.closing {
		return closedErr("kvreg_nats_consumer_stop")
	}
	return check("kvreg_nats_consumer_stop", C.kvreg_nats_consumer_stop(c.ptr))
}

// Stat returns one counter (NatsConStat*).
func (c *NatsConsumer) Stat(stat uint32) (uint64, error) {
	var v C.uint64_t
	err := c.call("kvreg_nats_consumer_stat", false, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_stat(p, C.uint32_t(stat), &v)
	})
	return uint64(v), err
}

// Worker returns the instance and next seq the consumer follows for (workerID, dpRank);
// an error matching ErrNotFound when it has not seen the worker. Between Runs: called during
// one, it waits for the Run to end.
func (c *NatsConsumer) Worker(workerID uint64, dpRank uint32) (instance, nextSeq uint64, err error) {
	var i, n C.uint64_t
	err = c.call("kvreg_nats_consumer_worker", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_worker(p, C.uint64_t(workerID), C.uint32_t(dpRank), &i, &n)
	})
	return uint64(i), uint64(n), err
}

// Snapshot writes a snapshot now (needs NatsSnapshotBucket; between Runs: called during one,
// it waits for the Run to end) and returns the stream sequence it covers; a consumer started
// with the same bucket restores it.
func (c *NatsConsumer) Snapshot() (uint64, error) {
	var seq C.uint64_t
	err := c.call("kvreg_nats_consumer_snapshot", true, func(p *C.kvreg_nats_consumer) C.int {
		return C.kvreg_nats_consumer_snapshot(p, &seq)
	})
	return uint64(seq), err
}

// Close frees the consumer (unacknowledged batches are redelivered to its durable later),
// after which its Index can be closed. Safe from any goroutine: a Run in progress is stopped
// (it returns nil), calls waiting for their turn return ErrStale, and Close waits for the
// call in progress before it frees. Idempotent; a concurrent Close returns once the consumer
// is freed.
func (c *NatsConsumer) Close() error {
	// stop runs with c.g.mu held, before each wait for the calls in progress: a Run that
	// took the turn after an earlier stop was used up gets its own.
	if !c.g.beginClose(func() { C.kvreg_nats_consumer_stop(c.ptr) }) {
		return nil
	}
	C.kvreg_nats_consumer_free(c.ptr)
	c.ptr = nil
	c.idx.consumers.Add(-1) // only now: the consumer used the index until the free
	c.idx = nil
	runtime.SetFinalizer(c, nil)
	c.g.endClose()
	return nil
}
