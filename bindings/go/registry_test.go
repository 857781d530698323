package kvreg

import (
	"errors"
	"testing"
)

func newReg(t *testing.T, opts *Options) *Registry {
	t.Helper()
	r, err := NewRegistry(opts)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func newPool(t *testing.T, r *Registry, name string) *Pool {
	t.Helper()
	p, err := r.NewPool(name)
	if err != nil {
		t.Fatalf("NewPool(%q): %v", name, err)
	}
	// Closing at cleanup also keeps p reachable for the whole test, so its finalizer never
	// reports it as leaked.
	t.Cleanup(func() { p.Close() })
	return p
}

// byHash describes a block registered by hash only (the registry does not re-hash, so any
// value works as a name).
func byHash(h uint64) BlockDesc { return BlockDesc{SequenceHash: h, BlockHash: h} }

func mustRegister(t *testing.T, p *Pool, d BlockDesc) Block {
	t.Helper()
	b, err := p.Register(d)
	if err != nil {
		t.Fatalf("Register(%d) in %s: %v", d.SequenceHash, p.Name(), err)
	}
	if b.IsZero() {
		t.Fatalf("Register(%d) returned the zero handle", d.SequenceHash)
	}
	return b
}

func mustRelease(t *testing.T, p *Pool, b Block) {
	t.Helper()
	if err := p.Release(b); err != nil {
		t.Fatalf("Release in %s: %v", p.Name(), err)
	}
}

func pollAll(t *testing.T, r *Registry) []Event {
	t.Helper()
	evs, err := r.Poll(1 << 20)
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return evs
}

func TestPoolIdentity(t *testing.T) {
	r := newReg(t, nil)
	a, b := newPool(t, r, "gpu"), newPool(t, r, "host")
	if a.Name() != "gpu" || b.Name() != "host" {
		t.Fatalf("names %q %q", a.Name(), b.Name())
	}
	if a.ID() == 0 || b.ID() == 0 || a.ID() == b.ID() || a.ID() > uint32(MaxPools) ||
		b.ID() > uint32(MaxPools) {
		t.Fatalf("pool ids %d %d: want distinct values in 1..%d", a.ID(), b.ID(), MaxPools)
	}
	if a.Registry() != r {
		t.Fatal("Pool.Registry is not the registry that made it")
	}
	if n, err := r.Stat(StatPools); err != nil || n != 2 {
		t.Fatalf("StatPools = %d, %v; want 2", n, err)
	}
}

// Blocks registered from the seed vector's hashes carry them, and their tokens, into the
// Register events.
func TestRegisterEventsCarryHashesAndTokens(t *testing.T) {
	c := seedCase(t)
	want := c.want(t)
	r := newReg(t, nil)
	p := newPool(t, r, "gpu")
	var blocks []Block
	for _, w := range want {
		d := w.info.Desc(w.tokens)
		d.BlockSize = c.BlockSize
		blocks = append(blocks, mustRegister(t, p, d))
	}
	evs := pollAll(t, r)
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d Register", len(evs), len(want))
	}
	for i, ev := range evs {
		w := want[i].info
		if ev.Kind != EventRegister || ev.ID != uint64(i) || ev.PoolID != p.ID() ||
			ev.SequenceHash != w.SequenceHash || ev.BlockHash != w.BlockHash ||
			ev.HasParent != w.HasParent || ev.ParentSequenceHash != w.ParentSequenceHash {
			t.Errorf("event %d = %+v, want Register of %+v from pool %d", i, ev, w, p.ID())
		}
		if !equalTokens(ev.Tokens, want[i].tokens) {
			t.Errorf("event %d tokens %v, want %v", i, ev.Tokens, want[i].tokens)
		}
	}
	for i, b := range blocks {
		info, err := p.Info(b)
		w := want[i].info
		w.Position = PositionUnknown
		if err != nil || info != w {
			t.Errorf("Info(block %d) = %+v, %v; want %+v", i, info, err, w)
		}
	}
	if evs := pollAll(t, r); len(evs) != 0 {
		t.Fatalf("second Poll returned %d events, want none", len(evs))
	}
}

