/*
 * libkvreg wire formats: events to and from the bytes engines and routers exchange.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * Encoders turn kvreg_event arrays into payloads other software reads:
 *   KVREG_WIRE_VLLM          vLLM's KVEventBatch (the third ZeroMQ frame), map events: what
 *                            vLLM >= 0.24, Dynamo's ZMQ listener and llm-d's indexer decode;
 *   KVREG_WIRE_VLLM_LEGACY   the same batch with positional (array) events, for consumers pinned
 *                            to older decoders;
 *   KVREG_WIRE_DYNAMO_JSON   Dynamo RouterEvent objects as JSON (a JSON array per payload);
 *   KVREG_WIRE_DYNAMO_MSGPACK the same as MessagePack maps with field names.
 * Decoders do the reverse for a router, tolerantly: every shape vLLM, SGLang and Dynamo have
 * put on the wire (see the per-format notes at kvreg_wire_decoder_new).
 *
 * Bytes handed to a decoder are untrusted: bad input gets KVREG_EPROTO and the byte offset of
 * the problem, never a crash or a read past the buffer.
 *
 * Objects: an encoder or decoder is used by one thread at a time (no internal locking); make
 * one per thread. Everything here returns KVREG_ENOTSUP when the library was built without
 * KVREG_FEATURE_WIRE (see kvreg_features()).
 */
#ifndef KVREG_WIRE_H
#define KVREG_WIRE_H

#include "kvreg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVREG_WIRE_VLLM 1u
#define KVREG_WIRE_VLLM_LEGACY 2u
#define KVREG_WIRE_DYNAMO_JSON 3u
#define KVREG_WIRE_DYNAMO_MSGPACK 4u
#define KVREG_WIRE_SGLANG 5u /* decode only */

/* ------------------------------------------------------------------------------------------ */
/* Encoder                                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_wire_encoder kvreg_wire_encoder;

/* format: KVREG_WIRE_VLLM, _VLLM_LEGACY, _DYNAMO_JSON or _DYNAMO_MSGPACK (else KVREG_EINVAL). */
KVREG_API int kvreg_wire_encoder_new(kvreg_wire_encoder **out, uint32_t format) KVREG_NOEXCEPT;
KVREG_API void kvreg_wire_encoder_free(kvreg_wire_encoder *enc) KVREG_NOEXCEPT; /* NULL-safe */

/* Options (values are uint64_t; KVREG_EINVAL for an unknown option or a value out of range). */
#define KVREG_WIRE_OPT_DP_RANK 1u    /* data-parallel rank written in each batch (default 0,
                                        at most INT32_MAX: vLLM and Dynamo read an i32 / u32) */
#define KVREG_WIRE_OPT_MAX_EVENTS 2u /* most kvreg events in one payload (default 1024, >= 1) */
#define KVREG_WIRE_OPT_WORKER_ID 3u  /* Dynamo RouterEvent.worker_id (default 0) */
/* vLLM formats: the block size every Register must have (its n_tokens), as consumers drop
 * stored events whose block_size differs from theirs (default 0: not checked; each stored
 * event then carries its own blocks' token count). 0 .. 2^32-1. */
