package kvreg

/*
#include <stdlib.h>
#include <kvreg.h>
*/
import "C"

import (
	"context"
	"time"
	"unsafe"
)

// EventKind tells a Register from a Remove event.
type EventKind uint32

// Event kinds (KVREG_EVENT_*).
const (
	EventRegister = EventKind(C.KVREG_EVENT_REGISTER) // the hash became registered (first pool)
	EventRemove   = EventKind(C.KVREG_EVENT_REMOVE)   // the hash left its last pool
)

func (k EventKind) String() string {
	switch k {
	case EventRegister:
		return "Register"
	case EventRemove:
		return "Remove"
	}
	return "EventKind(" + uitoa(uint64(k)) + ")"
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// Event is a Go copy of one kvreg_event; it owns its Tokens.
type Event struct {
	Kind               EventKind
	PoolID             uint32 // Pool.ID() of the pool whose call caused it
	ID                 uint64 // 0, 1, 2, ... per registry; a gap means dropped events
	SequenceHash       uint64
	BlockHash          uint64
	ParentSequenceHash uint64 // 0 when !HasParent
	HasParent          bool
	Tokens             []uint32 // nil when the library did not know them
}

// pollChunk bounds one kvreg_registry_poll call, and so the C buffer the registry keeps.
const pollChunk = 1024

// Poll moves up to max queued events (oldest first) out of the registry and returns Go
// copies; an empty slice means the queue was empty. ErrInvalid if max <= 0 or the registry
// was made with DiscardEvents. Safe for concurrent use; each event goes to one caller.
func (r *Registry) Poll(max int) ([]Event, error) {
	if max <= 0 {
		return nil, &Error{Code: int(C.KVREG_EINVAL), Op: "Registry.Poll"}
	}
	var out []Event
	err := r.with("Registry.Poll", func(p *C.kvreg_registry) error {
		r.pollMu.Lock()
		defer r.pollMu.Unlock()
		for len(out) < max {
			want := max - len(out)
			if want > pollChunk {
				want = pollChunk
			}
			buf := r.pollBuffer(want)
			var n C.size_t
			if err := check("kvreg_registry_poll",
				C.kvreg_registry_poll(p, buf, C.size_t(want), &n)); err != nil {
				return err
			}
			// Copy now: the tokens die at the next poll, which is the next loop turn.
			for _, ev := range unsafe.Slice(buf, int(n)) {
				out = append(out, eventFromC(&ev))
			}
			if int(n) < want {
				break // queue drained
			}
		}
		return nil
	})
	if err != nil {
		// Events already moved out of the queue are still returned: dropping them would
		// lose them for good.
		if len(out) > 0 {
			return out, nil
		}
		return nil, err
	}
	if out == nil {
		out = []Event{}
	}
	return out, nil
}

// pollBuffer returns a C array of at least n events; call with mu (shared) and pollMu held.
func (r *Registry) pollBuffer(n int) *C.kvreg_event {
	if r.pollCap < n {
		if r.pollBuf != nil {
			C.free(unsafe.Pointer(r.pollBuf))
		}
		size := C.size_t(n) * C.size_t(unsafe.Sizeof(C.kvreg_event{}))
		r.pollBuf = (*C.kvreg_event)(C.malloc(size)) // cgo's malloc panics rather than return NULL
		r.pollCap = n
	}
	return r.pollBuf
}

func eventFromC(c *C.kvreg_event) Event {
	ev := Event{
		Kind:               EventKind(c.kind),
		PoolID:             uint32(c.pool_id),
		ID:                 uint64(c.event_id),
		SequenceHash:       uint64(c.sequence_hash),
		BlockHash:          uint64(c.block_hash),
		ParentSequenceHash: uint64(c.parent_sequence_hash),
		HasParent:          c.has_parent != 0,
	}
	if c.n_tokens > 0 && c.tokens != nil {
		ev.Tokens = make([]uint32, int(c.n_tokens))
		copy(ev.Tokens, unsafe.Slice((*uint32)(unsafe.Pointer(c.tokens)), int(c.n_tokens)))
	}
	return ev
}

// EventStream is a running Registry.Events feed.
type EventStream struct {
	// C yields events in event-id order. It is closed when the context is done, when the
	// registry is closed, or when polling fails; Err then says which.
	C   <-chan Event
	err error // written before C is closed
}

// Err is nil while C is open; after C is closed it is the reason: ctx.Err(), or an error
// matching ErrStale once the registry was closed.
func (s *EventStream) Err() error { return s.err }

// DefaultEventInterval is the polling period Events uses when given a non-positive one.
const DefaultEventInterval = 10 * time.Millisecond

// Events starts a goroutine that polls the registry every interval (draining the queue on
// each tick) and sends the events on the stream's channel until ctx is done or the registry
// is closed. Events already polled but not yet received when ctx ends are lost, so cancel
// only once the remaining events no longer matter (or drain with Poll afterwards: events
// not yet polled stay queued). Use one consumer per registry: Poll from elsewhere takes
// events away from the stream. The goroutine keeps the registry reachable, so end the
// stream (cancel ctx or Close the registry) when done with it.
func (r *Registry) Events(ctx context.Context, interval time.Duration) *EventStream {
	if interval <= 0 {
		interval = DefaultEventInterval
	}
	ch := make(chan Event, pollChunk)
	s := &EventStream{C: ch}
	go func() {
		defer close(ch)
		s.err = r.feed(ctx, interval, ch)
	}()
	return s
}

// feed is the body of the Events goroutine; it returns why it stopped.
func (r *Registry) feed(ctx context.Context, interval time.Duration, ch chan<- Event) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		for {
			evs, err := r.Poll(pollChunk)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if len(evs) < pollChunk {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}
