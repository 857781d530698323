package kvreg

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// natsServer starts nats-server (JetStream, a temporary store, 127.0.0.1, an ephemeral port)
// and returns its URL; the test is skipped, saying why, when the library has no NATS or the
// server is missing (a failure with CI=true).
func natsServer(t *testing.T) string {
	t.Helper()
	if !NatsAvailable() {
		t.Skip("this libkvreg was built without NATS (NatsAvailable() is false)")
	}
	exe := os.Getenv("KVREG_NATS_SERVER")
	if exe == "" {
		for _, d := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/local/sbin") {
			if st, err := os.Stat(filepath.Join(d, "nats-server")); err == nil && !st.IsDir() {
				exe = filepath.Join(d, "nats-server")
				break
			}
		}
	}
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("nats-server not found; CI=true, so this is a failure")
		}
		t.Skip("nats-server not found (apt-get install nats-server)")
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-js", "-sd", filepath.Join(dir, "store"), "-a", "127.0.0.1",
		"-p", "-1", "--ports_file_dir", dir, "-l", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	ports := filepath.Join(dir, fmt.Sprintf("nats-server_%d.ports", cmd.Process.Pid))
	var url string
	waitFor(t, "nats-server's ports file", func() bool {
		data, err := os.ReadFile(ports)
		var p struct{ Nats []string }
		if err != nil || json.Unmarshal(data, &p) != nil || len(p.Nats) == 0 {
			return false
		}
		url = p.Nats[0]
		return true
	})
	return url
}