// One Register when a hash first appears in any pool, one Remove when it leaves the last.
func TestTwoPoolsShareOneRegistration(t *testing.T) {
	r := newReg(t, nil)
	gpu, host := newPool(t, r, "gpu"), newPool(t, r, "host")
	hashes := []uint64{101, 202, 303}
	var inGPU, inHost []Block
	for _, h := range hashes {
		inGPU = append(inGPU, mustRegister(t, gpu, byHash(h)))
		inHost = append(inHost, mustRegister(t, host, byHash(h)))
	}
	for i, b := range inGPU {
		mustRelease(t, gpu, b)
		if ok, _ := r.Contains(hashes[i]); !ok {
			t.Fatalf("hash %d vanished from the registry while host still holds it", hashes[i])
		}
	}
	for _, b := range inHost {
		mustRelease(t, host, b)
	}
	kinds := map[uint64][]EventKind{}
	for _, ev := range pollAll(t, r) {
		kinds[ev.SequenceHash] = append(kinds[ev.SequenceHash], ev.Kind)
		if ev.Kind == EventRegister && ev.PoolID != gpu.ID() {
			t.Errorf("Register of %d from pool %d, want the first registrant %d",
				ev.SequenceHash, ev.PoolID, gpu.ID())
		}
		if ev.Kind == EventRemove && ev.PoolID != host.ID() {
			t.Errorf("Remove of %d from pool %d, want the last holder %d",
				ev.SequenceHash, ev.PoolID, host.ID())
		}
	}
	for _, h := range hashes {
		got := kinds[h]
		if len(got) != 2 || got[0] != EventRegister || got[1] != EventRemove {
			t.Errorf("hash %d: events %v, want [Register Remove]", h, got)
		}
	}
	st, err := r.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Hashes != 0 || st.EventsRegister != 3 || st.EventsRemove != 3 || st.NextEventID != 6 {
		t.Errorf("stats %+v: want 0 hashes, 3 Register, 3 Remove, next id 6", st)
	}
}

func TestRegisterTwiceInOnePoolIsExist(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "gpu")
	b := mustRegister(t, p, byHash(7))
	if _, err := p.Register(byHash(7)); !errors.Is(err, ErrExist) {
		t.Fatalf("second Register = %v, want ErrExist", err)
	}
	if n, err := p.Refcount(b); err != nil || n != 1 {
		t.Fatalf("Refcount after rejected Register = %d, %v; want 1 (nothing changes)", n, err)
	}
}

func TestStaleHandles(t *testing.T) {
	r := newReg(t, nil)
	a, b := newPool(t, r, "a"), newPool(t, r, "b")
	blk := mustRegister(t, a, byHash(11))
	if err := b.Release(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("Release of a's handle in b = %v, want ErrStale", err)
	}
	mustRelease(t, a, blk)
	if err := a.Release(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("double Release = %v, want ErrStale", err)
	}
	if _, err := a.Refcount(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("Refcount of a released handle = %v, want ErrStale", err)
	}
	if _, err := a.Info(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("Info of a released handle = %v, want ErrStale", err)
	}
	other := newReg(t, nil)
	op := newPool(t, other, "a")
	blk2 := mustRegister(t, a, byHash(12))
	if err := op.Release(blk2); !errors.Is(err, ErrStale) {
		t.Fatalf("Release of a handle from another registry = %v, want ErrStale", err)
	}
	// The zero handle is never valid, so it is "not live in this pool".
	if err := a.Release(Block{}); !errors.Is(err, ErrStale) {
		t.Fatalf("Release of the zero handle = %v, want ErrStale", err)
	}
}

func TestAcquireReleaseRefcounts(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "gpu")
	if _, err := p.Acquire(5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Acquire of an absent hash = %v, want ErrNotFound", err)
	}
	b := mustRegister(t, p, byHash(5))
	for want := uint32(2); want <= 3; want++ {
		got, err := p.Acquire(5)
		if err != nil || got != b {
			t.Fatalf("Acquire = %v, %v; want the registered handle %v", got, err, b)
		}
		if n, _ := p.Refcount(b); n != want {
			t.Fatalf("Refcount = %d, want %d", n, want)
		}
	}
	for want := uint32(2); want >= 1; want-- {
		mustRelease(t, p, b)
		if n, _ := p.Refcount(b); n != want {
			t.Fatalf("Refcount after Release = %d, want %d", n, want)
		}
		if ok, _ := p.Contains(5); !ok {
			t.Fatal("hash left the pool while references remain")
		}
	}
	mustRelease(t, p, b)
	if ok, err := p.Contains(5); ok || err != nil {
		t.Fatalf("Contains after the last Release = %v, %v; want false", ok, err)
	}
	if p.Size() != 0 {
		t.Fatalf("Size = %d, want 0", p.Size())
	}
	evs := pollAll(t, r)
	if len(evs) != 2 || evs[0].Kind != EventRegister || evs[1].Kind != EventRemove {
		t.Fatalf("events %+v, want exactly Register then Remove", evs)
	}
}

