package kvreg

/*
#include <stdlib.h>
#include <kvreg.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Options configure a Registry. The zero value (or a nil *Options) gives the library's
// defaults, except that events are queued for Poll: the binding never installs a callback.
type Options struct {
	// KeepTokens makes the registry store one copy of each block's tokens, so Pool.Tokens
	// works and Remove events carry tokens.
	KeepTokens bool
	// PollCapacity bounds the event queue (0: library default, 65536). When it is full, new
	// events are dropped and counted (StatEventsDropped) and their event ids are skipped.
	PollCapacity uint64
	// Shards is the number of lock shards, a power of two (0: library default, 64).
	Shards uint32
	// ReserveBlocks sets memory aside for that many blocks (one pool's hold on a hash) when
	// the registry is made: up to that many held, registering allocates nothing (0: none).
	ReserveBlocks uint64
	// DiscardEvents counts and drops every event instead of queueing it; Poll then fails
	// with ErrInvalid. For users who only need the registry's bookkeeping.
	DiscardEvents bool
	// EventMode says what a Register and a Remove stand for when pools on several media hold
	// a hash (KVREG_OPT_EVENT_MODE): EventsGlobal (the default) or EventsPerTier.
	EventMode EventMode
}

// EventMode is a registry's tier semantics (KVREG_OPT_EVENT_MODE in kvreg.h).
type EventMode uint32

const (
	// EventsGlobal: one Register when a hash first enters any pool, one Remove when it leaves
	// the last one; the Remove carries its Register's medium.
	EventsGlobal EventMode = C.KVREG_EVENTS_GLOBAL
	// EventsPerTier: a Register and a Remove per medium, as vLLM's offloading connector and
	// Dynamo's block manager emit (stored on GPU, stored on CPU when offloaded, removed from
	// GPU while the CPU copy stays).
	EventsPerTier EventMode = C.KVREG_EVENTS_PER_TIER
)

// Registry is the global registry that pools share. It is safe for concurrent use.
//
// The C registry owns its pools: Close frees them too, after which every method of the
// registry and of its pools returns an error matching ErrStale.
type Registry struct {
	// mu is held shared by every call into the library and exclusively by Close, because
	// kvreg_registry_free must not run while another thread uses the registry or its pools.
	mu  sync.RWMutex
	ptr *C.kvreg_registry // nil once closed
	// closing is set by Close before it wakes a waiting poll, so that a waiter that wakes up
	// (or one that was about to wait) gives up instead of waiting again while Close waits
	// for mu.
	closing atomic.Bool
	// publishers counts the open NatsPublishers of this registry: the C registry must
	// outlive them, so Close refuses (ErrBusy) while any is open. Changed with mu held shared
	// (NewNatsPublisher) or after the publisher is freed (its Close), read by Close.
	publishers atomic.Int32

	// The poll turn serialises the pollers: the tokens of polled events live only until the
	// next kvreg_registry_poll(_wait) on this registry, so two pollers could invalidate each
	// other's. pollBusy says the turn is taken, pollWaits that its holder may sleep in
	// kvreg_registry_poll_wait (PollWait, Events); pollWanted counts Poll calls waiting for it,
	// which go before waiting pollers (PollWait, Events) so that Poll never waits for an
	// event. pollCond is broadcast when the turn is released, when Close starts and when an
	// Events stream's context ends. pollBuf and pollCap belong to the turn's holder.
	pollMu     sync.Mutex
	pollCond   sync.Cond
	pollBusy   bool
	pollWaits  bool
	pollWanted int
	pollBuf    *C.kvreg_event // C memory, so the library never writes into Go memory
	pollCap    int

	// cPolls counts kvreg_registry_poll and kvreg_registry_poll_wait calls, so tests can
	// check that an idle Events stream sleeps instead of polling.
	cPolls atomic.Uint64
}

// NewRegistry creates a registry; opts may be nil.
func NewRegistry(opts *Options) (*Registry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var cfg *C.kvreg_config
	if err := check("kvreg_config_new", C.kvreg_config_new(&cfg)); err != nil {
		return nil, err
	}
	defer C.kvreg_config_free(cfg)

	delivery := uint64(C.KVREG_DELIVERY_POLL)
	if o.DiscardEvents {
		delivery = uint64(C.KVREG_DELIVERY_INLINE) // with no callback: counted and dropped
	}
	settings := []struct {
		opt C.uint32_t
		val uint64
		set bool
	}{
		{C.KVREG_OPT_DELIVERY, delivery, true},
		{C.KVREG_OPT_KEEP_TOKENS, boolU64(o.KeepTokens), true},
		{C.KVREG_OPT_POLL_CAPACITY, o.PollCapacity, o.PollCapacity != 0},
		{C.KVREG_OPT_SHARDS, uint64(o.Shards), o.Shards != 0},
		{C.KVREG_OPT_RESERVE_BLOCKS, o.ReserveBlocks, o.ReserveBlocks != 0},
		{C.KVREG_OPT_EVENT_MODE, uint64(o.EventMode), o.EventMode != EventsGlobal},
	}
	for _, s := range settings {
		if !s.set {
			continue
		}
		if err := check("kvreg_config_set", C.kvreg_config_set(cfg, s.opt,
			C.uint64_t(s.val))); err != nil {
			return nil, err
		}
	}

	var p *C.kvreg_registry
	if err := check("kvreg_registry_new", C.kvreg_registry_new(&p, cfg)); err != nil {
		return nil, err
	}
	r := &Registry{ptr: p}
	r.pollCond.L = &r.pollMu
	runtime.SetFinalizer(r, (*Registry).finalize)
	return r, nil
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Close frees the registry, all its pools and stored blocks; queued events are discarded and
// no events are emitted. It wakes a PollWait or Events stream waiting on the registry (they
// then return an error matching ErrStale) and waits for calls in progress on other
// goroutines. Idempotent.
//
// While a NatsPublisher of the registry is open, Close frees nothing and returns an error
// matching ErrBusy (the publisher's thread uses the registry until the publisher's Close):
// close the publisher first.
func (r *Registry) Close() error {
	if n := r.publishers.Load(); n > 0 {
		return busyErr("Registry.Close", int(n), "NatsPublisher")
	}
	r.closing.Store(true)
	// A poll waiting in the library holds mu shared, and so do pollers waiting for their
	// turn: wake them (after setting closing, so they do not wait again) or the exclusive
	// lock below would wait for the next event.
	// kvreg_registry_wakeup is never lost: if no poll sleeps yet, the next one returns at once.
	r.mu.RLock()
	if r.ptr != nil {
		C.kvreg_registry_wakeup(r.ptr)
	}
	r.mu.RUnlock()
	r.wakePollers() // and pollers waiting for their turn, so they see closing

	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.publishers.Load(); n > 0 {
		// A publisher was made while this Close woke the pollers: refuse after all. Pollers
		// that saw closing meanwhile gave up, but a registry with a publisher refuses polls
		// anyway (ErrBusy: the publisher is its only poller).
		r.closing.Store(false)
		return busyErr("Registry.Close", int(n), "NatsPublisher")
	}
	r.closing.Store(true) // again: a concurrent Close refused above may have cleared it
	if r.ptr != nil {
		C.kvreg_registry_free(r.ptr)
		r.ptr = nil
		runtime.SetFinalizer(r, nil)
	}
	if r.pollBuf != nil {
		C.free(unsafe.Pointer(r.pollBuf))
		r.pollBuf = nil
		r.pollCap = 0
	}
	return nil
}

// finalize is the leak safety net: freeing a registry emits no events, so it frees it, and
// it reports the leak. Pools keep their registry reachable, so this runs only once no Pool
// (and no Events stream) is left.
func (r *Registry) finalize() {
	r.Close()
	reportLeak(Leak{Type: "Registry"})
}

// with runs f on the live C pointer with mu held shared, or returns the closed error.
func (r *Registry) with(op string, f func(p *C.kvreg_registry) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.ptr == nil {
		return closedErr(op)
	}
	err := f(r.ptr)
	runtime.KeepAlive(r)
	return err
}

// Contains reports whether sequenceHash is registered in any pool of the registry. On error
// (ErrStale once closed) found is false and err says why: an error is never a plain "no".
func (r *Registry) Contains(sequenceHash uint64) (found bool, err error) {
	err = r.with("Registry.Contains", func(p *C.kvreg_registry) error {
		var present C.int
		err := check("kvreg_registry_contains",
			C.kvreg_registry_contains(p, C.uint64_t(sequenceHash), &present))
		found = err == nil && present != 0
		return err
	})
	return found, err
}

// Flush waits until every event emitted before the call has been delivered: queued for Poll
// (or dropped and counted, when the queue is full or with DiscardEvents). Once several
// goroutines emit events, a call may return before its own events are queued (another thread
// that is delivering queues them), so call Flush before polling or reading event counters
// (Stats) when you need every event of calls that have returned.
func (r *Registry) Flush() error {
	return r.with("Registry.Flush", func(p *C.kvreg_registry) error {
		return check("kvreg_registry_flush", C.kvreg_registry_flush(p))
	})
}

// Wakeup makes a PollWait that is waiting on the registry (or the Events stream's wait)
// return now, possibly with no events; if none is waiting, the next wait returns at once. An
// Events stream just waits again, unless its context is done. Safe from any goroutine;
// ErrStale once the registry is closed (Close wakes waiters itself).
func (r *Registry) Wakeup() error {
	return r.with("Registry.Wakeup", func(p *C.kvreg_registry) error {
		return check("kvreg_registry_wakeup", C.kvreg_registry_wakeup(p))
	})
}

// Stat selects one registry counter (KVREG_STAT_*).
type Stat uint32

// Registry counters; see Stats for their meaning.
const (
	StatHashes         = Stat(C.KVREG_STAT_HASHES)
	StatPools          = Stat(C.KVREG_STAT_POOLS)
	StatEventsRegister = Stat(C.KVREG_STAT_EVENTS_REGISTER)
	StatEventsRemove   = Stat(C.KVREG_STAT_EVENTS_REMOVE)
	StatEventsDropped  = Stat(C.KVREG_STAT_EVENTS_DROPPED)
	StatEventsQueued   = Stat(C.KVREG_STAT_EVENTS_QUEUED)
	StatNextEventID    = Stat(C.KVREG_STAT_NEXT_EVENT_ID)
	StatTokenBytes     = Stat(C.KVREG_STAT_TOKEN_BYTES)
	StatEventsCleared  = Stat(C.KVREG_STAT_EVENTS_CLEARED)
)

// Stat reads one counter. ErrInvalid for an unknown stat.
func (r *Registry) Stat(s Stat) (value uint64, err error) {
	err = r.with("Registry.Stat", func(p *C.kvreg_registry) error {
		var v C.uint64_t
		e := check("kvreg_registry_stat", C.kvreg_registry_stat(p, C.uint32_t(s), &v))
		value = uint64(v)
		return e
	})
	return value, err
}

// Stats is a snapshot of every counter. Each value is consistent on its own, but they are
// read one after another, so under concurrent use they need not agree with each other.
type Stats struct {
	Hashes         uint64 // distinct hashes registered in any pool
	Pools          uint64 // live pools
	EventsRegister uint64 // Register events emitted (delivered, queued or dropped)
	EventsRemove   uint64 // Remove events emitted
	EventsDropped  uint64 // dropped: queue full, or DiscardEvents
	EventsQueued   uint64 // waiting for Poll
	NextEventID    uint64 // event id the next event will get
	TokenBytes     uint64 // bytes of stored tokens (KeepTokens)
	EventsCleared  uint64 // Cleared events emitted (Registry.Clear)
}

// Stats reads every counter.
func (r *Registry) Stats() (Stats, error) {
	var st Stats
	fields := []struct {
		s   Stat
		dst *uint64
	}{
		{StatHashes, &st.Hashes}, {StatPools, &st.Pools},
		{StatEventsRegister, &st.EventsRegister}, {StatEventsRemove, &st.EventsRemove},
		{StatEventsDropped, &st.EventsDropped}, {StatEventsQueued, &st.EventsQueued},
		{StatNextEventID, &st.NextEventID}, {StatTokenBytes, &st.TokenBytes},
		{StatEventsCleared, &st.EventsCleared},
	}
	for _, f := range fields {
		v, err := r.Stat(f.s)
		if err != nil {
			return Stats{}, err
		}
		*f.dst = v
	}
	return st, nil
}
