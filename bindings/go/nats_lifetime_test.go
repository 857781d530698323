package kvreg

// Lifetimes of the NATS objects and what they borrow: closing a Registry or an Index that a
// publisher or consumer still uses is refused (ErrBusy) and changes nothing; closing a
// consumer or publisher while another goroutine is inside one of its calls stops that call
// and waits for it; Stop never waits behind a Close.

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// within runs f on its own goroutine and fails the test if it has not returned after d (the
// goroutine is then left behind: it is stuck).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
	}
}

// waitBlockedIn waits (bounded) until a goroutine whose stack has fn in it is blocked in Go
// (on a lock, a condition, a channel): not running, not runnable, not in C.
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	waitFor(t, "a goroutine blocked in "+fn, func() bool {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if !strings.Contains(g, fn) {
				continue
			}
			head := g
			if i := strings.IndexByte(g, '\n'); i >= 0 {
				head = g[:i]
			}
			if !strings.Contains(head, "[running") && !strings.Contains(head, "[runnable") &&
				!strings.Contains(head, "[syscall") {
				return true
			}
		}
		return false
	})
}

// recvWithin waits (bounded) for a value on ch.
func recvWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// silentServer accepts TCP connections and never answers, so a NATS connect to it waits for
// its whole connect timeout. The channel gets one value per accepted connection.
func silentServer(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "nats://" + ln.Addr().String(), ch
}

// startedPublisher makes a registry with a pool and a started publisher on stream.
func startedPublisher(t *testing.T, url, stream string) (*Registry, *Pool, *NatsPublisher) {
	t.Helper()
	reg, err := NewRegistry(&Options{KeepTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := reg.NewPool("gpu")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewNatsPublisher(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{pub.SetString(NatsURL, url), pub.SetString(NatsStream, stream),
		pub.SetString(NatsSubjectPrefix, strings.ToLower(stream)+".ev"), pub.Set(NatsPubBatchUs, 0)} {
		if e != nil {
			t.Fatal(e)
		}
	}
	waitFor(t, "the publisher to start", func() bool { return pub.Start() == nil })
	return reg, pool, pub
}

// registerBlocks registers n blocks of 4 tokens starting at first (a chain of their own).
func registerBlocks(t *testing.T, pool *Pool, first uint32, n int) {
	t.Helper()
	tokens := make([]uint32, 4*n)
	for i := range tokens {
		tokens[i] = first + uint32(i)
	}
	infos, err := HashBlocks(tokens, 4, RouterSalt)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range infos {
		mustRegister(t, pool, b.Desc(tokens[4*i:4*i+4]))
	}
}

// startedConsumer makes an index and a started consumer of stream.
func startedConsumer(t *testing.T, url, stream, durable string) (*Index, *NatsConsumer) {
	t.Helper()
	idx, err := NewIndex(map[uint32]uint64{IndexOptHashes: IndexHashesOwn})
	if err != nil {
		t.Fatal(err)
	}
	con, err := NewNatsConsumer(idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{con.SetString(NatsURL, url), con.SetString(NatsStream, stream),
		con.SetString(NatsDurable, durable), con.Start()} {
		if e != nil {
			t.Fatal(e)
		}
	}
	return idx, con
}

// Without a server: closing a registry or index that a publisher or consumer borrows is
// ErrBusy, and works once they are closed.
func TestNatsCloseParentBeforeChildIsBusy(t *testing.T) {
	if !NatsAvailable() {
		t.Skip("this libkvreg was built without NATS")
	}
	reg := newReg(t, nil)
	pub, err := NewNatsPublisher(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Registry.Close with an open NatsPublisher: %v, want ErrBusy", err)
	}
	if !strings.Contains(reg.Close().Error(), "NatsPublisher") {
		t.Fatalf("the busy error does not say what is open: %v", reg.Close())
	}
	if _, err := NewNatsPublisher(reg); !errors.Is(err, ErrBusy) ||
		!strings.Contains(err.Error(), "events taken by a publisher") { // kvreg_strerror's text
		t.Fatalf("a second publisher: %v, want ErrBusy saying another publisher has the events", err)
	}
	if _, err := reg.NewPool("gpu"); err != nil { // still alive
		t.Fatalf("registry after a refused Close: %v", err)
	}
	if err := pub.Set(NatsPubWorkerID, 3); err != nil {
		t.Fatalf("publisher after a refused Registry.Close: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("Registry.Close after its publisher: %v", err)
	}
	if _, err := reg.NewPool("cpu"); !errors.Is(err, ErrStale) {
		t.Fatalf("registry after Close: %v, want ErrStale", err)
	}

	idx, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	con, err := NewNatsConsumer(idx)
	if err != nil {
		t.Fatal(err)
	}
	con2, err := NewNatsConsumer(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Index.Close with 2 open consumers: %v, want ErrBusy", err)
	}
	if _, err := idx.Stat(IndexStatEntries); err != nil {
		t.Fatalf("index after a refused Close: %v", err)
	}
	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	if err := con.Close(); err != nil { // idempotent: counted once
		t.Fatal(err)
	}
	if err := idx.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Index.Close with 1 open consumer: %v, want ErrBusy", err)
	}
	if err := con2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatalf("Index.Close after its consumers: %v", err)
	}
	if _, err := idx.Stat(IndexStatEntries); !errors.Is(err, ErrStale) {
		t.Fatalf("index after Close: %v, want ErrStale", err)
	}
	if _, err := NewNatsConsumer(idx); !errors.Is(err, ErrStale) {
		t.Fatalf("NewNatsConsumer of a closed index: %v, want ErrStale", err)
	}
}

// Registry.Close while a started publisher's sender thread takes its events (the reviewer's
// g1: a SIGSEGV in kvreg_nats_publisher_free).
func TestNatsRegistryCloseWhilePublishing(t *testing.T) {
	url := natsServer(t)
	reg, pool, pub := startedPublisher(t, url, "LT1")
	if err := reg.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Registry.Close with a started NatsPublisher: %v, want ErrBusy", err)
	}
	// Both still work: the sender publishes what the registry emits after the refusal.
	registerBlocks(t, pool, 100, 3)
	waitFor(t, "3 events published and acknowledged", func() bool {
		h, _ := pub.Stat(NatsPubStatEventsHandled)
		f, _ := pub.Stat(NatsPubStatInFlight)
		return h >= 3 && f == 0
	})
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("Registry.Close after its publisher: %v", err)
	}
}

// Index.Close while a started consumer feeds it (the reviewer's g3: the next Run applied
// into freed memory).
func TestNatsIndexCloseWhileConsuming(t *testing.T) {
	url := natsServer(t)
	reg, pool, pub := startedPublisher(t, url, "LT3")
	defer reg.Close()
	defer pub.Close()
	idx, con := startedConsumer(t, url, "LT3", "lt3")
	if err := idx.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Index.Close with a started NatsConsumer: %v, want ErrBusy", err)
	}
	registerBlocks(t, pool, 200, 3)
	waitFor(t, "3 entries in the index", func() bool {
		if err := con.Run(50); err != nil {
			t.Fatal(err)
		}
		n, err := idx.Stat(IndexStatEntries)
		return err == nil && n == 3
	})
	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatalf("Index.Close after its consumer: %v", err)
	}
}

