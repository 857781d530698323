package kvreg

import "sync"

// callGuard makes Close safe on an object whose calls may last (a NatsConsumer's Run(-1) runs
// until stopped): it counts the calls in progress, lets Close stop them and wait for them
// before the C object is freed, and never makes a call that only signals (Stop) wait behind
// a Close.
//
// The C contracts of the NATS publisher and consumer allow one thread at a time for most
// calls (configure, start, run, stop...) and any thread for a few (stat, the consumer's
// stop). Calls of the first kind take the turn, one at a time, in enter; a call waiting for
// the turn gives up with the closed error as soon as Close starts.
//
// Rules: a call does enter, uses the C pointer, then leave; the pointer stays valid from a
// successful enter to its leave. Close calls beginClose, frees the C object if it was the
// first, then endClose. A signal-only call holds mu for its (short) C call and checks closing
// itself.
type callGuard struct {
	mu      sync.Mutex
	ended   sync.Cond // on mu: broadcast whenever a call leaves
	active  int       // calls between enter and leave
	closing bool      // Close has started: enter refuses
	closed  chan struct{}
	freed   chan struct{}
	turn    chan struct{} // capacity 1: full while a call has the object's one thread
}

func (g *callGuard) init() {
	g.ended.L = &g.mu
	g.closed = make(chan struct{})
	g.freed = make(chan struct{})
	g.turn = make(chan struct{}, 1)
}

// enter registers a call; exclusive calls also take the turn (waiting for the call that has
// it, unless Close starts meanwhile). It returns the closed error for op once Close started.
func (g *callGuard) enter(op string, exclusive bool) error {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return closedErr(op)
	}
	g.active++
	g.mu.Unlock()
	if !exclusive {
		return nil
	}
	select {
	case g.turn <- struct{}{}:
	case <-g.closed:
		g.leave(false)
		return closedErr(op)
	}
	// Close may have started while the turn was free as well (select then picks either):
	// start nothing new, Close would only have to stop it.
	g.mu.Lock()
	closing := g.closing
	g.mu.Unlock()
	if closing {
		g.leave(true)
		return closedErr(op)
	}
	return nil
}

// leave ends a call that enter let in (with the same exclusive).
func (g *callGuard) leave(exclusive bool) {
	if exclusive {
		<-g.turn
	}
	g.mu.Lock()
	g.active--
	g.ended.Broadcast()
	g.mu.Unlock()
}

// beginClose marks the object closing and waits until no call is in progress, calling stop
// (with mu held; may be nil) before each wait so that a call that lasts ends. It returns true
// to the first Close, which must then free the C object and call endClose; a later or
// concurrent Close gets false once the first has freed it.
func (g *callGuard) beginClose(stop func()) bool {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		<-g.freed
		return false
	}
	g.closing = true
	close(g.closed)
	for g.active > 0 {
		if stop != nil {
			stop()
		}
		g.ended.Wait()
	}
	g.mu.Unlock()
	return true
}

// endClose says the C object is freed.
func (g *callGuard) endClose() { close(g.freed) }
