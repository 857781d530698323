package kvreg

/*
#include <stdlib.h>
#include <kvreg.h>
*/
import "C"

import (
	"context"
	"math"
	"sync"
	"time"
	"unsafe"
)

// EventKind tells Register, Remove and Cleared events apart.
type EventKind uint32

// Event kinds (KVREG_EVENT_*).
const (
	EventRegister = EventKind(C.KVREG_EVENT_REGISTER) // the hash became registered (first pool)
	EventRemove   = EventKind(C.KVREG_EVENT_REMOVE)   // the hash left its last pool
	// EventCleared: Registry.Clear emptied every pool at once (no Remove per hash). Its
	// PoolID, Medium and hashes are 0.
	EventCleared = EventKind(C.KVREG_EVENT_CLEARED)
)

// EventIDSnapshot is the ID of the events a Snapshot carries (they were never emitted).
const EventIDSnapshot = uint64(C.KVREG_EVENT_ID_SNAPSHOT)

func (k EventKind) String() string {
	switch k {
	case EventRegister:
		return "Register"
	case EventRemove:
		return "Remove"
	case EventCleared:
		return "Cleared"
	}
	return "EventKind(" + uitoa(uint64(k)) + ")"
}

// Medium is the storage medium (tier) of a pool, carried in its events (KVREG_MEDIUM_*).
type Medium uint32

// Media. A pool made with NewPool is a GPU pool.
const (
	MediumGPU      = Medium(C.KVREG_MEDIUM_GPU)
	MediumCPU      = Medium(C.KVREG_MEDIUM_CPU)
	MediumStorage  = Medium(C.KVREG_MEDIUM_STORAGE)
	MediumExternal = Medium(C.KVREG_MEDIUM_EXTERNAL)
	// MediumUnknown is a decoded WireEvent's medium when its name (WireEvent.MediumName) is
	// not one the library knows. Pools never have it.
	MediumUnknown = Medium(^uint32(0))
)

func (m Medium) String() string {
	switch m {
	case MediumGPU:
		return "GPU"
	case MediumCPU:
		return "CPU"
	case MediumStorage:
		return "STORAGE"
	case MediumExternal:
		return "EXTERNAL"
	case MediumUnknown:
		return "unknown"
	}
	return "Medium(" + uitoa(uint64(m)) + ")"
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
	Medium             Medium   // of the pool whose call caused it (MediumGPU for Cleared)
}

// pollChunk bounds one kvreg_registry_poll call, and so the C buffer the registry keeps.
const pollChunk = 1024

// Poll moves up to max queued events (oldest first) out of the registry and returns Go
// copies; an empty slice means the queue was empty. It never waits for events (see PollWait):
// if a PollWait or Events stream is waiting on the registry, Poll wakes it to take its turn.
// ErrInvalid if max <= 0 or the registry was made with DiscardEvents. Safe for concurrent
// use; each event goes to one caller.
func (r *Registry) Poll(max int) ([]Event, error) {
	if max <= 0 {
		return nil, &Error{Code: int(C.KVREG_EINVAL), Op: "Registry.Poll"}
	}
	return r.poll(nil, "Registry.Poll", max, 0)
}

// PollWait is Poll that, when the queue is empty, waits (asleep in the library, no polling)
// until an event is queued, Wakeup or Close is called, or timeout passes; a negative timeout
// waits without limit, 0 does not wait, others are rounded up to whole milliseconds. It
// returns an empty slice when it woke without events: after the timeout, after Wakeup, or
// when a concurrent Poll needed the queue. Several waiting pollers take turns. After Close
// (also one that ends the wait) the error matches ErrStale.
func (r *Registry) PollWait(max int, timeout time.Duration) ([]Event, error) {
	if max <= 0 {
		return nil, &Error{Code: int(C.KVREG_EINVAL), Op: "Registry.PollWait"}
	}
	return r.poll(context.Background(), "Registry.PollWait", max, timeoutMS(timeout))
}

// timeoutMS converts a PollWait timeout to kvreg_registry_poll_wait's timeout_ms.
func timeoutMS(d time.Duration) int {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(ms)
}

