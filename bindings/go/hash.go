package kvreg

/*
#include <kvreg.h>
*/
import "C"

import "unsafe"

// PositionUnknown is BlockInfo.Position for blocks described by the registry, which does
// not store positions.
const PositionUnknown = uint32(C.KVREG_POSITION_UNKNOWN)

// BlockInfo holds the hashes of one complete block.
type BlockInfo struct {
	BlockHash          uint64
	SequenceHash       uint64
	ParentSequenceHash uint64 // 0 when !HasParent
	HasParent          bool   // false for the first block of a sequence
	Position           uint32 // block index in its sequence, or PositionUnknown
}

func blockInfoFromC(c *C.kvreg_block_info) BlockInfo {
	return BlockInfo{
		BlockHash:          uint64(c.block_hash),
		SequenceHash:       uint64(c.sequence_hash),
		ParentSequenceHash: uint64(c.parent_sequence_hash),
		HasParent:          c.has_parent != 0,
		Position:           uint32(c.position),
	}
}

// tokensPtr returns a pointer C may read during one call. Passing a Go []uint32 is allowed by
// the cgo rules (its memory holds no Go pointers); an empty slice becomes NULL, which the
// library accepts with a zero count.
func tokensPtr(tokens []uint32) *C.uint32_t {
	if len(tokens) == 0 {
		return nil
	}
	return (*C.uint32_t)(unsafe.Pointer(&tokens[0]))
}

// hashesPtr is tokensPtr for uint64 hash arrays.
func hashesPtr(hashes []uint64) *C.uint64_t {
	if len(hashes) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&hashes[0]))
}

// BlockHash is XXH3-64 of the tokens as u32 little-endian, seeded with salt.
func BlockHash(tokens []uint32, salt uint64) uint64 {
	return uint64(C.kvreg_block_hash(tokensPtr(tokens), C.size_t(len(tokens)), C.uint64_t(salt)))
}

// SequenceHash is the chain step: the sequence hash of a block from its parent's sequence
// hash and its own block hash. (The first block's sequence hash is its block hash.)
func SequenceHash(parentSequenceHash, blockHash, salt uint64) uint64 {
	return uint64(C.kvreg_sequence_hash(C.uint64_t(parentSequenceHash), C.uint64_t(blockHash),
		C.uint64_t(salt)))
}

// HashBlocks hashes every full block of tokens; the trailing len(tokens) % blockSize tokens
// (the partial block) are not hashed. ErrInvalid if blockSize is 0.
func HashBlocks(tokens []uint32, blockSize uint32, salt uint64) ([]BlockInfo, error) {
	if blockSize == 0 {
		// Checked here because the division below would panic before C could say EINVAL.
		return nil, &Error{Code: int(C.KVREG_EINVAL), Op: "HashBlocks"}
	}
	// In uint64: int(blockSize) could overflow on 32-bit platforms.
	n := int(uint64(len(tokens)) / uint64(blockSize))
	out := make([]C.kvreg_block_info, n+1) // +1 so &out[0] exists when n == 0
	var got C.size_t
	status := C.kvreg_hash_blocks(tokensPtr(tokens), C.size_t(len(tokens)), C.uint32_t(blockSize),
		C.uint64_t(salt), &out[0], C.size_t(n), &got)
	if err := check("kvreg_hash_blocks", status); err != nil {
		return nil, err
	}
	infos := make([]BlockInfo, int(got))
	for i := range infos {
		infos[i] = blockInfoFromC(&out[i])
	}
	return infos, nil
}
