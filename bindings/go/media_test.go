package kvreg

import (
	"errors"
	"testing"
)

func TestEventsCarryTheirPoolsMedium(t *testing.T) {
	r := newReg(t, nil)
	def := newPool(t, r, "default")
	if def.Medium() != MediumGPU {
		t.Errorf("NewPool medium = %v, want GPU", def.Medium())
	}
	media := []Medium{MediumCPU, MediumStorage, MediumExternal}
	pools := map[Medium]*Pool{}
	for i, m := range media {
		p, err := r.NewPoolMedium(m.String(), m)
		if err != nil {
			t.Fatalf("NewPoolMedium(%v): %v", m, err)
		}
		t.Cleanup(func() { p.Close() })
		if p.Medium() != m {
			t.Errorf("Medium() = %v, want %v", p.Medium(), m)
		}
		pools[m] = p
		mustRegister(t, p, byHash(uint64(100+i)))
	}
	evs := pollAll(t, r)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	for i, ev := range evs {
		if ev.Kind != EventRegister || ev.Medium != media[i] || ev.PoolID != pools[media[i]].ID() {
			t.Errorf("event %d = %+v, want a Register from the %v pool", i, ev, media[i])
		}
	}
	if _, err := r.NewPoolMedium("tape", Medium(4)); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown medium: err = %v, want ErrInvalid", err)
	}
	if s := Medium(7).String(); s != "Medium(7)" {
		t.Errorf("String of an unknown medium = %q", s)
	}
}

func TestClearEmitsOneClearedAndStalesHandles(t *testing.T) {
	r := newReg(t, &Options{KeepTokens: true})
	gpu := newPool(t, r, "gpu")
	cpu, err := r.NewPoolMedium("cpu", MediumCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	var held []Block
	for h := uint64(1); h <= 4; h++ {
		held = append(held, mustRegister(t, gpu, byHash(h)))
	}
	other := mustRegister(t, cpu, byHash(1))
	before := pollAll(t, r)
	if err := r.Clear(); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	evs := pollAll(t, r)
	if len(evs) != 1 {
		t.Fatalf("Clear gave %d events, want exactly one Cleared: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Kind != EventCleared || ev.ID != before[len(before)-1].ID+1 || ev.PoolID != 0 ||
		ev.SequenceHash != 0 || ev.Medium != MediumGPU {
		t.Errorf("Cleared event = %+v", ev)
	}
	if gpu.Size() != 0 || cpu.Size() != 0 {
		t.Errorf("pool sizes after Clear: %d, %d", gpu.Size(), cpu.Size())
	}
	st, err := r.Stats()
	if err != nil || st.EventsCleared != 1 || st.Hashes != 0 || st.TokenBytes != 0 {
		t.Errorf("Stats after Clear = %+v, %v", st, err)
	}
	for _, b := range held {
		if err := gpu.Release(b); !errors.Is(err, ErrStale) {
			t.Errorf("Release of a cleared handle: %v, want ErrStale", err)
		}
	}
	if err := cpu.Release(other); !errors.Is(err, ErrStale) {
		t.Errorf("Release of a cleared handle: %v, want ErrStale", err)
	}
	again := mustRegister(t, gpu, byHash(1)) // pools stay usable
	if _, err := gpu.Refcount(held[0]); !errors.Is(err, ErrStale) {
		t.Errorf("old handle after re-registering its hash: %v, want ErrStale", err)
	}
	mustRelease(t, gpu, again)
}

func TestSnapshotResync(t *testing.T) {
	r := newReg(t, &Options{KeepTokens: true, PollCapacity: 4})
	gpu := newPool(t, r, "gpu")
	cpu, err := r.NewPoolMedium("cpu", MediumCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	tokens := make([]uint32, 24)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	infos, err := HashBlocks(tokens, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	desc := func(i int) BlockDesc { return infos[i].Desc(tokens[i*4 : i*4+4]) }
	var held []Block
	for i := 0; i < 4; i++ {
		held = append(held, mustRegister(t, gpu, desc(i)))
	}
	mustRegister(t, cpu, desc(4))
	if st, _ := r.Stats(); st.EventsDropped == 0 {
		t.Fatal("the small queue must lose events for this test")
	}
	pollAll(t, r)                // the consumer sees a gap in the ids: resync
	mustRelease(t, gpu, held[3]) // a Remove queued before the snapshot
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	later := mustRegister(t, gpu, desc(5))
	mustRelease(t, gpu, held[2])

	if snap.Position != 6 || len(snap.Events) != 4 {
		t.Fatalf("snapshot position %d with %d events, want 6 and 4", snap.Position, len(snap.Events))
	}
	pos := map[uint64]int{}
	for i, ev := range snap.Events {
		pos[ev.SequenceHash] = i
		if ev.ID != EventIDSnapshot || ev.Kind != EventRegister || len(ev.Tokens) != 4 {
			t.Errorf("snapshot event %+v", ev)
		}
	}
	for _, ev := range snap.Events {
		if p, ok := pos[ev.ParentSequenceHash]; ev.HasParent && ok && p > pos[ev.SequenceHash] {
			t.Errorf("child %d before its parent", ev.SequenceHash)
		}
	}
	if m := snap.Events[pos[infos[4].SequenceHash]].Medium; m != MediumCPU {
		t.Errorf("the cpu pool's block has medium %v", m)
	}
	state := map[uint64]bool{}
	for _, ev := range snap.Events {
		state[ev.SequenceHash] = true
	}
	for _, ev := range pollAll(t, r) {
		if ev.ID < snap.Position {
			continue
		}
		switch ev.Kind {
		case EventRegister:
			state[ev.SequenceHash] = true
		case EventRemove:
			delete(state, ev.SequenceHash)
		}
	}
	want := []int{0, 1, 4, 5}
	if len(state) != len(want) {
		t.Errorf("resynced state has %d hashes, want %d", len(state), len(want))
	}
	for _, i := range want {
		if !state[infos[i].SequenceHash] {
			t.Errorf("block %d missing from the resynced state", i)
		}
	}
	mustRelease(t, gpu, later)
	r.Close()
	if len(snap.Events[0].Tokens) != 4 { // a Go copy: outlives the registry
		t.Error("snapshot tokens lost with the registry")
	}
	if _, err := r.Snapshot(); !errors.Is(err, ErrStale) {
		t.Errorf("Snapshot after Close: %v, want ErrStale", err)
	}
}

func TestFeaturesAreKnownBits(t *testing.T) {
	if f := Features(); f&^(FeatureWire|FeatureZMQ) != 0 {
		t.Errorf("Features() = %#x has unknown bits", f)
	}
}
