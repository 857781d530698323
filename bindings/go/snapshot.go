package kvreg

/*
#include <kvreg.h>
*/
import "C"

import "unsafe"

// Clear empties every pool at once (vLLM's reset_prefix_cache): every reference is dropped,
// every Block of the registry becomes stale for good (ErrStale), and ONE EventCleared event is
// emitted instead of a Remove per hash. Pools stay usable. Events with a lower ID happened
// before the clear, higher IDs after it.
func (r *Registry) Clear() error {
	return r.with("Registry.Clear", func(p *C.kvreg_registry) error {
		return check("kvreg_registry_clear", C.kvreg_registry_clear(p))
	})
}

// Snapshot is the registered set at one position of the event stream, for a consumer that
// joined late or lost events (a gap in event IDs). It is a Go copy: it owns its events and
// outlives the registry.
type Snapshot struct {
	// Position is the ID of the first event the snapshot does not contain: apply Events,
	// then every polled event with ID >= Position (older ones are already in Events).
	Position uint64
	// Events holds one EventRegister per registered hash, parents before children, with ID
	// EventIDSnapshot and the PoolID and Medium of a pool holding it (Tokens with KeepTokens).
	Events []Event
}

// Snapshot takes a snapshot of the registry. It emits no event; registry calls wait while
// the library copies the registered set.
func (r *Registry) Snapshot() (*Snapshot, error) {
	var snap *Snapshot
	err := r.with("Registry.Snapshot", func(p *C.kvreg_registry) error {
		var cs *C.kvreg_snapshot
		if err := check("kvreg_registry_snapshot", C.kvreg_registry_snapshot(p, &cs)); err != nil {
			return err
		}
		defer C.kvreg_snapshot_free(cs)
		var evs *C.kvreg_event
		var n C.size_t
		if err := check("kvreg_snapshot_events", C.kvreg_snapshot_events(cs, &evs, &n)); err != nil {
			return err
		}
		snap = &Snapshot{Position: uint64(C.kvreg_snapshot_position(cs)),
			Events: make([]Event, 0, int(n))}
		if n > 0 {
			cevs := unsafe.Slice(evs, int(n))
			for i := range cevs {
				// Copied before kvreg_snapshot_free: the tokens belong to the C snapshot.
				snap.Events = append(snap.Events, eventFromC(&cevs[i]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}