func TestPrefixMatchAndAcquire(t *testing.T) {
	r := newReg(t, nil)
	p := newPool(t, r, "gpu")
	// Five chained hashes of which the pool holds the first three and the fifth.
	hashes := []uint64{1001, 1002, 1003, 1004, 1005}
	held := map[uint64]Block{}
	for _, h := range []uint64{1001, 1002, 1003, 1005} {
		held[h] = mustRegister(t, p, byHash(h))
	}
	if n, err := p.MatchPrefix(hashes); err != nil || n != 3 {
		t.Fatalf("MatchPrefix = %d, %v; want 3 (stops at the first miss)", n, err)
	}
	if n, _ := p.MatchPrefix(nil); n != 0 {
		t.Fatalf("MatchPrefix(nil) = %d, want 0", n)
	}
	if n, _ := p.Match(hashes); n != 3 { // the deprecated name answers the same
		t.Fatalf("Match = %d, want 3", n)
	}
	if n, _ := p.Refcount(held[1001]); n != 1 {
		t.Fatalf("Match took a reference: refcount %d", n)
	}
	got, err := p.AcquirePrefix(hashes)
	if err != nil || len(got) != 3 {
		t.Fatalf("AcquirePrefix = %v, %v; want 3 blocks", got, err)
	}
	for i, b := range got {
		if b != held[hashes[i]] {
			t.Errorf("AcquirePrefix[%d] = %v, want %v", i, b, held[hashes[i]])
		}
		if n, _ := p.Refcount(b); n != 2 {
			t.Errorf("refcount of prefix block %d = %d, want 2", i, n)
		}
	}
	errs, err := p.ReleaseBatch(append(got, got[0]))
	if err != nil || len(errs) != 4 || errs[0] != nil || errs[2] != nil {
		t.Fatalf("ReleaseBatch = %v, %v", errs, err)
	}
	// The fourth handle is block 0 again: AcquirePrefix raised it to 2 references, so the
	// second release is valid too and drops the last one.
	if errs[3] != nil {
		t.Fatalf("releasing block 0's second reference = %v", errs[3])
	}
	if _, err := p.Refcount(held[1001]); !errors.Is(err, ErrStale) {
		t.Fatalf("block 0 after releasing both references = %v, want ErrStale", err)
	}
	if n, _ := p.Refcount(held[1002]); n != 1 {
		t.Fatalf("block 1 refcount = %d, want 1 (its registration's reference)", n)
	}
}