// poll is Poll (ctx nil: never waits for events) and PollWait / the Events stream (ctx not
// nil: the wait for the poll turn ends with ctx, and the first C call is
// kvreg_registry_poll_wait with timeoutMS).
func (r *Registry) poll(ctx context.Context, op string, max int, timeoutMS int) ([]Event, error) {
	var out []Event
	err := r.with(op, func(p *C.kvreg_registry) error {
		if err := r.takeTurn(ctx, op, p); err != nil {
			return err
		}
		defer r.releaseTurn()
		wait := ctx != nil
		for len(out) < max {
			want := max - len(out)
			if want > pollChunk {
				want = pollChunk
			}
			buf := r.pollBuffer(want)
			var n C.size_t
			r.cPolls.Add(1)
			if wait {
				wait = false // only the first call waits; the rest drains what is queued
				if err := check("kvreg_registry_poll_wait", C.kvreg_registry_poll_wait(p, buf,
					C.size_t(want), &n, C.int(timeoutMS))); err != nil {
					return err
				}
			} else if err := check("kvreg_registry_poll",
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
		if ctx != nil && len(out) == 0 && r.closing.Load() {
			return closedErr(op) // Close ended the wait
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

// takeTurn takes the poll turn; call with mu held shared.
//
// Poll (ctx nil) goes first: if the turn is taken, it wakes the holder, which may be asleep in
// kvreg_registry_poll_wait, and gets the turn as soon as it is released.
//
// A waiting poller (ctx not nil) queues behind every Poll and gives up when ctx is done or
// Close has started. It checks both with pollMu held, after which it only sleeps in the
// library: Close and the stream's ctx watcher set what it checks before they call
// kvreg_registry_wakeup, which is never lost (if nothing sleeps yet, the next wait returns at
// once), and only the turn's holder can be sleeping, so that wake-up reaches this poller.
func (r *Registry) takeTurn(ctx context.Context, op string, p *C.kvreg_registry) error {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	if ctx == nil {
		if r.pollBusy {
			r.pollWanted++
			if r.pollWaits { // else the holder is a Poll: it finishes without a nudge
				C.kvreg_registry_wakeup(p)
			}
			for r.pollBusy {
				r.pollCond.Wait()
			}
			r.pollWanted--
		}
		r.pollBusy = true
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.closing.Load() {
			return closedErr(op)
		}
		if !r.pollBusy && r.pollWanted == 0 {
			r.pollBusy, r.pollWaits = true, true
			return nil
		}
		r.pollCond.Wait()
	}
}

func (r *Registry) releaseTurn() {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.pollBusy, r.pollWaits = false, false
	r.pollCond.Broadcast()
}

// wakePollers makes pollers waiting for the turn check ctx and closing again.
func (r *Registry) wakePollers() {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.pollCond.Broadcast()
}

// pollBuffer returns a C array of at least n events; call with mu (shared) and the poll turn.
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
		Medium:             Medium(c.medium),
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
	C <-chan Event

	mu  sync.Mutex
	err error // set just before C is closed
}

// Err is nil while the stream runs; once it has stopped (C is closed, or about to be) it is
// the reason: ctx.Err(), or an error matching ErrStale once the registry was closed. Safe to
// call from any goroutine at any time.
func (s *EventStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *EventStream) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Events starts a goroutine that waits for events (asleep in kvreg_registry_poll_wait: an
// idle stream costs no CPU and no timer ticks) and sends them on the stream's channel until
// ctx is done or the registry is closed; either one wakes the wait at once. Events already
// polled but not yet received when ctx ends are lost, so cancel only once the remaining
// events no longer matter (or drain with Poll afterwards: events not yet polled stay
// queued). Use one consumer per registry: Poll from elsewhere takes events away from the
// stream. The goroutine keeps the registry reachable, so end the stream (cancel ctx or
// Close the registry) when done with it.
func (r *Registry) Events(ctx context.Context) *EventStream {
	ch := make(chan Event, pollChunk)
	s := &EventStream{C: ch}
	go func() {
		err := r.feed(ctx, ch)
		s.setErr(err) // before close: a receiver that sees C closed finds Err set
		close(ch)
	}()
	return s
}

// feed is the body of the Events goroutine; it returns why it stopped.
func (r *Registry) feed(ctx context.Context, ch chan<- Event) error {
	// The wait in C cannot see ctx, so a watcher turns ctx's end into a wake-up (of the wait
	// in C, and of a wait for the poll turn); see takeTurn for why none is lost.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			_ = r.Wakeup() // ErrStale if the registry closed meanwhile: nothing to wake
			r.wakePollers()
		case <-stop:
		}
	}()
	for {
		evs, err := r.poll(ctx, "Registry.Events", pollChunk, -1)
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
	}
}