#define KVREG_WIRE_OPT_BLOCK_SIZE 4u
/* Dynamo formats: RouterEvent event ids. Dynamo's consumers order RouterEvents by event_id
 * and take a jump (id != the previous one + 1, per worker and DP rank) for a gap, so the ids
 * must be contiguous and unique across live batches and snapshots alike.
 *
 * KVREG_WIRE_OPT_EVENT_IDS (0.6) chooses where they come from:
 *   KVREG_WIRE_EVENT_IDS_CONTIGUOUS (the default since 0.6): every RouterEvent, live or
 *     snapshot, takes the encoder's next event id (KVREG_WIRE_OPT_NEXT_EVENT_ID), which then
 *     goes up by one, across calls: live batch, snapshot, live batch come out as one
 *     contiguous run (as Dynamo's own publisher numbers them: one id per RouterEvent, not per
 *     engine event). Encoding live events again (a call whose first event has the same kvreg
 *     event_id as the previous call's first, e.g. to cut a payload smaller) reuses the ids
 *     that call gave, so a retry leaves no hole; snapshot events encoded again take new ids
 *     (unique; the consumer sees a gap and resyncs).
 *   KVREG_WIRE_EVENT_IDS_KVREG (0.5's behaviour): a RouterEvent carries the kvreg event_id
 *     of its group's first event (groups of several events leave holes), and only snapshot
 *     events (KVREG_EVENT_ID_SNAPSHOT) take the next event id. Choose it when the consumer
 *     maps RouterEvents back to registry event ids.
 * KVREG_WIRE_OPT_NEXT_EVENT_ID: the id the next RouterEvent takes (default 0; read it back
 * with kvreg_wire_encoder_get() to know where the stream is, set it when a worker resumes).
 * KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID is its 0.5 name (the same option). */
#define KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID 5u
#define KVREG_WIRE_OPT_NEXT_EVENT_ID 5u
#define KVREG_WIRE_OPT_EVENT_IDS 6u
#define KVREG_WIRE_EVENT_IDS_CONTIGUOUS 0u
#define KVREG_WIRE_EVENT_IDS_KVREG 1u
KVREG_API int kvreg_wire_encoder_set(kvreg_wire_encoder *enc, uint32_t option,
                                     uint64_t value) KVREG_NOEXCEPT;
/* The current value of an option (KVREG_EINVAL for an unknown option or NULL). (0.5) */
KVREG_API int kvreg_wire_encoder_get(const kvreg_wire_encoder *enc, uint32_t option,
                                     uint64_t *value) KVREG_NOEXCEPT;
/* LoRA adapter name written as lora_name in stored events (NULL: nil, the default). Copied. */
KVREG_API KVREG_DEPRECATED("use kvreg_wire_encoder_set_string with KVREG_WIRE_LORA_NAME") int kvreg_wire_encoder_set_lora_name(kvreg_wire_encoder *enc,
                                               const char *lora_name) KVREG_NOEXCEPT;

/* Encode events[0..n) (in event_id order, as a callback or poll gives them) into one payload.
 * It takes at most KVREG_WIRE_OPT_MAX_EVENTS events; *n_consumed gets how many it took (at
 * least 1 when n > 0): call again with the rest. ts is the batch timestamp in seconds since
 * the Unix epoch; ts < 0 means now (CLOCK_REALTIME). *payload points into the encoder and
 * stays valid until its next call or free. Registers that continue one chain (each one's
 * parent is the previous one's sequence hash, same medium and, for vLLM, same token count)
 * become one stored event; consecutive removes of one medium become one removed event; a
 * Cleared becomes AllBlocksCleared / "cleared".
 * Wire fields from kvreg events: vLLM block_hashes = sequence hashes, parent_block_hash = the
 * first one's parent, token_ids = the events' tokens, block_size = their n_tokens; Dynamo
 * block_hash = sequence hash, tokens_hash = block hash, event_id per KVREG_WIRE_OPT_EVENT_IDS,
 * storage_tier from the medium.
 * Events a format cannot carry are never sent half-right: encoding stops before the first
 * such event (the payload holds the ones before it, *n_consumed says how many) and the next
 * call, starting at it, returns its status with *n_consumed = 0 and no payload:
 *   KVREG_ESTATE  vLLM formats: a Register without tokens (registered by hash only), or with
 *                 n_tokens other than KVREG_WIRE_OPT_BLOCK_SIZE when that is set: vLLM's
 *                 consumers need token_ids of exactly blocks * block_size (the Dynamo formats
 *                 carry no tokens and take such events). Skip the event or use Dynamo.
 *   KVREG_EINVAL  an unknown kind or medium, or n_tokens > 0 with tokens NULL.
 * Also KVREG_EINVAL for NULL enc / n_consumed / payload / payload_len, or events NULL with
 * n > 0; KVREG_ENOMEM (nothing consumed). n == 0 gives a payload with no events. */
