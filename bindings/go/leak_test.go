package kvreg

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// leakTestMu keeps leak tests from sharing the process-wide handler.
var leakTestMu sync.Mutex

// captureLeaks routes leak reports to a channel for the rest of the test.
func captureLeaks(t *testing.T) <-chan Leak {
	t.Helper()
	leakTestMu.Lock()
	ch := make(chan Leak, 64)
	prev := SetLeakHandler(func(l Leak) {
		select {
		case ch <- l:
		default: // a report nobody waits for must not block the finalizer goroutine
		}
	})
	t.Cleanup(func() {
		SetLeakHandler(prev)
		leakTestMu.Unlock()
	})
	return ch
}

// waitLeak runs the garbage collector until a report matching want arrives. Finalizers run
// on their own goroutine after a collection, so each round waits briefly for a report; the
// overall deadline only turns a missing report into a failure.
func waitLeak(t *testing.T, ch <-chan Leak, want func(Leak) bool) Leak {
	t.Helper()
	deadline := time.Now().Add(recvTimeout)
	for time.Now().Before(deadline) {
		runtime.GC()
		select {
		case l := <-ch:
			if want(l) {
				return l
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("no leak report within the deadline")
	return Leak{}
}

// A Pool dropped without Close is reported by its finalizer, which emits no events: its
// blocks stay registered (no Remove behind the program's back) until Registry.Close.
func TestLeakedPoolIsReportedWithoutEvents(t *testing.T) {
	leaks := captureLeaks(t)
	r := newReg(t, nil)
	before := Leaks()
	id := func() uint32 {
		p, err := r.NewPool("leaked-pool")
		if err != nil {
			t.Fatal(err)
		}
		mustRegister(t, p, byHash(1))
		mustRegister(t, p, byHash(2))
		return p.ID()
	}() // p is garbage from here on
	if evs := pollAll(t, r); len(evs) != 2 {
		t.Fatalf("%d events from registering, want 2", len(evs))
	}
	l := waitLeak(t, leaks, func(l Leak) bool { return l.Type == "Pool" && l.Name == "leaked-pool" })
	if l.PoolID != id || l.Held != 2 {
		t.Errorf("leak report %+v, want pool id %d holding 2 hashes", l, id)
	}
	if Leaks() <= before {
		t.Errorf("Leaks() = %d, did not count the report (was %d)", Leaks(), before)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if evs := pollAll(t, r); len(evs) != 0 {
		t.Fatalf("the finalizer emitted %+v; it must emit nothing", evs)
	}
	for _, h := range []uint64{1, 2} {
		if ok, err := r.Contains(h); !ok || err != nil {
			t.Errorf("Contains(%d) = %v, %v after the leak report; the hash must stay", h, ok, err)
		}
	}
	if n, err := r.Stat(StatPools); err != nil || n != 1 {
		t.Errorf("StatPools = %d, %v; the leaked pool must stay live", n, err)
	}
	// Registry.Close frees it, still without events.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Registry or Sequence dropped without Close is freed (that emits no events) and reported.
func TestLeakedRegistryAndSequenceAreFreedAndReported(t *testing.T) {
	leaks := captureLeaks(t)
	func() {
		r, err := NewRegistry(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.NewPool("p"); err != nil { // dropped too: reported before the registry
			t.Fatal(err)
		}
		s, err := NewSequence(4, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Extend([]uint32{1, 2, 3, 4, 5}); err != nil {
			t.Fatal(err)
		}
	}()
	seen := map[string]bool{}
	for !seen["Registry"] || !seen["Sequence"] {
		l := waitLeak(t, leaks, func(l Leak) bool { return true })
		seen[l.Type] = true
	}
	if !seen["Pool"] {
		t.Error("the dropped pool was not reported")
	}
}

// Closed objects are not reported: Close removes the safety net.
func TestClosedObjectsAreNotReported(t *testing.T) {
	leaks := captureLeaks(t)
	func() {
		r, err := NewRegistry(nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.NewPool("closed-pool")
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		r.Close()
		s, err := NewSequence(4, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		// A leaked registry with a leaked pool as a marker: its reports take two collections
		// (the pool keeps the registry reachable until its finalizer ran), and the closed
		// objects above were garbage from the first one on, so any report of theirs comes
		// before the marker registry's.
		m, err := NewRegistry(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.NewPool("marker"); err != nil {
			t.Fatal(err)
		}
	}()
	var got []Leak
	for len(got) == 0 || got[len(got)-1].Type != "Registry" {
		got = append(got, waitLeak(t, leaks, func(Leak) bool { return true }))
	}
	runtime.GC()
	for drained := false; !drained; {
		select {
		case l := <-leaks:
			got = append(got, l)
		default:
			drained = true
		}
	}
	if len(got) != 2 || got[0].Type != "Pool" || got[0].Name != "marker" {
		t.Fatalf("reports %+v, want only the marker pool and its registry", got)
	}
}

func TestLeakString(t *testing.T) {
	s := Leak{Type: "Pool", Name: "gpu", PoolID: 3, Held: 7}.String()
	want := `kvreg: Pool garbage-collected without Close (name "gpu", id 3): its 7 hashes stay ` +
		`registered, without Remove events, until Registry.Close`
	if s != want {
		t.Errorf("Leak.String() = %q, want %q", s, want)
	}
}
