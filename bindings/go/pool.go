package kvreg

/*
#include <stdlib.h>
#include <kvreg.h>

// Builds the descriptor on the C stack: a Go-allocated kvreg_block_desc would hold a Go
// pointer (tokens) inside Go memory, which the cgo pointer rules forbid passing to C.
static int kvreg_go_register(kvreg_pool *pool, uint64_t sequence_hash, uint64_t block_hash,
                             uint64_t parent_sequence_hash, uint32_t has_parent,
                             uint32_t block_size, const uint32_t *tokens, size_t n_tokens,
                             kvreg_block *out) {
    kvreg_block_desc d;
    d.sequence_hash = sequence_hash;
    d.block_hash = block_hash;
    d.parent_sequence_hash = parent_sequence_hash;
    d.has_parent = has_parent;
    d.block_size = block_size;
    d.tokens = tokens;
    d.n_tokens = n_tokens;
    return kvreg_register(pool, &d, out);
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Block is a handle to one reference on a block held by one pool: a plain value, like the
// C kvreg_block. Every successful Register/Acquire must be paired with one Pool.Release.
// The zero Block is never a valid handle.
type Block struct {
	h uint64
}

// Handle returns the raw kvreg_block value.
func (b Block) Handle() uint64 { return b.h }

// IsZero reports whether b is the zero (KVREG_BLOCK_NONE) handle.
func (b Block) IsZero() bool { return b.h == uint64(C.KVREG_BLOCK_NONE) }

// BlockFromHandle rebuilds a Block from a value returned by Handle.
func BlockFromHandle(h uint64) Block { return Block{h: h} }

// BlockDesc describes one complete block to register (hashes from HashBlocks, a Sequence,
// or computed elsewhere with the same rule; the registry does not re-hash).
type BlockDesc struct {
	SequenceHash       uint64
	BlockHash          uint64
	ParentSequenceHash uint64 // ignored when !HasParent
	HasParent          bool
	// BlockSize, when not 0 and Tokens are given, is checked: fewer tokens is a partial
	// block (ErrState), more is ErrInvalid.
	BlockSize uint32
	Tokens    []uint32 // optional; nil registers by hash only
}

// Desc turns block hashes into a descriptor carrying tokens (which may be nil).
func (i BlockInfo) Desc(tokens []uint32) BlockDesc {
	return BlockDesc{
		SequenceHash:       i.SequenceHash,
		BlockHash:          i.BlockHash,
		ParentSequenceHash: i.ParentSequenceHash,
		HasParent:          i.HasParent,
		Tokens:             tokens,
	}
}

// Pool is one pool (tier) of a Registry. It is safe for concurrent use. A Pool keeps its
// Registry reachable; closing the Registry closes the pool too.
type Pool struct {
	reg *Registry
	// mu is held shared by every call and exclusively by Close: after kvreg_pool_free the
	// library may hand the same slot to a new pool, so the old pointer must never be used.
	mu     sync.RWMutex
	ptr    *C.kvreg_pool // nil once closed
	id     uint32
	name   string
	medium Medium
}

// NewPool creates a GPU pool named name. ErrOverflow beyond MaxPools live pools.
func (r *Registry) NewPool(name string) (*Pool, error) {
	return r.newPool("Registry.NewPool", name, MediumGPU)
}

// NewPoolMedium creates a pool on the given medium (tier), which its events carry.
// ErrInvalid for a medium the library does not know; ErrOverflow as NewPool.
func (r *Registry) NewPoolMedium(name string, medium Medium) (*Pool, error) {
	return r.newPool("Registry.NewPoolMedium", name, medium)
}

func (r *Registry) newPool(op, name string, medium Medium) (*Pool, error) {
	cname, err := cString(op, name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var pool *Pool
	err = r.with(op, func(p *C.kvreg_registry) error {
		var pp *C.kvreg_pool
		if err := check("kvreg_pool_new_medium",
			C.kvreg_pool_new_medium(&pp, p, cname, C.uint32_t(medium))); err != nil {
			return err
		}
		pool = &Pool{reg: r, ptr: pp, id: uint32(C.kvreg_pool_id(pp)),
			name: C.GoString(C.kvreg_pool_name(pp)), medium: Medium(C.kvreg_pool_medium(pp))}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(pool, (*Pool).finalize)
	return pool, nil
}

// Close releases every reference the pool still holds (emitting Remove events for hashes no
// other pool holds) and retires the pool. Idempotent; a no-op once the registry is closed.
func (p *Pool) Close() error {
	p.reg.mu.RLock()
	defer p.reg.mu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptr != nil {
		if p.reg.ptr != nil { // else the registry already freed it
			C.kvreg_pool_free(p.ptr)
		}
		p.ptr = nil
		runtime.SetFinalizer(p, nil)
	}
	runtime.KeepAlive(p)
	return nil
}

// finalize is the leak safety net of a Pool that became garbage without Close. It reports the
// leak and deliberately does not free the pool: kvreg_pool_free would emit Remove events at a
// moment the program did not choose. The pool's references stay in the registry until
// Registry.Close, which frees them without events.
func (p *Pool) finalize() {
	held := 0
	_ = p.with("", func(pp *C.kvreg_pool) error {
		held = int(C.kvreg_pool_size(pp))
		return nil
	})
	reportLeak(Leak{Type: "Pool", Name: p.name, PoolID: p.id, Held: held})
}

// with runs f with the registry and the pool held shared, or returns the closed error.
// Lock order everywhere: registry, pool, sequence.
func (p *Pool) with(op string, f func(pp *C.kvreg_pool) error) error {
	p.reg.mu.RLock()
	defer p.reg.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.reg.ptr == nil || p.ptr == nil {
		return closedErr(op)
	}
	err := f(p.ptr)
	runtime.KeepAlive(p)
	return err
}

// Registry returns the registry the pool belongs to.
func (p *Pool) Registry() *Registry { return p.reg }

// ID is the small integer (1..MaxPools) naming the pool in events. Pool ids are reused after
// Close, so an ID only names a live pool.
func (p *Pool) ID() uint32 { return p.id }

// Name is the name given to NewPool.
func (p *Pool) Name() string { return p.name }

// Medium is the pool's medium (tier), set when it was created and carried in its events.
func (p *Pool) Medium() Medium { return p.medium }

// Size is the number of distinct hashes the pool holds; 0 once closed.
func (p *Pool) Size() int {
	var n int
	_ = p.with("Pool.Size", func(pp *C.kvreg_pool) error {
		n = int(C.kvreg_pool_size(pp))
		return nil
	})
	return n
}

// Register registers one complete block and returns a handle holding one reference.
// ErrExist if the hash is already live in this pool (use Acquire). The first registration
// of a hash in any pool of the registry emits a Register event.
func (p *Pool) Register(d BlockDesc) (b Block, err error) {
	err = p.with("Pool.Register", func(pp *C.kvreg_pool) error {
		var out C.kvreg_block
		e := check("kvreg_register", C.kvreg_go_register(pp, C.uint64_t(d.SequenceHash),
			C.uint64_t(d.BlockHash), C.uint64_t(d.ParentSequenceHash),
			C.uint32_t(boolU64(d.HasParent)), C.uint32_t(d.BlockSize), tokensPtr(d.Tokens),
			C.size_t(len(d.Tokens)), &out))
		b = Block{h: uint64(out)}
		return e
	})
	return b, err
}

// batchResults converts per-item C outputs: blocks[i] is zero where errs[i] is not nil.
func batchResults(op string, out []C.kvreg_block, status []C.int) ([]Block, []error) {
	blocks := make([]Block, len(out))
	errs := make([]error, len(out))
	for i := range out {
		if e := check(op, status[i]); e != nil {
			errs[i] = e
			continue
		}
		blocks[i] = Block{h: uint64(out[i])}
	}
	return blocks, errs
}

// RegisterBatch registers descs in order, with the Register events of the call delivered
// together. blocks[i] and errs[i] are the per-block outcome (as Register would give); err
// is set only when the arguments as a whole were rejected, and then nothing was registered.
func (p *Pool) RegisterBatch(descs []BlockDesc) (blocks []Block, errs []error, err error) {
	if len(descs) == 0 {
		return []Block{}, []error{}, nil
	}
	nTok := 0
	for i := range descs {
		nTok += len(descs[i].Tokens)
	}
	// Descriptors and tokens go to C memory: a descriptor in Go memory may not point to
	// Go memory (cgo rules), and C memory may not hold Go pointers at all.
	cd := (*C.kvreg_block_desc)(C.calloc(C.size_t(len(descs)), C.size_t(unsafe.Sizeof(C.kvreg_block_desc{}))))
	defer C.free(unsafe.Pointer(cd))
	var ct *C.uint32_t
	if nTok > 0 {
		ct = (*C.uint32_t)(C.malloc(C.size_t(nTok) * 4))
		defer C.free(unsafe.Pointer(ct))
	}
	cdescs := unsafe.Slice(cd, len(descs))
	var ctoks []uint32
	if nTok > 0 {
		ctoks = unsafe.Slice((*uint32)(unsafe.Pointer(ct)), nTok)
	}
	off := 0
	for i, d := range descs {
		c := &cdescs[i]
		c.sequence_hash = C.uint64_t(d.SequenceHash)
		c.block_hash = C.uint64_t(d.BlockHash)
		c.parent_sequence_hash = C.uint64_t(d.ParentSequenceHash)
		c.has_parent = C.uint32_t(boolU64(d.HasParent))
		c.block_size = C.uint32_t(d.BlockSize)
		c.n_tokens = C.size_t(len(d.Tokens))
		if len(d.Tokens) > 0 {
			copy(ctoks[off:], d.Tokens)
			c.tokens = (*C.uint32_t)(unsafe.Pointer(&ctoks[off]))
			off += len(d.Tokens)
		}
	}
	out := make([]C.kvreg_block, len(descs))
	status := make([]C.int, len(descs))
	err = p.with("Pool.RegisterBatch", func(pp *C.kvreg_pool) error {
		return check("kvreg_register_batch", C.kvreg_register_batch(pp, cd, C.size_t(len(descs)),
			&out[0], &status[0], nil))
	})
	if err != nil {
		return nil, nil, err
	}
	blocks, errs = batchResults("kvreg_register", out, status)
	return blocks, errs, nil
}

// RegisterSequenceBlock registers complete block index of seq, with its tokens. ErrState for
// the partial block (index == seq.NumBlocks()), ErrRange beyond it.
func (p *Pool) RegisterSequenceBlock(seq *Sequence, index int) (b Block, err error) {
	if index < 0 {
		return b, &Error{Code: int(C.KVREG_ERANGE), Op: "Pool.RegisterSequenceBlock"}
	}
	err = p.with("Pool.RegisterSequenceBlock", func(pp *C.kvreg_pool) error {
		return seq.with("Pool.RegisterSequenceBlock", func(sp *C.kvreg_sequence) error {
			var out C.kvreg_block
			e := check("kvreg_register_sequence_block",
				C.kvreg_register_sequence_block(pp, sp, C.size_t(index), &out))
			b = Block{h: uint64(out)}
			return e
		})
	})
	return b, err
}

// RegisterSequence registers blocks [first, first+count) of seq, as RegisterBatch does.
// err is ErrRange (nothing registered) if the range goes past the complete blocks.
func (p *Pool) RegisterSequence(seq *Sequence, first, count int) (blocks []Block, errs []error, err error) {
	if first < 0 || count < 0 {
		return nil, nil, &Error{Code: int(C.KVREG_ERANGE), Op: "Pool.RegisterSequence"}
	}
	var out []C.kvreg_block
	var status []C.int
	err = p.with("Pool.RegisterSequence", func(pp *C.kvreg_pool) error {
		return seq.with("Pool.RegisterSequence", func(sp *C.kvreg_sequence) error {
			// Size the outputs only for a range that exists, so a wild count cannot make
			// us allocate before the library rejects it.
			if nb := int(C.kvreg_sequence_num_blocks(sp)); first > nb || count > nb-first {
				return &Error{Code: int(C.KVREG_ERANGE), Op: "kvreg_register_sequence"}
			}
			out = make([]C.kvreg_block, count+1) // +1 so &out[0] exists when count == 0
			status = make([]C.int, count+1)
			return check("kvreg_register_sequence", C.kvreg_register_sequence(pp, sp,
				C.size_t(first), C.size_t(count), &out[0], &status[0], nil))
		})
	})
	if err != nil {
		return nil, nil, err
	}
	blocks, errs = batchResults("kvreg_register_sequence", out[:count], status[:count])
	return blocks, errs, nil
}

// Acquire takes another reference on the block registered under sequenceHash in this pool
// and returns the same handle Register gave. ErrNotFound if the pool does not hold it.
func (p *Pool) Acquire(sequenceHash uint64) (b Block, err error) {
	err = p.with("Pool.Acquire", func(pp *C.kvreg_pool) error {
		var out C.kvreg_block
		e := check("kvreg_acquire", C.kvreg_acquire(pp, C.uint64_t(sequenceHash), &out))
		b = Block{h: uint64(out)}
		return e
	})
	return b, err
}

// AcquirePrefix acquires the longest prefix of hashes the pool holds, one reference each.
func (p *Pool) AcquirePrefix(hashes []uint64) (blocks []Block, err error) {
	out := make([]C.kvreg_block, len(hashes)+1)
	var n C.size_t
	err = p.with("Pool.AcquirePrefix", func(pp *C.kvreg_pool) error {
		return check("kvreg_acquire_prefix", C.kvreg_acquire_prefix(pp, hashesPtr(hashes),
			C.size_t(len(hashes)), &out[0], &n))
	})
	if err != nil {
		return nil, err
	}
	blocks = make([]Block, int(n))
	for i := range blocks {
		blocks[i] = Block{h: uint64(out[i])}
	}
	return blocks, nil
}

// Release drops one reference. When the pool's last reference goes the hash leaves the pool;
// when it leaves its last pool a Remove event is emitted. ErrStale for a handle that is not
// live in this pool (released already, another pool's, another registry's).
func (p *Pool) Release(b Block) error {
	return p.with("Pool.Release", func(pp *C.kvreg_pool) error {
		return check("kvreg_release", C.kvreg_release(pp, C.kvreg_block(b.h)))
	})
}

// ReleaseBatch releases blocks in order; errs[i] is the outcome for blocks[i]. err is set
// only when the arguments as a whole were rejected.
func (p *Pool) ReleaseBatch(blocks []Block) (errs []error, err error) {
	if len(blocks) == 0 {
		return []error{}, nil
	}
	in := make([]C.kvreg_block, len(blocks))
	for i, b := range blocks {
		in[i] = C.kvreg_block(b.h)
	}
	status := make([]C.int, len(blocks))
	err = p.with("Pool.ReleaseBatch", func(pp *C.kvreg_pool) error {
		return check("kvreg_release_batch", C.kvreg_release_batch(pp, &in[0],
			C.size_t(len(in)), &status[0], nil))
	})
	if err != nil {
		return nil, err
	}
	errs = make([]error, len(blocks))
	for i := range status {
		errs[i] = check("kvreg_release", status[i])
	}
	return errs, nil
}

// Contains reports whether the pool holds sequenceHash. On error (ErrStale once the pool or
// its registry is closed) found is false and err says why: an error is never a plain "no".
func (p *Pool) Contains(sequenceHash uint64) (found bool, err error) {
	err = p.with("Pool.Contains", func(pp *C.kvreg_pool) error {
		var present C.int
		err := check("kvreg_pool_contains",
			C.kvreg_pool_contains(pp, C.uint64_t(sequenceHash), &present))
		found = err == nil && present != 0
		return err
	})
	return found, err
}

// MatchPrefix returns the length of the longest prefix of hashes the pool holds (it stops at
// the first miss). It takes no references. The same name as Python's Pool.match_prefix and
// Rust's Pool::match_prefix.
func (p *Pool) MatchPrefix(hashes []uint64) (n int, err error) {
	err = p.with("Pool.MatchPrefix", func(pp *C.kvreg_pool) error {
		var m C.size_t
		e := check("kvreg_pool_match", C.kvreg_pool_match(pp, hashesPtr(hashes),
			C.size_t(len(hashes)), &m))
		n = int(m)
		return e
	})
	return n, err
}

// Match is the 0.2 name of MatchPrefix.
//
// Deprecated: use MatchPrefix, the name all the bindings share.
func (p *Pool) Match(hashes []uint64) (n int, err error) { return p.MatchPrefix(hashes) }

// Info returns the hashes of a live handle (Position is PositionUnknown). ErrStale if the
// handle is not live in this pool.
func (p *Pool) Info(b Block) (info BlockInfo, err error) {
	err = p.with("Pool.Info", func(pp *C.kvreg_pool) error {
		var c C.kvreg_block_info
		e := check("kvreg_block_get_info", C.kvreg_block_get_info(pp, C.kvreg_block(b.h), &c))
		if e == nil {
			info = blockInfoFromC(&c)
		}
		return e
	})
	return info, err
}

// Refcount returns the handle's reference count in this pool. ErrStale if not live.
func (p *Pool) Refcount(b Block) (n uint32, err error) {
	err = p.with("Pool.Refcount", func(pp *C.kvreg_pool) error {
		var c C.uint32_t
		e := check("kvreg_block_refcount", C.kvreg_block_refcount(pp, C.kvreg_block(b.h), &c))
		n = uint32(c)
		return e
	})
	return n, err
}

// maxTokens bounds the buffer Tokens grows to, so a broken count can never make it allocate
// without limit.
const maxTokens = 1 << 26

// Tokens returns a copy of the block's stored tokens (registry made with KeepTokens).
// ErrNotFound if none are stored, ErrStale if the handle is not live.
func (p *Pool) Tokens(b Block) (tokens []uint32, err error) {
	buf := make([]uint32, 256)
	for {
		var n C.size_t
		err = p.with("Pool.Tokens", func(pp *C.kvreg_pool) error {
			return check("kvreg_block_tokens", C.kvreg_block_tokens(pp, C.kvreg_block(b.h),
				(*C.uint32_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n))
		})
		if err == nil {
			return buf[:int(n)], nil
		}
		if !isCode(err, C.KVREG_ERANGE) || len(buf) >= maxTokens {
			return nil, err
		}
		// On ERANGE the library still reports the count, so one retry normally suffices;
		// doubling is only the fallback should a count ever not be larger.
		next := 2 * len(buf)
		if int(n) > len(buf) && int(n) <= maxTokens {
			next = int(n)
		}
		buf = make([]uint32, next)
	}
}

func isCode(err error, code C.int) bool {
	e, ok := err.(*Error)
	return ok && e.Code == int(code)
}
