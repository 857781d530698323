package kvreg

/*
#include <stdlib.h>
#include <kvreg.h>
*/
import "C"

import (
	"runtime"
	"sync"
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
	// DiscardEvents counts and drops every event instead of queueing it; Poll then fails
	// with ErrInvalid. For users who only need the registry's bookkeeping.
	DiscardEvents bool
}

// Registry is the global registry that pools share. It is safe for concurrent use.
//
// The C registry owns its pools: Close frees them too, after which every method of the
// registry and of its pools returns an error matching ErrStale.
type Registry struct {
	// mu is held shared by every call into the library and exclusively by Close, because
	// kvreg_registry_free must not run while another thread uses the registry or its pools.
	mu  sync.RWMutex
	ptr *C.kvreg_registry // nil once closed

	// pollMu serialises Poll: the tokens of polled events live only until the next
	// kvreg_registry_poll on this registry, so two pollers could invalidate each other's.
	pollMu  sync.Mutex
	pollBuf *C.kvreg_event // C memory, so the library never writes into Go memory
	pollCap int
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
	runtime.SetFinalizer(r, (*Registry).Close)
	return r, nil
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Close frees the registry, all its pools and stored blocks; queued events are discarded.
// It waits for calls in progress on other goroutines. Idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
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

// Contains reports whether sequenceHash is registered in any pool of the registry.
func (r *Registry) Contains(sequenceHash uint64) (found bool, err error) {
	err = r.with("Registry.Contains", func(p *C.kvreg_registry) error {
		v := C.kvreg_registry_contains(p, C.uint64_t(sequenceHash))
		found = v == 1
		return check("kvreg_registry_contains", v)
	})
	return found, err
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