// NatsConsumer.Close while another goroutine is in Run(-1) stops the Run and waits for it
// (the reviewer's g2: Close waited for the Run for ever, and a Stop then waited behind the
// Close). The first consumer is closed with no Stop at all; the second gets a Stop from a
// third goroutine (a signal handler) racing with its Close.
func TestNatsConsumerCloseDuringRun(t *testing.T) {
	url := natsServer(t)
	reg, pool, pub := startedPublisher(t, url, "LT2")
	defer reg.Close()
	defer pub.Close()
	for i, withStop := range []bool{false, true} {
		idx, con := startedConsumer(t, url, "LT2", fmt.Sprintf("lt2-%d", i))
		runDone := make(chan error, 1)
		go func() { runDone <- con.Run(-1) }()
		// Only Run fetches: a message applied means the Run is under way.
		registerBlocks(t, pool, uint32(300+100*i), 2)
		waitFor(t, "the running consumer to apply a message", func() bool {
			n, err := con.Stat(NatsConStatMessages)
			return err == nil && n > 0
		})
		closeDone := make(chan error, 1)
		go func() { closeDone <- con.Close() }()
		if withStop {
			within(t, 10*time.Second, "Stop during Close", func() {
				if err := con.Stop(); err != nil && !errors.Is(err, ErrStale) {
					t.Errorf("Stop during Close: %v, want nil or ErrStale", err)
				}
			})
		}
		within(t, 10*time.Second, "Run(-1) during Close", func() {
			if err := <-runDone; err != nil {
				t.Errorf("Run ended by Close: %v", err)
			}
		})
		within(t, 10*time.Second, "Close during Run(-1)", func() {
			if err := <-closeDone; err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		if err := con.Run(0); !errors.Is(err, ErrStale) {
			t.Fatalf("Run after Close: %v, want ErrStale", err)
		}
		if err := con.Stop(); !errors.Is(err, ErrStale) {
			t.Fatalf("Stop after Close: %v, want ErrStale", err)
		}
		if err := idx.Close(); err != nil {
			t.Fatalf("Index.Close after its consumer: %v", err)
		}
	}
}

// A call waiting for its turn behind a Run(-1) (Worker: the C consumer is for one thread at a
// time) gives up with ErrStale when Close comes, and Close ends the Run.
func TestNatsCloseWhileCallWaitsForTurn(t *testing.T) {
	url := natsServer(t)
	reg, pool, pub := startedPublisher(t, url, "LT4")
	defer reg.Close()
	defer pub.Close()
	idx, con := startedConsumer(t, url, "LT4", "lt4")
	runDone := make(chan error, 1)
	go func() { runDone <- con.Run(-1) }()
	registerBlocks(t, pool, 400, 2)
	waitFor(t, "the running consumer to apply a message", func() bool {
		n, err := con.Stat(NatsConStatMessages)
		return err == nil && n > 0
	})
	workerDone := make(chan error, 1)
	go func() {
		_, _, err := con.Worker(0, 0)
		workerDone <- err
	}()
	waitBlockedIn(t, "(*NatsConsumer).Worker")
	within(t, 10*time.Second, "Close during Run(-1) with a Worker waiting", func() {
		if err := con.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	within(t, time.Second, "Run(-1) after Close", func() {
		if err := <-runDone; err != nil {
			t.Errorf("Run ended by Close: %v", err)
		}
	})
	within(t, time.Second, "Worker after Close", func() {
		if err := <-workerDone; !errors.Is(err, ErrStale) {
			t.Errorf("Worker waiting when Close came: %v, want ErrStale", err)
		}
	})
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Close waiting for a call in progress (Start, connecting to a server that never answers)
// does not hold Stop up: Stop returns long before that call does, on the consumer and on the
// publisher.
func TestNatsStopDoesNotWaitBehindClose(t *testing.T) {
	if !NatsAvailable() {
		t.Skip("this libkvreg was built without NATS")
	}
	const connectMs = 3000
	t.Run("consumer", func(t *testing.T) {
		url, accepted := silentServer(t)
		idx, err := NewIndex(nil)
		if err != nil {
			t.Fatal(err)
		}
		con, err := NewNatsConsumer(idx)
		if err != nil {
			t.Fatal(err)
		}
		if err := con.SetString(NatsURL, url); err != nil {
			t.Fatal(err)
		}
		if err := con.Set(NatsConConnectTimeoutMs, connectMs); err != nil {
			t.Fatal(err)
		}
		startDone := make(chan error, 1)
		go func() { startDone <- con.Start() }()
		recvWithin(t, accepted, "Start to connect") // Start is connecting
		closeDone := make(chan error, 1)
		go func() { closeDone <- con.Close() }()
		waitBlockedIn(t, "(*NatsConsumer).Close")
		stopped := time.Now()
		within(t, connectMs*time.Millisecond/2, "Stop while Close waits for Start", func() {
			if err := con.Stop(); err != nil && !errors.Is(err, ErrStale) {
				t.Errorf("Stop during Close: %v", err)
			}
		})
		select {
		case err := <-startDone:
			t.Fatalf("Start returned (%v) before Stop (%v after Stop began)", err, time.Since(stopped))
		default:
		}
		within(t, 3*connectMs*time.Millisecond, "Start", func() {
			if err := <-startDone; err == nil {
				t.Error("Start to a silent server succeeded")
			}
		})
		within(t, 10*time.Second, "Close", func() {
			if err := <-closeDone; err != nil {
				t.Error(err)
			}
		})
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("publisher", func(t *testing.T) {
		url, accepted := silentServer(t)
		reg := newReg(t, nil)
		pub, err := NewNatsPublisher(reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.SetString(NatsURL, url); err != nil {
			t.Fatal(err)
		}
		if err := pub.Set(NatsPubConnectTimeoutMs, connectMs); err != nil {
			t.Fatal(err)
		}
		startDone := make(chan error, 1)
		go func() { startDone <- pub.Start() }()
		recvWithin(t, accepted, "Start to connect")
		closeDone := make(chan error, 1)
		go func() { closeDone <- pub.Close() }()
		waitBlockedIn(t, "(*NatsPublisher).Close")
		within(t, connectMs*time.Millisecond/2, "Stop while Close waits for Start", func() {
			if err := pub.Stop(); err != nil && !errors.Is(err, ErrStale) {
				t.Errorf("Stop during Close: %v", err)
			}
		})
		select {
		case err := <-startDone:
			t.Fatalf("Start returned (%v) before Stop", err)
		default:
		}
		within(t, 3*connectMs*time.Millisecond, "Start", func() { <-startDone })
		within(t, 10*time.Second, "Close", func() {
			if err := <-closeDone; err != nil {
				t.Error(err)
			}
		})
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