func TestBatchAndSequenceRegistration(t *testing.T) {
	c := seedCase(t)
	want := c.want(t)
	r := newReg(t, &Options{KeepTokens: true})
	gpu, host := newPool(t, r, "gpu"), newPool(t, r, "host")

	seq := newSeq(t, c.BlockSize, c.salt(t))
	if _, err := seq.Extend(c.Tokens); err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.RegisterSequenceBlock(seq, len(want)); !errors.Is(err, ErrState) {
		t.Fatalf("registering the partial block = %v, want ErrState", err)
	}
	if _, err := gpu.RegisterSequenceBlock(seq, len(want)+1); !errors.Is(err, ErrRange) {
		t.Fatalf("registering past the partial block = %v, want ErrRange", err)
	}
	for _, span := range [][2]int{{0, len(want) + 1}, {len(want) + 1, 0}, {1, 1 << 30}} {
		if _, _, err := gpu.RegisterSequence(seq, span[0], span[1]); !errors.Is(err, ErrRange) {
			t.Fatalf("RegisterSequence(first %d, count %d) = %v, want ErrRange", span[0], span[1], err)
		}
	}
	if b, errs, err := gpu.RegisterSequence(seq, len(want), 0); err != nil || len(b) != 0 || len(errs) != 0 {
		t.Fatalf("empty RegisterSequence = %v, %v, %v; want nothing, no error", b, errs, err)
	}
	if n := gpu.Size(); n != 0 {
		t.Fatalf("a rejected range registered %d blocks", n)
	}
	blocks, errs, err := gpu.RegisterSequence(seq, 0, len(want))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if errs[i] != nil || blocks[i].IsZero() {
			t.Fatalf("RegisterSequence block %d: %v", i, errs[i])
		}
		toks, err := gpu.Tokens(blocks[i])
		if err != nil || !equalTokens(toks, want[i].tokens) {
			t.Errorf("Tokens(block %d) = %v, %v; want %v", i, toks, err, want[i].tokens)
		}
	}

	// The same blocks by descriptor into the host pool: one fresh, one duplicate.
	descs := []BlockDesc{want[0].info.Desc(want[0].tokens), want[0].info.Desc(nil),
		want[1].info.Desc(want[1].tokens)}
	hb, herrs, err := host.RegisterBatch(descs)
	if err != nil {
		t.Fatal(err)
	}
	if herrs[0] != nil || herrs[2] != nil || !errors.Is(herrs[1], ErrExist) || !hb[1].IsZero() {
		t.Fatalf("RegisterBatch results %v %v", hb, herrs)
	}
	if evs := pollAll(t, r); len(evs) != len(want) {
		t.Fatalf("%d events; the host pool must add no Register for shared hashes", len(evs))
	}

	// A partial or oversized token list is rejected (in a pool that does not hold the hash).
	disk := newPool(t, r, "disk")
	short := want[0].info.Desc(want[0].tokens[:2])
	short.BlockSize = c.BlockSize
	if _, err := disk.Register(short); !errors.Is(err, ErrState) {
		t.Fatalf("Register of a partial block = %v, want ErrState", err)
	}
	long := want[0].info.Desc(append(append([]uint32{}, want[0].tokens...), 99))
	long.BlockSize = c.BlockSize
	if _, err := disk.Register(long); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Register of an oversized block = %v, want ErrInvalid", err)
	}
	if disk.Size() != 0 {
		t.Fatalf("rejected registrations left %d blocks in the pool", disk.Size())
	}

	// With KeepTokens, Remove events carry the tokens too.
	if err := gpu.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := host.ReleaseBatch([]Block{hb[0], hb[2]}); err != nil {
		t.Fatal(err)
	}
	removes := 0
	for _, ev := range pollAll(t, r) {
		if ev.Kind != EventRemove {
			t.Fatalf("unexpected %v", ev.Kind)
		}
		removes++
		idx := 0
		if ev.SequenceHash == want[1].info.SequenceHash {
			idx = 1
		}
		if !equalTokens(ev.Tokens, want[idx].tokens) {
			t.Errorf("Remove of block %d carries tokens %v, want %v", idx, ev.Tokens, want[idx].tokens)
		}
	}
	if removes != len(want) {
		t.Fatalf("%d Remove events, want %d", removes, len(want))
	}
}