KVREG_API int kvreg_wire_encode(kvreg_wire_encoder *enc, const kvreg_event *events, size_t n,
                                double ts, size_t *n_consumed, const uint8_t **payload,
                                size_t *payload_len) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Decoder                                                                                     */
/* ------------------------------------------------------------------------------------------ */
#define KVREG_WIRE_STORED 1u  /* vLLM BlockStored, Dynamo stored */
#define KVREG_WIRE_REMOVED 2u /* vLLM BlockRemoved, Dynamo removed */
#define KVREG_WIRE_CLEARED 3u /* vLLM AllBlocksCleared and TierBlocksCleared, Dynamo cleared:
                                 a TierBlocksCleared (vLLM's tier_scoped_clear_events) clears
                                 only its medium; kvreg_wire_event_ext tells them apart (tag
                                 and medium_form). A consumer that reads only this struct
                                 clears every tier: safe, if more than needed. */

/* Medium of a decoded event whose medium name is not one this library knows (the name is kept
 * in medium_name). Absent or nil medium decodes as KVREG_MEDIUM_GPU, as vLLM's consumers do;
 * medium_name is then NULL, and kvreg_wire_event_ext.medium_form says which it was. */
#define KVREG_MEDIUM_UNKNOWN UINT32_MAX

/* One decoded event (152 bytes on LP64; tests/header pins the layout). Pointers are borrowed
 * from the decoder and valid until its next kvreg_wire_decode() or free. */
typedef struct kvreg_wire_event {
    uint32_t type;                 /* KVREG_WIRE_* */
    uint32_t medium;               /* KVREG_MEDIUM_* or KVREG_MEDIUM_UNKNOWN */
    const uint64_t *block_hashes;  /* the engine's hashes, bytes hashes as their last 8 bytes
                                      big-endian, signed ones bit-cast to u64 */
    size_t n_block_hashes;
    uint64_t parent_block_hash;    /* 0 when has_parent == 0 */
    uint32_t has_parent;
    uint32_t block_size;           /* 0 when absent */
    const uint32_t *token_ids;
    size_t n_token_ids;
    const char *medium_name;       /* as on the wire, NUL-terminated; NULL when absent or nil */
    const char *lora_name;         /* NULL when absent or nil */
    int64_t group_idx;             /* valid when has_group_idx */
    uint32_t has_group_idx;
    uint32_t has_dp_rank;
    int64_t dp_rank;               /* of the batch; valid when has_dp_rank */
    double ts;                     /* of the batch (vLLM / SGLang formats; 0 for Dynamo) */
    uint64_t worker_id;            /* Dynamo formats; 0 otherwise */
    uint64_t event_id;             /* Dynamo formats; 0 otherwise */
    const uint64_t *tokens_hashes; /* Dynamo stored: each block's tokens_hash (our block_hash),
                                      n_block_hashes of them; NULL otherwise */
    uint64_t reserved[3];          /* zero */
} kvreg_wire_event;

typedef struct kvreg_wire_decoder kvreg_wire_decoder;

/* format KVREG_WIRE_VLLM (also reads SGLang and legacy positional payloads; _VLLM_LEGACY is
 * the same decoder), KVREG_WIRE_SGLANG (the same decoder too: SGLang's positional layouts are
 * prefixes of vLLM's, and its metadata map where vLLM has lora_name is told apart by type),
 * KVREG_WIRE_DYNAMO_JSON or KVREG_WIRE_DYNAMO_MSGPACK (an array of RouterEvents, or one).
 *
 * A map in which a key the decoder reads appears twice is rejected (KVREG_EPROTO, the offset
 * of the second occurrence), as serde's and msgspec's typed decoders do; repeated keys it does
 * not read are skipped with their values.
 *
 * What the vLLM decoder accepts: the batch as an array of 2 or more elements [ts, events,
 * dp_rank, ...] (extra ones ignored; ts an int or float; dp_rank an int or nil) or as a map
 * with "ts", "events" and "data_parallel_rank" / "dp_rank" / "attn_dp_rank"; events as maps
 * (keys in any order, unknown keys ignored) or positional arrays of any length (vLLM's
 * 5..11-field generations, SGLang's 7 fields and its metadata map at position 7); hashes as
 * unsigned or signed ints (bit-cast) or bytes (their last 8 bytes, big-endian). Events of
 * another type ("BlockInactive", "Ignored", Dynamo variants we do not know) are skipped and
 * counted (KVREG_WIRE_STAT_SKIPPED). A known field with a value of the wrong type, a
 * truncated payload or bytes after its end reject the payload. The decoder does not check
 * len(token_ids) == len(block_hashes) * block_size (a router decides what to do with it). */
KVREG_API int kvreg_wire_decoder_new(kvreg_wire_decoder **out, uint32_t format) KVREG_NOEXCEPT;
KVREG_API void kvreg_wire_decoder_free(kvreg_wire_decoder *dec) KVREG_NOEXCEPT; /* NULL-safe */

/* Decode one payload. On KVREG_OK *events / *n_events give the batch's events in order (events
 * of unknown types are skipped and counted, not fatal; *events is NULL when there are none).
 * On KVREG_EPROTO nothing is returned and *error_offset (may be NULL) gets the byte offset of
 * the problem (<= len: for a payload that ends too early, where the unfinished value starts, or
 * len when it ends between values); kvreg_wire_decoder_error()
 * describes it. KVREG_EINVAL: dec, events or n_events NULL, or payload NULL with len > 0.
 * KVREG_ENOMEM: the decoder's buffers could not grow (the payload is not judged). */
KVREG_API int kvreg_wire_decode(kvreg_wire_decoder *dec, const void *payload, size_t len,
                                const kvreg_wire_event **events, size_t *n_events,
                                size_t *error_offset) KVREG_NOEXCEPT;
/* Why the last kvreg_wire_decode() failed ("" after a success). Borrowed, valid until the next
 * call on dec. */
KVREG_API const char *kvreg_wire_decoder_error(const kvreg_wire_decoder *dec) KVREG_NOEXCEPT;

#define KVREG_WIRE_STAT_BATCHES 1u        /* payloads decoded */
#define KVREG_WIRE_STAT_REJECTED 2u       /* payloads rejected (KVREG_EPROTO) */
#define KVREG_WIRE_STAT_EVENTS 3u         /* events returned */
#define KVREG_WIRE_STAT_SKIPPED 4u        /* events of unknown type skipped */
KVREG_API int kvreg_wire_decoder_stat(const kvreg_wire_decoder *dec, uint32_t stat,
                                      uint64_t *value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Decoder limits (0.5)                                                                        */
/* ------------------------------------------------------------------------------------------ */
/* Payload bytes are untrusted, so every decoder is bounded in memory and work by its input:
 *
 *   what                       default      option                        past it
 *   payload size               16 MiB       KVREG_WIRE_DEC_OPT_MAX_PAYLOAD  KVREG_EPROTO at
 *                                           (1 .. 2^32-1)                 offset = the limit,
 *                                                                         before any byte is read
 *   nesting of arrays / maps   32 levels    KVREG_WIRE_DEC_OPT_MAX_DEPTH    KVREG_EPROTO at the
 *                                           (1 .. 64)                     container past it
 *   events in one payload      65,536       KVREG_WIRE_DEC_OPT_MAX_EVENTS   KVREG_EPROTO at the
 *                                           (>= 1)                        event past it
 *   elements of an array / map,  the bytes left   (not an option)           KVREG_EPROTO at
 *   length of a string / bytes   after its head                             its head
 *
 * Counts and lengths are compared with the bytes that remain before anything is sized by them
 * (every element takes at least one byte); buffers are sized by what those bytes can hold at
 * an element's smallest encoding, grow by half at most, and hold only what was read but for
 * the events array (152 bytes per 14 payload bytes, even when its count lies); the Dynamo
 * decoders read the payload in place (no parse tree). So the memory one decode uses, the
 * decoder's buffers included, is at most KVREG_WIRE_DECODE_MEMORY_FACTOR bytes per payload
 * byte plus KVREG_WIRE_DECODE_MEMORY_BASE whatever the payload claims and whatever the limits
 * above (tests/wire/wire_memory.cpp measures the worst shapes: one-byte hashes, the smallest
 * events, nested headers, counts that lie; the worst peaks at 27 bytes per payload byte).
 * Work is linear in the payload size. Rejected payloads count in KVREG_WIRE_STAT_REJECTED;
 * nothing of them is returned. docs/limits.md has the same table. */
#define KVREG_WIRE_DEC_OPT_MAX_PAYLOAD 1u
#define KVREG_WIRE_DEC_OPT_MAX_DEPTH 2u
#define KVREG_WIRE_DEC_OPT_MAX_EVENTS 3u
#define KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD (16u * 1024u * 1024u)
#define KVREG_WIRE_DEC_DEFAULT_MAX_DEPTH 32u
#define KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS 65536u
#define KVREG_WIRE_DECODE_MEMORY_FACTOR 32u
#define KVREG_WIRE_DECODE_MEMORY_BASE (64u * 1024u)
/* KVREG_EINVAL for an unknown option or a value out of its range. */
KVREG_API int kvreg_wire_decoder_set(kvreg_wire_decoder *dec, uint32_t option,
                                     uint64_t value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Decoded fields beyond kvreg_wire_event (0.5)                                                */
/* ------------------------------------------------------------------------------------------ */
/* kvreg_wire_event's layout is fixed (ABI); what later formats carry comes through this
 * size-versioned struct instead: set struct_size = sizeof(kvreg_wire_event_ext) and call
 * kvreg_wire_decoder_event_ext(); the library fills the fields it knows that fit in
 * struct_size (fields are only ever appended, so a program built against an older header gets
 * the prefix it knows, and a newer program learns from the returned struct_size what an older
 * library filled). */
#define KVREG_WIRE_FIELD_ABSENT 0u /* not in the payload (map key missing, position past end) */
#define KVREG_WIRE_FIELD_NIL 1u    /* present as nil / null */
#define KVREG_WIRE_FIELD_SET 2u    /* present with a value */

#define KVREG_WIRE_SHAPE_MAP 1u   /* a tagged map event (vLLM >= 0.24, SGLang after #37482) */
#define KVREG_WIRE_SHAPE_ARRAY 2u /* a positional event ["Tag", field, ...] */
#define KVREG_WIRE_SHAPE_DYNAMO 3u /* a Dynamo RouterEvent */

/* One multimodal object of a Dynamo stored block's mm_extra_info (BlockMmObjectInfo). (0.6) */
typedef struct kvreg_wire_mm_object {
    uint64_t mm_hash;
    uint32_t block;        /* index of its block in the event (block_hashes[block]) */
    uint32_t n_offsets;    /* its (start, end) pairs, relative to the block's first token */
    size_t first_offset;   /* its first pair: kvreg_wire_event_ext.mm_offsets[2 * first_offset] */
} kvreg_wire_mm_object;

/* 248 bytes on LP64 (tests/header pins it; 168 up to reserved32, the 0.5 layout); later
 * fields go at the end. */
typedef struct kvreg_wire_event_ext {
    uint32_t struct_size;     /* in: sizeof the caller's struct; out: bytes filled */
    uint32_t shape;           /* KVREG_WIRE_SHAPE_* */
    const char *tag;          /* the event's type name as on the wire: "BlockStored",
                                 "BlockStoredWithMetadata", "TierBlocksCleared", "cleared", ... */
    uint32_t n_fields;        /* vLLM / SGLang: positional length (tag included) or map keys */
    uint32_t medium_form;     /* KVREG_WIRE_FIELD_*: kvreg_wire_event.medium is GPU both when
                                 absent and when GPU; this tells them apart */
    uint32_t lora_name_form;
    uint32_t lora_id_form;
    int64_t lora_id;          /* when lora_id_form == SET */
    uint32_t token_pairs;     /* 1: token_ids were EAGLE bigram pairs [[a, b], ...]: they are
                                 in pair_token_ids (2 per pair) and kvreg_wire_event.token_ids is
                                 NULL with n_token_ids 0; 0: plain token ids */
    uint32_t group_idx_form;
    const uint32_t *pair_token_ids;
    size_t n_pair_token_ids;  /* 2 * pairs */
    const char *cache_salt;   /* SGLang's cache_salt (top-level key, or its position-7 metadata
                                 map); NULL when absent or nil */
    uint32_t cache_salt_form;
    uint32_t kv_cache_spec_kind_form;
    const char *kv_cache_spec_kind; /* "full_attention", "sliding_window", ... (hybrid models) */
    uint32_t sliding_window_form;
    uint32_t extra_keys_form;
    int64_t kv_cache_spec_sliding_window;
    const uint8_t *extra_keys; /* extra_keys as on the wire: the MessagePack bytes of its value
                                  (a list of per-block tuples / nils; mixed types, so not
                                  decoded further); NULL when absent */
    size_t extra_keys_len;
    /* vLLM >= 0.26 strings (str | None each): locality ("LOCAL" / "REMOTE"), ownership (a
     * secondary tier's id), session_id (also SGLang's); NULL when absent or nil. */
    const char *locality;
    const char *ownership;
    const char *session_id;
    uint32_t locality_form;
    uint32_t ownership_form;
    uint32_t session_id_form;
    uint32_t block_size_form;
    uint32_t parent_form;     /* parent_block_hash: absent, nil, or set (has_parent) */
    uint32_t reserved32;      /* zero */
    /* ---- 0.6: Dynamo RouterEvent fields (KVREG_WIRE_SHAPE_DYNAMO; absent / NULL / 0 for
     * the other shapes). A caller built against the 0.5 header (struct_size 168) gets the
     * fields above only. 248 bytes on LP64. */
    uint32_t start_position_form; /* stored.start_position (Option<u32>): absent, null, set */
    uint32_t start_position;      /* when start_position_form == SET */
    /* stored: one KVREG_WIRE_FIELD_* per block (n_block_hashes of them): whether that block's
     * mm_extra_info was absent, null or an object; NULL for other events. */
    const uint8_t *mm_extra_info_forms;
    /* The multimodal objects of every block whose mm_extra_info is set, in wire order (block
     * by block): {mm_hash, block, n_offsets, first_offset}; their (start, end) token offsets
     * are mm_offsets[2 * first_offset .. 2 * (first_offset + n_offsets)). */
    const struct kvreg_wire_mm_object *mm_objects;
    size_t n_mm_objects;
    const uint64_t *mm_offsets;
    size_t n_mm_offsets;          /* 2 * pairs */
    /* residency_domain: "worker", "cache_owner" or another string, as on the wire (SET); NIL
     * for null or a value of another type (Dynamo reads both as invalid); ABSENT: legacy. */
    const char *residency_domain;
    uint32_t residency_domain_form;
    uint32_t state_source_form;   /* state_source (Option<CacheOwnerId>): absent, null, set */
    /* state_source's value as on the wire (its MessagePack bytes, or its JSON text): a
     * nested owner id this library does not interpret; NULL unless SET. */
    const uint8_t *state_source;
    size_t state_source_len;
} kvreg_wire_event_ext;

/* Fills *ext for event `index` of the last successful kvreg_wire_decode() on dec (pointers
 * borrowed like kvreg_wire_event's). KVREG_EINVAL: NULL, or struct_size smaller than the
 * first two fields; KVREG_ERANGE: index past the batch. */
KVREG_API int kvreg_wire_decoder_event_ext(const kvreg_wire_decoder *dec, size_t index,
                                           kvreg_wire_event_ext *ext) KVREG_NOEXCEPT;

/* Encode the last payload dec decoded (successfully) again, from what it decoded, the way the
 * upstream encoder that produced it writes it (msgspec's rules for vLLM and SGLang: the outer
 * batch and positional events as arrays of the same length, map events with the same keys in
 * the same order, every integer in its smallest form, floats as float64, None as nil): for a
 * payload an upstream encoder wrote, the bytes are identical to the input. Bytes hashes are
 * kept as they came (the u64 the struct holds is their last 8 bytes).
 * Dynamo formats (0.6): serde's rules as Dynamo configures them (rmp_serde::to_vec_named: maps
 * with field names in declaration order; serde_json compact for JSON; externally tagged
 * variants, "cleared" bare; every integer in its smallest form; null / nil for None). The keys
 * that were on the wire are written, so that what each Dynamo release wrote (with or without
 * storage_tier, residency_domain, start_position, mm_extra_info, state_source) comes back
 * byte for byte; state_source comes back as the bytes it came as (in JSON, whitespace inside
 * it included); an array of RouterEvents stays an array, a single one stays single. Input no
 * Dynamo release writes (keys in another order, JSON whitespace outside state_source, \u
 * escapes, {"cleared": null}) comes back in the form Dynamo writes.
 * *payload points into dec and stays valid until its next call or free.
 * KVREG_ESTATE: nothing decoded yet, the last decode failed, or the payload held something the
 * decoder does not keep (a key it does not read, an event of an unknown type, a value of
 * another type in a position it recognises by type; for Dynamo also a residency_domain that
 * is not a string or null, a null or a negative integer where Dynamo writes an unsigned one,
 * a "cleared" with a body, a string holding a NUL; for vLLM an event whose hashes mix
 * negative integers and unsigned ones of 2^63 or more): re-encoding would lose or change it.
 * (Until 0.6's last change the Dynamo and vLLM cases after "or null" re-encoded into other
 * values with KVREG_OK.) A JSON \u escape of a surrogate pair decodes to one code point (4
 * bytes of UTF-8); a lone surrogate is KVREG_EPROTO, as in serde_json.
 * KVREG_EINVAL: NULL arguments. KVREG_ENOMEM. (0.5; Dynamo formats since 0.6, which returned
 * KVREG_ENOTSUP for them) */
KVREG_API int kvreg_wire_decoder_reencode(kvreg_wire_decoder *dec, const uint8_t **payload,
                                          size_t *payload_len) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* One configuration pattern (0.6; kvreg.h and docs/config.md)                                 */
/* ------------------------------------------------------------------------------------------ */
/* Encoder string options. KVREG_WIRE_LORA_NAME: the LoRA adapter name written as lora_name in
 * stored events (value NULL: nil, the default); copied. KVREG_EINVAL if it is not UTF-8 (it is
 * written as a msgpack str, which consumers decode as UTF-8). _get_string: KVREG_ENOENT while
 * nil. */
#define KVREG_WIRE_LORA_NAME 1u
KVREG_API int kvreg_wire_encoder_set_string(kvreg_wire_encoder *enc, uint32_t option,
                                            const char *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_wire_encoder_get_string(const kvreg_wire_encoder *enc, uint32_t option,
                                            char *buf, size_t cap, size_t *len) KVREG_NOEXCEPT;
/* The current value of a decoder option (KVREG_WIRE_DEC_OPT_*). */
KVREG_API int kvreg_wire_decoder_get(const kvreg_wire_decoder *dec, uint32_t option,
                                     uint64_t *value) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_WIRE_H */
