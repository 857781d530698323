package kvreg

import (
	"log"
	"sync"
	"sync/atomic"
)

// Leak describes a Registry, Pool, Sequence, Encoder or Decoder that became garbage without
// Close.
//
// The binding's lifetime rule is explicit Close. Finalizers are only a safety net that reports
// the leak; they never emit events behind the caller's back:
//   - a leaked Registry, Sequence, Encoder or Decoder is freed (kvreg_registry_free emits no
//     events, and the others have none), so only C memory comes back;
//   - a leaked Pool is NOT freed, because kvreg_pool_free would emit Remove events at a time
//     nobody chose. Its references stay in the registry (its hashes stay registered, its id
//     stays taken) until Registry.Close frees everything without events.
type Leak struct {
	Type   string // "Registry", "Pool", "Sequence", "Encoder" or "Decoder"
	Name   string // the pool's name; "" for the other types
	PoolID uint32 // the pool's id; 0 for the other types
	// Held is, for a Pool, how many distinct hashes it still held; they stay registered
	// (no Remove events) until Registry.Close. 0 for the other types.
	Held int
}

func (l Leak) String() string {
	s := "kvreg: " + l.Type + " garbage-collected without Close"
	switch l.Type {
	case "Pool":
		s += " (name " + quote(l.Name) + ", id " + uitoa(uint64(l.PoolID)) + "): its " +
			uitoa(uint64(l.Held)) + " hashes stay registered, without Remove events, until " +
			"Registry.Close"
	case "Registry", "Sequence", "Encoder", "Decoder":
		s += ": freed by the finalizer"
	}
	return s
}

func quote(s string) string { return "\"" + s + "\"" }

var (
	leakCount   atomic.Uint64
	leakMu      sync.Mutex
	leakHandler func(Leak) // nil: defaultLeakHandler
)

func defaultLeakHandler(l Leak) { log.Print(l.String()) }

// SetLeakHandler makes the finalizers call h for every leak they find, instead of writing a
// line with the standard log package (the default, restored by h == nil). It returns the
// previous handler (nil for the default). h runs on the runtime's finalizer goroutine: it
// must return quickly and must not call Close on kvreg objects it did not create.
func SetLeakHandler(h func(Leak)) (previous func(Leak)) {
	leakMu.Lock()
	defer leakMu.Unlock()
	previous, leakHandler = leakHandler, h
	return previous
}

// Leaks is the number of leaks the finalizers have reported since the program started.
func Leaks() uint64 { return leakCount.Load() }

func reportLeak(l Leak) {
	leakCount.Add(1)
	leakMu.Lock()
	h := leakHandler
	leakMu.Unlock()
	if h == nil {
		h = defaultLeakHandler
	}
	h(l)
}
