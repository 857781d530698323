package kvreg

import (
	"errors"
	"testing"
)

func newSeq(t *testing.T, blockSize uint32, salt uint64) *Sequence {
	t.Helper()
	s, err := NewSequence(blockSize, salt)
	if err != nil {
		t.Fatalf("NewSequence(%d, %d): %v", blockSize, salt, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSequenceRejectsZeroBlockSize(t *testing.T) {
	if _, err := NewSequence(0, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewSequence(0) error = %v, want ErrInvalid", err)
	}
	if _, err := HashBlocks([]uint32{1}, 0, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("HashBlocks(block size 0) error = %v, want ErrInvalid", err)
	}
}

// Dynamo commits a block as soon as it is full (eager), so extending by exactly one block
// completes it at once.
func TestSequenceEagerCommit(t *testing.T) {
	s := newSeq(t, 4, RouterSalt)
	n, err := s.Extend([]uint32{1, 2, 3, 4})
	if err != nil || n != 1 {
		t.Fatalf("Extend(4 tokens) = %d, %v; want 1 completed", n, err)
	}
	if p, _ := s.PartialTokens(); len(p) != 0 {
		t.Fatalf("partial block after a full Extend = %v, want empty", p)
	}
	if n, err := s.Extend(nil); err != nil || n != 0 {
		t.Fatalf("Extend(nil) = %d, %v; want 0, nil", n, err)
	}
	n, err = s.Extend([]uint32{5, 6, 7, 8, 9, 10})
	if err != nil || n != 1 {
		t.Fatalf("Extend(6 tokens) = %d, %v; want 1 completed", n, err)
	}
	if s.NumBlocks() != 2 || s.TotalTokens() != 10 || s.BlockSize() != 4 || s.Salt() != RouterSalt {
		t.Fatalf("blocks %d tokens %d size %d salt %d", s.NumBlocks(), s.TotalTokens(),
			s.BlockSize(), s.Salt())
	}
	if p, _ := s.PartialTokens(); !equalTokens(p, []uint32{9, 10}) {
		t.Fatalf("partial = %v, want [9 10]", p)
	}
}

func TestSequenceMatchesSeedVector(t *testing.T) {
	c := seedCase(t)
	want := c.want(t)
	s := newSeq(t, c.BlockSize, c.salt(t))
	if _, err := s.Extend(c.Tokens); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := s.Block(i)
		if err != nil || got != w.info {
			t.Errorf("Block(%d) = %+v, %v; want %+v", i, got, err, w.info)
		}
	}
	if _, err := s.Block(len(want)); !errors.Is(err, ErrRange) {
		t.Errorf("Block(past the end) error = %v, want ErrRange", err)
	}
	if _, err := s.BlockTokens(len(want)); !errors.Is(err, ErrRange) {
		t.Errorf("BlockTokens(past the end) error = %v, want ErrRange", err)
	}
}

// Truncating into a block dissolves it; the surviving blocks keep their hashes, and
// re-extending with the same tokens restores the same hashes.
func TestSequenceTruncateAndRegrow(t *testing.T) {
	c := seedCase(t)
	want := c.want(t)
	s := newSeq(t, c.BlockSize, c.salt(t))
	if _, err := s.Extend(c.Tokens); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if s.NumBlocks() != 1 || s.TotalTokens() != 6 {
		t.Fatalf("after Truncate(6): %d blocks, %d tokens", s.NumBlocks(), s.TotalTokens())
	}
	if p, _ := s.PartialTokens(); !equalTokens(p, []uint32{5, 6}) {
		t.Fatalf("partial after Truncate(6) = %v, want [5 6]", p)
	}
	if b, _ := s.Block(0); b != want[0].info {
		t.Fatalf("block 0 changed by Truncate: %+v", b)
	}
	if err := s.Truncate(100); err != nil || s.TotalTokens() != 6 {
		t.Fatalf("Truncate beyond the end: %v, %d tokens (want no-op)", err, s.TotalTokens())
	}
	if n, err := s.Extend(c.Tokens[6:]); err != nil || n != 1 {
		t.Fatalf("re-Extend = %d, %v", n, err)
	}
	if b, _ := s.Block(1); b != want[1].info {
		t.Fatalf("block 1 after regrowth = %+v, want %+v", b, want[1].info)
	}
}

func TestSequenceUnwindPopReset(t *testing.T) {
	s := newSeq(t, 4, 0)
	if _, err := s.Extend([]uint32{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unwind(6); !errors.Is(err, ErrRange) || s.TotalTokens() != 5 {
		t.Fatalf("Unwind(6 of 5) = %v with %d tokens left; want ErrRange, unchanged", err,
			s.TotalTokens())
	}
	if err := s.Unwind(2); err != nil || s.TotalTokens() != 3 || s.NumBlocks() != 0 {
		t.Fatalf("Unwind(2) = %v: %d tokens, %d blocks", err, s.TotalTokens(), s.NumBlocks())
	}
	for _, want := range []uint32{3, 2, 1} {
		if tok, err := s.Pop(); err != nil || tok != want {
			t.Fatalf("Pop = %d, %v; want %d", tok, err, want)
		}
	}
	if _, err := s.Pop(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pop on empty = %v, want ErrNotFound", err)
	}
	if _, err := s.Extend([]uint32{9, 9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(); err != nil || s.TotalTokens() != 0 || s.NumBlocks() != 0 {
		t.Fatalf("Reset = %v, %d tokens left", err, s.TotalTokens())
	}
	if s.BlockSize() != 4 {
		t.Fatalf("Reset lost the block size: %d", s.BlockSize())
	}
}

func TestSequenceUseAfterClose(t *testing.T) {
	s, err := NewSequence(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil (idempotent)", err)
	}
	if _, err := s.Extend([]uint32{1}); !errors.Is(err, ErrStale) {
		t.Fatalf("Extend after Close = %v, want ErrStale", err)
	}
	if _, err := s.Pop(); !errors.Is(err, ErrStale) {
		t.Fatalf("Pop after Close = %v, want ErrStale", err)
	}
	if s.NumBlocks() != 0 || s.TotalTokens() != 0 || s.BlockSize() != 0 {
		t.Fatal("getters of a closed sequence must read zero")
	}
}
