package kvreg

import (
	"context"
	"errors"
	"math/rand"
	"runtime"
	"sync"
	"testing"
	"time"
)

// worker registers, acquires and releases random hashes in one pool, keeping every
// reference it takes and releasing each exactly once, so any error is a failure.
func worker(t *testing.T, p *Pool, seed int64, iters, nHashes int) {
	rng := rand.New(rand.NewSource(seed))
	var held []Block
	for i := 0; i < iters; i++ {
		if len(held) > 0 && rng.Intn(2) == 0 {
			k := rng.Intn(len(held))
			if err := p.Release(held[k]); err != nil {
				t.Errorf("%s: Release: %v", p.Name(), err)
				return
			}
			held[k] = held[len(held)-1]
			held = held[:len(held)-1]
			continue
		}
		h := uint64(1 + rng.Intn(nHashes))
		b, err := p.Register(byHash(h))
		if errors.Is(err, ErrExist) {
			// Another goroutine registered it in this pool; it may also release it before
			// we acquire, hence ErrNotFound is a normal outcome here.
			b, err = p.Acquire(h)
			if errors.Is(err, ErrNotFound) {
				continue
			}
		}
		if err != nil {
			t.Errorf("%s: Register/Acquire(%d): %v", p.Name(), h, err)
			return
		}
		held = append(held, b)
		if ok, err := p.Contains(h); !ok || err != nil {
			t.Errorf("%s: Contains(%d) = %v, %v while holding it", p.Name(), h, ok, err)
			return
		}
	}
	if errs, err := p.ReleaseBatch(held); err != nil {
		t.Errorf("%s: final ReleaseBatch: %v", p.Name(), err)
	} else {
		for _, e := range errs {
			if e != nil {
				t.Errorf("%s: final release: %v", p.Name(), e)
			}
		}
	}
}

// Several goroutines per pool, two pools sharing hashes, and a concurrent poller. The event
// log must stay exact: contiguous ids, and per hash Register and Remove alternating,
// starting with Register and ending with Remove once everything is released.
func TestConcurrentPoolsKeepEventInvariants(t *testing.T) {
	const (
		workersPerPool = 4
		iters          = 1500
		nHashes        = 24
	)
	r := newReg(t, &Options{Shards: 4}) // few shards, so workers contend
	pools := []*Pool{newPool(t, r, "gpu"), newPool(t, r, "host")}

	var events []Event
	stop := make(chan struct{})
	pollerDone := make(chan struct{})
	go func() {
		defer close(pollerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, err := r.Poll(256)
			if err != nil {
				t.Errorf("Poll: %v", err)
				return
			}
			events = append(events, evs...)
		}
	}()

	var wg sync.WaitGroup
	for pi, p := range pools {
		for w := 0; w < workersPerPool; w++ {
			wg.Add(1)
			go func(p *Pool, seed int64) {
				defer wg.Done()
				worker(t, p, seed, iters, nHashes)
			}(p, int64(100*pi+w+1))
		}
	}
	wg.Wait()
	close(stop)
	<-pollerDone
	// With several goroutines emitting, a call may return before its events are queued
	// (another thread that is delivering queues them); Flush waits for all of them, so the
	// final poll and the counters below see the whole log.
	if err := r.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	events = append(events, pollAll(t, r)...)
	if t.Failed() {
		return
	}

	for _, p := range pools {
		if p.Size() != 0 {
			t.Errorf("pool %s still holds %d hashes", p.Name(), p.Size())
		}
	}
	st, err := r.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Hashes != 0 || st.EventsDropped != 0 || st.EventsQueued != 0 {
		t.Fatalf("stats %+v: want no hashes, no dropped or queued events", st)
	}
	if uint64(len(events)) != st.NextEventID || st.EventsRegister+st.EventsRemove != st.NextEventID {
		t.Fatalf("polled %d events; stats %+v", len(events), st)
	}
	last := map[uint64]EventKind{}
	var registers uint64
	for i, ev := range events {
		if ev.ID != uint64(i) {
			t.Fatalf("event %d has id %d: ids must be contiguous", i, ev.ID)
		}
		if ev.PoolID != pools[0].ID() && ev.PoolID != pools[1].ID() {
			t.Fatalf("event %d from unknown pool %d", i, ev.PoolID)
		}
		prev, seen := last[ev.SequenceHash]
		switch ev.Kind {
		case EventRegister:
			if seen && prev != EventRemove {
				t.Fatalf("event %d: Register(%d) twice without a Remove", i, ev.SequenceHash)
			}
			registers++
		case EventRemove:
			if !seen || prev != EventRegister {
				t.Fatalf("event %d: Remove(%d) without a live Register", i, ev.SequenceHash)
			}
		default:
			t.Fatalf("event %d has kind %v", i, ev.Kind)
		}
		last[ev.SequenceHash] = ev.Kind
	}
	for h, k := range last {
		if k != EventRemove {
			t.Errorf("hash %d ends registered although every reference was released", h)
		}
	}
	if registers != st.EventsRegister {
		t.Errorf("%d Register events polled, stats say %d", registers, st.EventsRegister)
	}
	t.Logf("%d events, %d registrations of %d hashes", len(events), registers, nHashes)
	if registers < nHashes {
		t.Errorf("only %d registrations: the workload did not exercise every hash", registers)
	}
}