func TestPoolCloseReleasesItsBlocks(t *testing.T) {
	r := newReg(t, nil)
	a, b := newPool(t, r, "a"), newPool(t, r, "b")
	blk := mustRegister(t, a, byHash(1))
	mustRegister(t, a, byHash(2))
	mustRegister(t, b, byHash(2))
	if _, err := a.Acquire(1); err != nil {
		t.Fatal(err)
	}
	pollAll(t, r)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	evs := pollAll(t, r)
	if len(evs) != 1 || evs[0].Kind != EventRemove || evs[0].SequenceHash != 1 {
		t.Fatalf("events after Close %+v, want only Remove(1) (hash 2 is still in b)", evs)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := a.Release(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("Release on a closed pool = %v, want ErrStale", err)
	}
	if _, err := a.Register(byHash(3)); !errors.Is(err, ErrStale) {
		t.Fatalf("Register on a closed pool = %v, want ErrStale", err)
	}
	// A new pool may take the freed slot; the closed Pool must not act on it.
	c := newPool(t, r, "c")
	mustRegister(t, c, byHash(4))
	if _, err := a.Acquire(4); !errors.Is(err, ErrStale) {
		t.Fatalf("Acquire through the closed pool = %v, want ErrStale", err)
	}
	if a.Size() != 0 {
		t.Fatal("closed pool reports a size")
	}
}

func TestRegistryCloseInvalidatesEverything(t *testing.T) {
	r, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t, r, "gpu")
	blk := mustRegister(t, p, byHash(9))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := p.Release(blk); !errors.Is(err, ErrStale) {
		t.Fatalf("Release after the registry closed = %v, want ErrStale", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Pool.Close after the registry closed = %v", err)
	}
	if _, err := r.NewPool("x"); !errors.Is(err, ErrStale) {
		t.Fatalf("NewPool after Close = %v, want ErrStale", err)
	}
	if _, err := r.Poll(1); !errors.Is(err, ErrStale) {
		t.Fatalf("Poll after Close = %v, want ErrStale", err)
	}
	if _, err := r.Contains(9); !errors.Is(err, ErrStale) {
		t.Fatalf("Contains after Close = %v, want ErrStale", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	if _, err := NewRegistry(&Options{Shards: 3}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("3 shards = %v, want ErrInvalid (not a power of two)", err)
	}
	// One shard holds 16,776,960 blocks: one more cannot be reserved.
	if _, err := NewRegistry(&Options{Shards: 1, ReserveBlocks: 16776961}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reserving past a shard = %v, want ErrInvalid", err)
	}
	newReg(t, &Options{ReserveBlocks: 1000})
	r := newReg(t, &Options{Shards: 1, PollCapacity: 1})
	if _, err := r.Stat(Stat(999)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown stat = %v, want ErrInvalid", err)
	}
}

func TestPoolLimitIsOverflow(t *testing.T) {
	r := newReg(t, nil)
	pools := make([]*Pool, 0, MaxPools)
	for i := 0; i < MaxPools; i++ {
		pools = append(pools, newPool(t, r, "p"))
	}
	if _, err := r.NewPool("one too many"); !errors.Is(err, ErrOverflow) {
		t.Fatalf("pool %d = %v, want ErrOverflow", MaxPools+1, err)
	}
	if err := pools[7].Close(); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, r, "reuses a slot")
	if p.ID() == 0 || p.ID() > uint32(MaxPools) {
		t.Fatalf("pool id %d out of range", p.ID())
	}
}

// Tokens grows its buffer when a block has more tokens than its first guess.
func TestTokensOfLargeBlock(t *testing.T) {
	const blockSize = 1000
	toks := make([]uint32, blockSize)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	r := newReg(t, &Options{KeepTokens: true})
	p := newPool(t, r, "gpu")
	b := mustRegister(t, p, BlockDesc{SequenceHash: 1, BlockHash: 1, BlockSize: blockSize,
		Tokens: toks})
	got, err := p.Tokens(b)
	if err != nil || !equalTokens(got, toks) {
		t.Fatalf("Tokens = %d tokens, %v; want the %d registered", len(got), err, blockSize)
	}
	noTok := mustRegister(t, p, byHash(2))
	if _, err := p.Tokens(noTok); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Tokens of a block registered by hash = %v, want ErrNotFound", err)
	}
}

// Contains answers through the library's out-parameter: a yes, a no, and errors that are
// errors (never a plain "no").
func TestContainsAnswersAndErrors(t *testing.T) {
	r, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, q := newPool(t, r, "p"), newPool(t, r, "q")
	mustRegister(t, p, byHash(5))
	for _, c := range []struct {
		name string
		f    func(uint64) (bool, error)
		h    uint64
		want bool
	}{
		{"Pool.Contains(held)", p.Contains, 5, true},
		{"Pool.Contains(other pool's)", q.Contains, 5, false},
		{"Pool.Contains(absent)", p.Contains, 6, false},
		{"Registry.Contains(held)", r.Contains, 5, true},
		{"Registry.Contains(absent)", r.Contains, 6, false},
	} {
		if got, err := c.f(c.h); got != c.want || err != nil {
			t.Errorf("%s = %v, %v; want %v, nil", c.name, got, err, c.want)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := q.Contains(5); got || !errors.Is(err, ErrStale) {
		t.Errorf("Contains on a closed pool = %v, %v; want false, ErrStale", got, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Contains(5); got || !errors.Is(err, ErrStale) {
		t.Errorf("Pool.Contains after Registry.Close = %v, %v; want false, ErrStale", got, err)
	}
	if got, err := r.Contains(5); got || !errors.Is(err, ErrStale) {
		t.Errorf("Registry.Contains after Close = %v, %v; want false, ErrStale", got, err)
	}
}

// Flush works in both event modes (nothing to wait for single-threaded, but it must not
// fail), and a closed registry says so.
func TestFlush(t *testing.T) {
	for _, opts := range []*Options{nil, {DiscardEvents: true}} {
		r, err := NewRegistry(opts)
		if err != nil {
			t.Fatal(err)
		}
		p := newPool(t, r, "p")
		mustRegister(t, p, byHash(1))
		if err := r.Flush(); err != nil {
			t.Errorf("Flush (%+v) = %v", opts, err)
		}
		st, err := r.Stats()
		if err != nil || st.EventsQueued+st.EventsDropped != 1 {
			t.Errorf("after Flush (%+v): stats %+v, %v; want the event queued or dropped",
				opts, st, err)
		}
		r.Close()
		if err := r.Flush(); !errors.Is(err, ErrStale) {
			t.Errorf("Flush after Close = %v, want ErrStale", err)
		}
	}
}