// waitFor polls cond until it holds, bounded (no sleep stands for synchronisation).
// newNatsPublisher makes a publisher for reg, closed when the test ends.
func newNatsPublisher(t *testing.T, reg *Registry) *NatsPublisher {
	t.Helper()
	pub, err := NewNatsPublisher(reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub
}

// newNatsConsumer makes a consumer feeding a new index, both closed when the test ends.
func newNatsConsumer(t *testing.T) *NatsConsumer {
	t.Helper()
	idx, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	con, err := NewNatsConsumer(idx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { con.Close() })
	return con
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustStat(t)(x.Stat(s)) is the counter, or the test fails.
func mustStat(t *testing.T) func(uint64, error) uint64 {
	return func(v uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestNatsPublishConsume(t *testing.T) {
	url := natsServer(t)
	reg, err := NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	pool, err := reg.NewPool("gpu")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pub, err := NewNatsPublisher(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, e := range []error{pub.SetString(NatsURL, url), pub.SetString(NatsStream, "GO"),
		pub.SetString(NatsSubjectPrefix, "go.ev"), pub.Set(NatsPubWorkerID, 9),
		pub.Set(NatsPubBatchUs, 0)} {
		if e != nil {
			t.Fatal(e)
		}
	}
	// A fresh server answers before its JetStream is up: start until it works (bounded).
	waitFor(t, "the publisher to start", func() bool { return pub.Start() == nil })
	if err := pub.Set(NatsPubWorkerID, 1); !errors.Is(err, ErrState) {
		t.Fatalf("Set after Start: %v, want ErrState", err)
	}
	tokens := make([]uint32, 12)
	for i := range tokens {
		tokens[i] = uint32(100 + i)
	}
	infos, err := HashBlocks(tokens, 4, RouterSalt)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range infos {
		mustRegister(t, pool, b.Desc(tokens[4*i:4*i+4]))
	}
	published := func(n uint64) func() bool {
		return func() bool {
			h, _ := pub.Stat(NatsPubStatEventsHandled)
			f, _ := pub.Stat(NatsPubStatInFlight)
			return h >= n && f == 0
		}
	}
	waitFor(t, "3 events published and acknowledged", published(3))

	idx, err := NewIndex(map[uint32]uint64{IndexOptHashes: IndexHashesOwn})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	con, err := NewNatsConsumer(idx)
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	for _, e := range []error{con.SetString(NatsURL, url), con.SetString(NatsStream, "GO"),
		con.SetString(NatsDurable, "go-replica"), con.Set(NatsConFetchBatch, 16),
		con.SetString(NatsSnapshotBucket, "GOSNAP")} {
		if e != nil {
			t.Fatal(e)
		}
	}
	if err := con.Run(0); !errors.Is(err, ErrState) {
		t.Fatalf("Run before Start: %v, want ErrState", err)
	}
	if err := con.Start(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := con.Worker(9, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Worker before any batch: %v, want ErrNotFound", err)
	}
	target := mustStat(t)(pub.Stat(NatsPubStatBatches))
	if target == 0 {
		t.Fatal("no batch published")
	}
	waitFor(t, "the batches applied", func() bool {
		if err := con.Run(50); err != nil {
			t.Fatal(err)
		}
		_, next, err := con.Worker(9, 0)
		return err == nil && next == target
	})
	if n := mustStat(t)(idx.Stat(IndexStatEntries)); n != 3 {
		t.Fatalf("index entries %d, want 3 (3 blocks of worker 9)", n)
	}
	// A replica made from this one's dump is the same replica; a corrupt dump is refused.
	dump, err := idx.Dump()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := NewIndex(map[uint32]uint64{IndexOptHashes: IndexHashesOwn})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Load(dump); err != nil {
		t.Fatal(err)
	}
	if a, b := mustStat(t)(cp.Digest()), mustStat(t)(idx.Digest()); a != b {
		t.Fatalf("loaded digest %x, original %x", a, b)
	}
	if err := cp.Load(dump); !errors.Is(err, ErrState) {
		t.Fatalf("Load into a non-empty index: %v, want ErrState", err)
	}
	dump[len(dump)/2] ^= 1
	bad, err := NewIndex(map[uint32]uint64{IndexOptHashes: IndexHashesOwn})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Load(dump); !errors.Is(err, ErrProto) {
		t.Fatalf("Load of a corrupt dump: %v, want ErrProto", err)
	}
	// A replica started on this one's snapshot has its index at once.
	if seq, err := con.Snapshot(); err != nil || seq == 0 {
		t.Fatalf("Snapshot: seq %d, %v", seq, err)
	}
	idx2, err := NewIndex(map[uint32]uint64{IndexOptHashes: IndexHashesOwn})
	if err != nil {
		t.Fatal(err)
	}
	defer idx2.Close()
	con2, err := NewNatsConsumer(idx2)
	if err != nil {
		t.Fatal(err)
	}
	defer con2.Close()
	for _, e := range []error{con2.SetString(NatsURL, url), con2.SetString(NatsStream, "GO"),
		con2.SetString(NatsDurable, "go-replica-2"), con2.SetString(NatsSnapshotBucket, "GOSNAP"),
		con2.Start()} {
		if e != nil {
			t.Fatal(e)
		}
	}
	if r := mustStat(t)(con2.Stat(NatsConStatRestored)); r != 1 {
		t.Fatalf("restored %d, want 1", r)
	}
	if a, b := mustStat(t)(idx2.Digest()), mustStat(t)(idx.Digest()); a != b {
		t.Fatalf("restored digest %x, original %x", a, b)
	}
	if n := mustStat(t)(con.Stat(NatsConStatBatches)); n != target {
		t.Fatalf("consumer applied %d batches, the publisher made %d", n, target)
	}
	for _, s := range []uint32{NatsConStatDuplicates, NatsConStatLost, NatsConStatMalformed} {
		if n := mustStat(t)(con.Stat(s)); n != 0 {
			t.Fatalf("consumer stat %d = %d, want 0", s, n)
		}
	}
	if err := pub.Stop(); err != nil {
		t.Fatal(err)
	}
	if a, b := mustStat(t)(pub.Stat(NatsPubStatAcked)), mustStat(t)(pub.Stat(NatsPubStatBatches)); a != b {
		t.Fatalf("acked %d of %d batches", a, b)
	}
	_ = con.Close()
	if err := con.Run(0); !errors.Is(err, ErrStale) {
		t.Fatalf("Run after Close: %v, want ErrStale", err)
	}
}

func TestNatsNoServer(t *testing.T) {
	if !NatsAvailable() {
		reg, err := NewRegistry(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		if _, err := NewNatsPublisher(reg); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("without NATS: %v, want ErrNotSupported", err)
		}
		t.Skip("this libkvreg was built without NATS: only ErrNotSupported checked")
	}
	pub := newNatsPublisher(t, newReg(t, nil))
	_ = pub.SetString(NatsURL, "nats://127.0.0.1:1")
	_ = pub.Set(NatsPubConnectTimeoutMs, 200)
	if err := pub.Start(); !errors.Is(err, ErrProto) || !strings.Contains(err.Error(), "start") {
		t.Fatalf("Start with nothing listening: %v, want ErrProto", err)
	}
}
