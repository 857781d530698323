package kvreg

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// recvTimeout bounds how long a test waits for the Events goroutine before failing; it is a
// failure deadline, not a synchronisation point.
const recvTimeout = 10 * time.Second

func recv(t *testing.T, s *EventStream) Event {
	t.Helper()
	select {
	case ev, ok := <-s.C:
		if !ok {
			t.Fatalf("event stream closed early: %v", s.Err())
		}
		return ev
	case <-time.After(recvTimeout):
		t.Fatal("no event within the deadline")
	}
	return Event{}
}

func waitClosed(t *testing.T, s *EventStream) {
	t.Helper()
	deadline := time.After(recvTimeout)
	for {
		select {
		case _, ok := <-s.C:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("event stream not closed within the deadline")
		}
	}
}

func TestPollArguments(t *testing.T) {
	r := newReg(t, nil)
	if _, err := r.Poll(0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Poll(0) = %v, want ErrInvalid", err)
	}
	evs, err := r.Poll(10)
	if err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Poll on an empty queue = %v, %v; want an empty slice", evs, err)
	}
	d := newReg(t, &Options{DiscardEvents: true})
	mustRegister(t, newPool(t, d, "p"), byHash(1))
	if _, err := d.Poll(10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Poll with DiscardEvents = %v, want ErrInvalid", err)
	}
	if n, _ := d.Stat(StatEventsDropped); n != 1 {
		t.Fatalf("DiscardEvents dropped %d events, want 1", n)
	}
}

// Poll(max) returns at most max events and leaves the rest queued, in order; more than one
// internal chunk is crossed on the way.
func TestPollInPieces(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "p")
	const n = 2*pollChunk + 5
	for h := uint64(1); h <= n; h++ {
		mustRegister(t, p, byHash(h))
	}
	first, err := r.Poll(3)
	if err != nil || len(first) != 3 {
		t.Fatalf("Poll(3) = %d events, %v", len(first), err)
	}
	rest := pollAll(t, r)
	all := append(first, rest...)
	if len(all) != n {
		t.Fatalf("got %d events in total, want %d", len(all), n)
	}
	for i, ev := range all {
		if ev.ID != uint64(i) || ev.SequenceHash != uint64(i+1) || ev.Kind != EventRegister {
			t.Fatalf("event %d = %+v, want Register of %d with id %d", i, ev, i+1, i)
		}
	}
}

// A full queue drops new events and their ids are skipped, so a consumer sees the gap.
func TestPollQueueOverflowLeavesGap(t *testing.T) {
	r := newReg(t, &Options{PollCapacity: 2})
	p := newPool(t, r, "p")
	for h := uint64(1); h <= 5; h++ {
		mustRegister(t, p, byHash(h))
	}
	evs := pollAll(t, r)
	if len(evs) != 2 || evs[0].ID != 0 || evs[1].ID != 1 {
		t.Fatalf("events %+v, want ids 0 and 1 (queue of 2)", evs)
	}
	if n, _ := r.Stat(StatEventsDropped); n != 3 {
		t.Fatalf("dropped %d, want 3", n)
	}
	mustRegister(t, p, byHash(6))
	evs = pollAll(t, r)
	if len(evs) != 1 || evs[0].ID != 5 {
		t.Fatalf("event after the drops %+v, want id 5", evs)
	}
}

func TestEventsStream(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "p")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := r.Events(ctx)
	b := mustRegister(t, p, byHash(42))
	if ev := recv(t, s); ev.Kind != EventRegister || ev.SequenceHash != 42 || ev.ID != 0 {
		t.Fatalf("first streamed event %+v, want Register(42) id 0", ev)
	}
	mustRelease(t, p, b)
	if ev := recv(t, s); ev.Kind != EventRemove || ev.SequenceHash != 42 || ev.ID != 1 {
		t.Fatalf("second streamed event %+v, want Remove(42) id 1", ev)
	}
	cancel()
	waitClosed(t, s)
	if !errors.Is(s.Err(), context.Canceled) {
		t.Fatalf("Err after cancel = %v, want context.Canceled", s.Err())
	}
	// Events after the stream stopped stay queued for the next consumer.
	mustRegister(t, p, byHash(43))
	if evs := pollAll(t, r); len(evs) != 1 || evs[0].SequenceHash != 43 {
		t.Fatalf("events after the stream ended %+v, want Register(43)", evs)
	}
}

func TestEventsStreamEndsWhenRegistryCloses(t *testing.T) {
	r, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Events(context.Background())
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, s)
	if !errors.Is(s.Err(), ErrStale) {
		t.Fatalf("Err after Registry.Close = %v, want ErrStale", s.Err())
	}
}

// waitPolls spins (yielding) until the registry has made at least n C poll calls, and
// returns the count. The deadline only turns a hang into a failure.
func waitPolls(t *testing.T, r *Registry, n uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(recvTimeout)
	for {
		if got := r.cPolls.Load(); got >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d C poll calls within the deadline, want %d", r.cPolls.Load(), n)
		}
		runtime.Gosched()
	}
}

// idleWindow is how long the idle tests watch a waiting stream. It is an observation window,
// not synchronisation: the old 10 ms ticker polled about 10 times in it, a waiting stream
// polls 0 times.
const idleWindow = 100 * time.Millisecond

