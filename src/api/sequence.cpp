// C entry points for kvreg_sequence (a thin shell over kvreg::Sequence).
#include "api/guard.hpp"
#include "api/internal.hpp" // declares sequence_of(), defined here

struct kvreg_sequence {
    kvreg::Sequence seq;
};

extern "C" {

KVREG_API int kvreg_sequence_new(kvreg_sequence **out, uint32_t block_size, uint64_t salt) noexcept {
    if (!out || block_size == 0) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = new kvreg_sequence{kvreg::Sequence(block_size, salt)};
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_sequence_free(kvreg_sequence *seq) noexcept { delete seq; }

KVREG_API int kvreg_sequence_extend(kvreg_sequence *seq, const uint32_t *tokens, size_t n_tokens,
                                    size_t *n_completed) noexcept {
    if (!seq || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    // A size no sequence can hold is one error, decided before a token is read or a byte
    // allocated; KVREG_ENOMEM is left to mean that an allocation that could succeed did not.
    if (!seq->seq.can_grow_by(n_tokens)) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    const size_t done = seq->seq.extend(tokens, n_tokens);
    if (n_completed) *n_completed = done;
    return KVREG_OK;
    KVREG_GUARD_END
}

// kvreg_sequence_extend of one token, on the sequence's division-free path (the decode loop).
KVREG_API int kvreg_sequence_append(kvreg_sequence *seq, uint32_t token, int *completed) noexcept {
    if (!seq) return KVREG_EINVAL;
    if (!seq->seq.can_grow_by(1)) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    const bool done = seq->seq.append(token);
    if (completed) *completed = done ? 1 : 0;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_sequence_truncate(kvreg_sequence *seq, size_t n_tokens) noexcept {
    if (!seq) return KVREG_EINVAL;
    seq->seq.truncate(n_tokens);
    return KVREG_OK;
}

KVREG_API int kvreg_sequence_unwind(kvreg_sequence *seq, size_t n) noexcept {
    if (!seq) return KVREG_EINVAL;
    if (n > seq->seq.total_tokens()) return KVREG_ERANGE;
    seq->seq.truncate(seq->seq.total_tokens() - n);
    return KVREG_OK;
}

KVREG_API int kvreg_sequence_pop(kvreg_sequence *seq, uint32_t *token) noexcept {
    if (!seq || !token) return KVREG_EINVAL;
    return seq->seq.pop(token) ? KVREG_OK : KVREG_ENOENT;
}

KVREG_API int kvreg_sequence_reset(kvreg_sequence *seq) noexcept {
    if (!seq) return KVREG_EINVAL;
    seq->seq.reset();
    return KVREG_OK;
}

KVREG_API size_t kvreg_sequence_num_blocks(const kvreg_sequence *seq) noexcept {
    return seq ? seq->seq.num_blocks() : 0;
}

KVREG_API size_t kvreg_sequence_total_tokens(const kvreg_sequence *seq) noexcept {
    return seq ? seq->seq.total_tokens() : 0;
}

KVREG_API uint32_t kvreg_sequence_block_size(const kvreg_sequence *seq) noexcept {
    return seq ? seq->seq.block_size() : 0;
}

KVREG_API uint64_t kvreg_sequence_salt(const kvreg_sequence *seq) noexcept {
    return seq ? seq->seq.salt() : 0;
}

KVREG_API int kvreg_sequence_block(const kvreg_sequence *seq, size_t index, kvreg_block_info *out) noexcept {
    if (!seq || !out) return KVREG_EINVAL;
    if (index >= seq->seq.num_blocks()) return KVREG_ERANGE;
    *out = seq->seq.block(index);
    return KVREG_OK;
}

KVREG_API int kvreg_sequence_block_tokens(const kvreg_sequence *seq, size_t index,
                                          const uint32_t **tokens, size_t *n_tokens) noexcept {
    if (!seq || !tokens || !n_tokens) return KVREG_EINVAL;
    if (index >= seq->seq.num_blocks()) return KVREG_ERANGE;
    *tokens = seq->seq.block_tokens(index);
    *n_tokens = seq->seq.block_size();
    return KVREG_OK;
}

KVREG_API int kvreg_sequence_partial_tokens(const kvreg_sequence *seq, const uint32_t **tokens,
                                            size_t *n_tokens) noexcept {
    if (!seq || !tokens || !n_tokens) return KVREG_EINVAL;
    *n_tokens = seq->seq.partial_len();
    *tokens = seq->seq.partial_tokens();
    return KVREG_OK;
}

} // extern "C"

// Used by api_pool.cpp to register blocks straight from a sequence.
namespace kvreg {
const Sequence *sequence_of(const kvreg_sequence *s) noexcept { return s ? &s->seq : nullptr; }
} // namespace kvreg