// Closing the registry while goroutines use its pools is safe: every call either works or
// fails with ErrStale, and none touches freed memory (run under -race and cgocheck=2).
func TestRegistryCloseWhileInUse(t *testing.T) {
	r, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	var started, done sync.WaitGroup
	for w := 0; w < 4; w++ {
		p, err := r.NewPool("p")
		if err != nil {
			t.Fatal(err)
		}
		started.Add(1)
		done.Add(1)
		go func(p *Pool, h uint64) {
			defer done.Done()
			first := true
			for {
				b, err := p.Register(byHash(h))
				if err == nil {
					err = p.Release(b)
				}
				if first {
					started.Done() // the main goroutine closes only once all are running
					first = false
				}
				if errors.Is(err, ErrStale) {
					return
				}
				if err != nil {
					t.Errorf("unexpected error while closing: %v", err)
					return
				}
			}
		}(p, uint64(w+1))
	}
	started.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	done.Wait()
}

// Several goroutines poll at once while blocks are registered: every event reaches exactly
// one poller, and each carries its own tokens (the library reuses one token buffer per
// registry for the last poll, so the binding must copy before another poll runs).
func TestConcurrentPollersGetIntactEvents(t *testing.T) {
	const (
		pollers = 4
		nBlocks = 4000
	)
	r := newReg(t, nil)
	p := newPool(t, r, "gpu")
	tokensOf := func(h uint64) []uint32 {
		return []uint32{uint32(h), uint32(h) + 1, uint32(h) * 3, ^uint32(h)}
	}

	var mu sync.Mutex
	seen := map[uint64]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// poll takes one small batch (so pollers interleave often); n is 0 when the queue was
	// empty, -1 on failure.
	poll := func() (n int) {
		evs, err := r.Poll(7)
		if err != nil {
			t.Errorf("Poll: %v", err)
			return -1
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			seen[ev.ID]++
			if !equalTokens(ev.Tokens, tokensOf(ev.SequenceHash)) {
				t.Errorf("event %d (hash %d) has tokens %v, want %v", ev.ID, ev.SequenceHash,
					ev.Tokens, tokensOf(ev.SequenceHash))
				return -1
			}
		}
		return len(evs)
	}
	for i := 0; i < pollers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if poll() < 0 {
					return
				}
			}
		}()
	}
	for h := uint64(1); h <= nBlocks; h++ {
		if _, err := p.Register(BlockDesc{SequenceHash: h, BlockHash: h, Tokens: tokensOf(h)}); err != nil {
			t.Errorf("Register(%d): %v", h, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if err := r.Flush(); err != nil { // every event queued before the final polls
		t.Fatalf("Flush: %v", err)
	}
	for poll() > 0 { // what the pollers left
	}
	if t.Failed() {
		return
	}
	for id := uint64(0); id < nBlocks; id++ {
		if seen[id] != 1 {
			t.Fatalf("event %d delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != nBlocks {
		t.Fatalf("%d distinct events, want %d", len(seen), nBlocks)
	}
}

// An Events stream and a Poll loop share the log while goroutines register and release in
// two pools: Poll keeps taking the turn from the sleeping stream, and every event reaches
// exactly one of them. The event count is read after Flush, as multi-threaded code must.
func TestEventsStreamWithConcurrentPollAndWriters(t *testing.T) {
	r := newReg(t, &Options{Shards: 4})
	pools := []*Pool{newPool(t, r, "gpu"), newPool(t, r, "host")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := r.Events(ctx)

	var mu sync.Mutex
	seen := map[uint64]int{}
	note := func(evs ...Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			seen[ev.ID]++
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	stop := make(chan struct{})
	pollerDone := make(chan struct{})
	go func() {
		defer close(pollerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, err := r.Poll(5)
			if err != nil {
				t.Errorf("Poll: %v", err)
				return
			}
			note(evs...)
		}
	}()
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for ev := range s.C {
			note(ev)
		}
	}()

	var wg sync.WaitGroup
	for pi, p := range pools {
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(p *Pool, seed int64) {
				defer wg.Done()
				worker(t, p, seed, 800, 32)
			}(p, int64(10*pi+w+1))
		}
	}
	wg.Wait()
	close(stop)
	<-pollerDone
	if err := r.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	total, err := r.Stat(StatNextEventID)
	if err != nil {
		t.Fatal(err)
	}
	// The stream delivers the rest; the deadline only turns a lost event into a failure.
	deadline := time.Now().Add(recvTimeout)
	for uint64(count()) < total && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	cancel()
	<-streamDone
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("stream Err = %v, want context.Canceled", s.Err())
	}
	if t.Failed() {
		return
	}
	if uint64(len(seen)) != total {
		t.Fatalf("%d distinct events seen, want %d", len(seen), total)
	}
	for id := uint64(0); id < total; id++ {
		if seen[id] != 1 {
			t.Fatalf("event %d seen %d times, want once", id, seen[id])
		}
	}
	if dropped, _ := r.Stat(StatEventsDropped); dropped != 0 {
		t.Fatalf("%d events dropped", dropped)
	}
}
