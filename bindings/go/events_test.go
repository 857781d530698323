package kvreg

import (
	"context"
	"errors"
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
	s := r.Events(ctx, time.Millisecond)
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
	s := r.Events(context.Background(), time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, s)
	if !errors.Is(s.Err(), ErrStale) {
		t.Fatalf("Err after Registry.Close = %v, want ErrStale", s.Err())
	}
}
