package kvreg

/*
#include <kvreg.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Sequence is a token sequence split into blocks (Dynamo's TokenBlockSequence): a block is
// hashed as soon as it is full. The C object is single-owner; the Go wrapper adds a mutex so
// that a racing Close can never free it under another call, but interleaving edits from
// several goroutines still makes little sense.
type Sequence struct {
	mu  sync.Mutex
	ptr *C.kvreg_sequence // nil once closed
}

// NewSequence makes an empty sequence. ErrInvalid if blockSize is 0.
func NewSequence(blockSize uint32, salt uint64) (*Sequence, error) {
	var p *C.kvreg_sequence
	if err := check("kvreg_sequence_new", C.kvreg_sequence_new(&p, C.uint32_t(blockSize),
		C.uint64_t(salt))); err != nil {
		return nil, err
	}
	s := &Sequence{ptr: p}
	runtime.SetFinalizer(s, (*Sequence).finalize)
	return s, nil
}

// Close frees the sequence. It is idempotent; later calls return ErrStale errors.
func (s *Sequence) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr != nil {
		C.kvreg_sequence_free(s.ptr)
		s.ptr = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// finalize is the leak safety net: a sequence emits no events, so it is freed, and the leak is
// reported.
func (s *Sequence) finalize() {
	s.Close()
	reportLeak(Leak{Type: "Sequence"})
}

// with runs f on the live C pointer under the mutex, or returns the closed error.
func (s *Sequence) with(op string, f func(p *C.kvreg_sequence) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return closedErr(op)
	}
	err := f(s.ptr)
	runtime.KeepAlive(s)
	return err
}

// Extend appends tokens and returns how many blocks this call completed; they are the last
// ones of NumBlocks().
func (s *Sequence) Extend(tokens []uint32) (completed int, err error) {
	err = s.with("Sequence.Extend", func(p *C.kvreg_sequence) error {
		var n C.size_t
		e := check("kvreg_sequence_extend",
			C.kvreg_sequence_extend(p, tokensPtr(tokens), C.size_t(len(tokens)), &n))
		completed = int(n)
		return e
	})
	return completed, err
}

// Append appends one token and reports whether it completed a block.
func (s *Sequence) Append(token uint32) (completed bool, err error) {
	err = s.with("Sequence.Append", func(p *C.kvreg_sequence) error {
		var c C.int
		e := check("kvreg_sequence_append", C.kvreg_sequence_append(p, C.uint32_t(token), &c))
		completed = c != 0
		return e
	})
	return completed, err
}

// Truncate keeps the first n tokens (no-op if n >= TotalTokens()).
func (s *Sequence) Truncate(n int) error {
	if n < 0 {
		return &Error{Code: int(C.KVREG_EINVAL), Op: "Sequence.Truncate"}
	}
	return s.with("Sequence.Truncate", func(p *C.kvreg_sequence) error {
		return check("kvreg_sequence_truncate", C.kvreg_sequence_truncate(p, C.size_t(n)))
	})
}

// Unwind removes the last n tokens; ErrRange (and no change) if n > TotalTokens().
func (s *Sequence) Unwind(n int) error {
	if n < 0 {
		return &Error{Code: int(C.KVREG_EINVAL), Op: "Sequence.Unwind"}
	}
	return s.with("Sequence.Unwind", func(p *C.kvreg_sequence) error {
		return check("kvreg_sequence_unwind", C.kvreg_sequence_unwind(p, C.size_t(n)))
	})
}

// Pop removes and returns the last token; ErrNotFound if the sequence is empty.
func (s *Sequence) Pop() (token uint32, err error) {
	err = s.with("Sequence.Pop", func(p *C.kvreg_sequence) error {
		var t C.uint32_t
		e := check("kvreg_sequence_pop", C.kvreg_sequence_pop(p, &t))
		token = uint32(t)
		return e
	})
	return token, err
}

// Reset drops every token, keeping block size and salt.
func (s *Sequence) Reset() error {
	return s.with("Sequence.Reset", func(p *C.kvreg_sequence) error {
		return check("kvreg_sequence_reset", C.kvreg_sequence_reset(p))
	})
}

// getter runs a C getter that cannot fail; a closed sequence reads as zero, like a NULL one
// does in C.
func (s *Sequence) getter(f func(p *C.kvreg_sequence) uint64) uint64 {
	var v uint64
	_ = s.with("", func(p *C.kvreg_sequence) error { v = f(p); return nil })
	return v
}

// NumBlocks is the number of complete (hashed) blocks; 0 once closed.
func (s *Sequence) NumBlocks() int {
	return int(s.getter(func(p *C.kvreg_sequence) uint64 {
		return uint64(C.kvreg_sequence_num_blocks(p))
	}))
}

// TotalTokens counts the tokens of complete blocks plus the partial block; 0 once closed.
func (s *Sequence) TotalTokens() int {
	return int(s.getter(func(p *C.kvreg_sequence) uint64 {
		return uint64(C.kvreg_sequence_total_tokens(p))
	}))
}

// BlockSize is the tokens per block; 0 once closed.
func (s *Sequence) BlockSize() uint32 {
	return uint32(s.getter(func(p *C.kvreg_sequence) uint64 {
		return uint64(C.kvreg_sequence_block_size(p))
	}))
}

// Salt is the sequence's salt; 0 once closed.
func (s *Sequence) Salt() uint64 {
	return s.getter(func(p *C.kvreg_sequence) uint64 {
		return uint64(C.kvreg_sequence_salt(p))
	})
}

// Block returns the hashes of complete block index; ErrRange if index >= NumBlocks().
func (s *Sequence) Block(index int) (info BlockInfo, err error) {
	if index < 0 {
		return info, &Error{Code: int(C.KVREG_ERANGE), Op: "Sequence.Block"}
	}
	err = s.with("Sequence.Block", func(p *C.kvreg_sequence) error {
		var c C.kvreg_block_info
		e := check("kvreg_sequence_block", C.kvreg_sequence_block(p, C.size_t(index), &c))
		if e == nil {
			info = blockInfoFromC(&c)
		}
		return e
	})
	return info, err
}

// Blocks returns the hashes of every complete block, in order.
func (s *Sequence) Blocks() (infos []BlockInfo, err error) {
	err = s.with("Sequence.Blocks", func(p *C.kvreg_sequence) error {
		n := int(C.kvreg_sequence_num_blocks(p))
		infos = make([]BlockInfo, n)
		for i := 0; i < n; i++ {
			var c C.kvreg_block_info
			if e := check("kvreg_sequence_block",
				C.kvreg_sequence_block(p, C.size_t(i), &c)); e != nil {
				return e
			}
			infos[i] = blockInfoFromC(&c)
		}
		return nil
	})
	return infos, err
}

// copyTokens copies a borrowed C token view into Go memory before the lock is dropped,
// since the view dies with the next change to the sequence.
func copyTokens(p *C.uint32_t, n C.size_t) []uint32 {
	out := make([]uint32, int(n))
	if n > 0 {
		copy(out, unsafe.Slice((*uint32)(unsafe.Pointer(p)), int(n)))
	}
	return out
}

// BlockTokens returns a copy of complete block index's tokens; ErrRange past NumBlocks().
func (s *Sequence) BlockTokens(index int) (tokens []uint32, err error) {
	if index < 0 {
		return nil, &Error{Code: int(C.KVREG_ERANGE), Op: "Sequence.BlockTokens"}
	}
	err = s.with("Sequence.BlockTokens", func(p *C.kvreg_sequence) error {
		var t *C.uint32_t
		var n C.size_t
		e := check("kvreg_sequence_block_tokens",
			C.kvreg_sequence_block_tokens(p, C.size_t(index), &t, &n))
		if e == nil {
			tokens = copyTokens(t, n)
		}
		return e
	})
	return tokens, err
}

// PartialTokens returns a copy of the partial (not yet hashed) block's tokens; may be empty.
func (s *Sequence) PartialTokens() (tokens []uint32, err error) {
	err = s.with("Sequence.PartialTokens", func(p *C.kvreg_sequence) error {
		var t *C.uint32_t
		var n C.size_t
		e := check("kvreg_sequence_partial_tokens", C.kvreg_sequence_partial_tokens(p, &t, &n))
		if e == nil {
			tokens = copyTokens(t, n)
		}
		return e
	})
	return tokens, err
}
