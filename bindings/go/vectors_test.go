package kvreg

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The expected hashes come from tests/vectors/public.json, produced by an independent Python
// implementation of the rule; nothing here is computed by the library under test.

type vectorBlock struct {
	Tokens       []uint32 `json:"tokens"`
	BlockHash    string   `json:"block_hash_str"`
	SequenceHash string   `json:"sequence_hash_str"`
	Parent       *string  `json:"parent_sequence_hash_str"` // null for the first block
}

type vectorCase struct {
	Note          string        `json:"note"`
	Tokens        []uint32      `json:"tokens"`
	BlockSize     uint32        `json:"block_size"`
	Salt          string        `json:"salt_str"`
	Blocks        []vectorBlock `json:"blocks"`
	PartialTokens []uint32      `json:"partial_tokens"`
}

// wantBlock is a vector block with its u64 strings parsed.
type wantBlock struct {
	info   BlockInfo
	tokens []uint32
}

func vectorsPath() string {
	if p := os.Getenv("KVREG_VECTORS"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "tests", "vectors", "public.json")
}

func loadVectors(t *testing.T) []vectorCase {
	t.Helper()
	path := vectorsPath()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading vectors (set KVREG_VECTORS to tests/vectors/public.json): %v", err)
	}
	var file struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	if len(file.Cases) == 0 {
		t.Fatalf("%s holds no cases", path)
	}
	return file.Cases
}

func parseU64(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("bad u64 %q in vectors: %v", s, err)
	}
	return v
}

func (c *vectorCase) salt(t *testing.T) uint64 { return parseU64(t, c.Salt) }

func (c *vectorCase) want(t *testing.T) []wantBlock {
	t.Helper()
	out := make([]wantBlock, len(c.Blocks))
	for i, b := range c.Blocks {
		w := wantBlock{tokens: b.Tokens, info: BlockInfo{
			BlockHash:    parseU64(t, b.BlockHash),
			SequenceHash: parseU64(t, b.SequenceHash),
			Position:     uint32(i),
		}}
		if b.Parent != nil {
			w.info.HasParent = true
			w.info.ParentSequenceHash = parseU64(t, *b.Parent)
		}
		out[i] = w
	}
	return out
}

// seedCase is the Dynamo seed vector (tokens 1..10, block size 4, salt 1337).
func seedCase(t *testing.T) vectorCase {
	t.Helper()
	for _, c := range loadVectors(t) {
		if c.BlockSize == 4 && len(c.Tokens) == 10 && c.Salt == "1337" {
			return c
		}
	}
	t.Fatal("seed vector (tokens 1..10, block size 4, salt 1337) missing from vectors file")
	return vectorCase{}
}

func equalTokens(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestVectorsHashBlocks(t *testing.T) {
	for _, c := range loadVectors(t) {
		c := c
		t.Run(c.Note, func(t *testing.T) {
			want := c.want(t)
			got, err := HashBlocks(c.Tokens, c.BlockSize, c.salt(t))
			if err != nil {
				t.Fatalf("HashBlocks: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("HashBlocks gave %d blocks, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i].info {
					t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i].info)
				}
			}
		})
	}
}

func TestVectorsChainStep(t *testing.T) {
	for _, c := range loadVectors(t) {
		c := c
		t.Run(c.Note, func(t *testing.T) {
			salt := c.salt(t)
			for i, w := range c.want(t) {
				if got := BlockHash(w.tokens, salt); got != w.info.BlockHash {
					t.Errorf("BlockHash(block %d) = %d, want %d", i, got, w.info.BlockHash)
				}
				if !w.info.HasParent {
					continue
				}
				got := SequenceHash(w.info.ParentSequenceHash, w.info.BlockHash, salt)
				if got != w.info.SequenceHash {
					t.Errorf("SequenceHash(block %d) = %d, want %d", i, got, w.info.SequenceHash)
				}
			}
		})
	}
}

// Building each case token by token must give the same blocks as hashing it at once.
func TestVectorsSequence(t *testing.T) {
	for _, c := range loadVectors(t) {
		c := c
		t.Run(c.Note, func(t *testing.T) {
			want := c.want(t)
			seq, err := NewSequence(c.BlockSize, c.salt(t))
			if err != nil {
				t.Fatalf("NewSequence: %v", err)
			}
			defer seq.Close()
			completed := 0
			for _, tok := range c.Tokens {
				done, err := seq.Append(tok)
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
				if done {
					completed++
				}
			}
			if completed != len(want) || seq.NumBlocks() != len(want) {
				t.Fatalf("completed %d, NumBlocks %d, want %d", completed, seq.NumBlocks(), len(want))
			}
			if seq.TotalTokens() != len(c.Tokens) {
				t.Errorf("TotalTokens = %d, want %d", seq.TotalTokens(), len(c.Tokens))
			}
			blocks, err := seq.Blocks()
			if err != nil {
				t.Fatalf("Blocks: %v", err)
			}
			for i, w := range want {
				if blocks[i] != w.info {
					t.Errorf("block %d: got %+v, want %+v", i, blocks[i], w.info)
				}
				toks, err := seq.BlockTokens(i)
				if err != nil || !equalTokens(toks, w.tokens) {
					t.Errorf("BlockTokens(%d) = %v, %v; want %v", i, toks, err, w.tokens)
				}
			}
			partial, err := seq.PartialTokens()
			if err != nil || !equalTokens(partial, c.PartialTokens) {
				t.Errorf("PartialTokens = %v, %v; want %v", partial, err, c.PartialTokens)
			}
		})
	}
}