// An idle stream sleeps in kvreg_registry_poll_wait instead of polling on a ticker, and
// cancelling its context wakes that wait at once (kvreg_registry_wakeup).
func TestEventsStreamSleepsWhileIdleAndCancelWakesIt(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "p")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := r.Events(ctx)
	mustRegister(t, p, byHash(1))
	recv(t, s)
	// The first call returned the event; the second one is the stream waiting again.
	before := waitPolls(t, r, 2)
	time.Sleep(idleWindow)
	if extra := r.cPolls.Load() - before; extra > 1 {
		t.Fatalf("an idle stream made %d C poll calls in %v: it polls instead of waiting",
			extra, idleWindow)
	}
	start := time.Now()
	cancel()
	waitClosed(t, s)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the stream took %v to end after cancel: the wait was not woken", took)
	}
	if extra := r.cPolls.Load() - before; extra > 1 {
		t.Fatalf("%d C poll calls between idling and the end of the stream, want at most 1", extra)
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", s.Err())
	}
}

// Close wakes a stream that is asleep in the library (it holds the registry's lock shared, so
// Close would otherwise wait for the next event forever).
func TestRegistryCloseWakesWaitingStream(t *testing.T) {
	r, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Events(context.Background())
	waitPolls(t, r, 1)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(recvTimeout):
		t.Fatal("Registry.Close did not return: the waiting stream was not woken")
	}
	waitClosed(t, s)
	if !errors.Is(s.Err(), ErrStale) {
		t.Fatalf("Err after Close = %v, want ErrStale", s.Err())
	}
}

// Poll never waits for events, even while a stream is asleep holding the poll turn: it wakes
// the stream and takes its turn.
func TestPollDoesNotWaitForStream(t *testing.T) {
	r := newReg(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := r.Events(ctx)
	waitPolls(t, r, 1)
	done := make(chan error, 1)
	go func() {
		_, err := r.Poll(10)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(recvTimeout):
		t.Fatal("Poll blocked behind the stream's wait")
	}
	// The stream goes on working after being woken.
	p := newPool(t, r, "p")
	mustRegister(t, p, byHash(3))
	if ev := recv(t, s); ev.SequenceHash != 3 {
		t.Fatalf("event after the Poll %+v, want Register(3)", ev)
	}
}

// Err may be called from any goroutine while the stream runs and stops (go test -race flags
// an unsynchronised read).
func TestEventStreamErrIsSynchronised(t *testing.T) {
	r := newReg(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	s := r.Events(ctx)
	seen := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(recvTimeout)
		for time.Now().Before(deadline) {
			if err := s.Err(); err != nil {
				seen <- err
				return
			}
			runtime.Gosched()
		}
		seen <- nil
	}()
	waitPolls(t, r, 1)
	cancel()
	if err := <-seen; !errors.Is(err, context.Canceled) {
		t.Fatalf("Err seen from another goroutine = %v, want context.Canceled", err)
	}
	waitClosed(t, s)
}

func TestPollWait(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "p")
	if _, err := r.PollWait(0, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PollWait(0) = %v, want ErrInvalid", err)
	}
	if evs, err := r.PollWait(10, 0); err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("PollWait(no wait) on an empty queue = %v, %v; want an empty slice", evs, err)
	}
	start := time.Now()
	if evs, err := r.PollWait(10, 20*time.Millisecond); err != nil || len(evs) != 0 {
		t.Fatalf("PollWait(20ms) on an empty queue = %v, %v; want an empty slice", evs, err)
	}
	if took := time.Since(start); took < 15*time.Millisecond {
		t.Fatalf("PollWait(20ms) returned after %v: it did not wait", took)
	}

	// A waiter gets an event queued by another goroutine, then Wakeup ends a wait early.
	got := make(chan []Event, 1)
	errc := make(chan error, 1)
	wait := func() {
		evs, err := r.PollWait(10, -1)
		if err != nil {
			errc <- err
			return
		}
		got <- evs
	}
	result := func() ([]Event, error) {
		select {
		case evs := <-got:
			return evs, nil
		case err := <-errc:
			return nil, err
		case <-time.After(recvTimeout):
			t.Fatal("PollWait(-1) did not return")
		}
		return nil, nil
	}
	go wait()
	mustRegister(t, p, byHash(8))
	if evs, err := result(); err != nil || len(evs) != 1 || evs[0].SequenceHash != 8 {
		t.Fatalf("PollWait(-1) = %+v, %v; want Register(8)", evs, err)
	}
	go wait()
	if err := r.Wakeup(); err != nil {
		t.Fatal(err)
	}
	if evs, err := result(); err != nil || len(evs) != 0 {
		t.Fatalf("PollWait(-1) after Wakeup = %+v, %v; want no events", evs, err)
	}
	// Close ends a wait with ErrStale.
	n := r.cPolls.Load()
	go wait()
	waitPolls(t, r, n+1)
	r.Close()
	if _, err := result(); !errors.Is(err, ErrStale) {
		t.Fatalf("PollWait(-1) ended by Close = %v, want ErrStale", err)
	}
	if err := r.Wakeup(); !errors.Is(err, ErrStale) {
		t.Fatalf("Wakeup after Close = %v, want ErrStale", err)
	}

	d := newReg(t, &Options{DiscardEvents: true})
	if _, err := d.PollWait(1, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PollWait with DiscardEvents = %v, want ErrInvalid", err)
	}
}
