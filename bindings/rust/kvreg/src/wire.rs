//! Wire formats (include/kvreg_wire.h): [`Event`]s to the payloads engines and routers exchange
//! (vLLM KVEventBatch, Dynamo RouterEvent), and payloads back to [`WireEvent`]s.
//!
//! ```no_run
//! use kvreg::wire::{Decoder, Encoder, Format};
//! # fn send(_: &[u8]) {}
//! # fn demo(registry: &kvreg::Registry) -> Result<(), Box<dyn std::error::Error>> {
//! let mut enc = Encoder::new(Format::Vllm)?;
//! enc.set_block_size(16)?;
//! for payload in enc.encode(&registry.poll()?, None)? {
//!     send(&payload); // one ZeroMQ frame each
//! }
//! let mut dec = Decoder::new(Format::Vllm)?;
//! # let payload: Vec<u8> = Vec::new();
//! for ev in dec.decode(&payload)? {
//!     println!("{:?} {:x?}", ev.kind, ev.block_hashes);
//! }
//! # Ok(()) }
//! ```
//!
//! An `Encoder` or `Decoder` is `Send` but not `Sync`: the library wants one thread at a time,
//! and `encode` / `decode` take `&mut self`. Each frees its C object when dropped. A library
//! built without the wire feature makes `new` fail with `ErrorKind::NotSupported`.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};
use std::slice;

use kvreg_sys as ffi;

use crate::error::{check, Error, ErrorKind, Result};
use crate::event::{Event, Medium};

/// An encoding of events on the wire.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum Format {
    /// vLLM KVEventBatch with map events (vLLM >= 0.24, Dynamo, llm-d); its decoder also
    /// reads SGLang and legacy positional payloads.
    Vllm,
    /// The same batch with positional (array) events.
    VllmLegacy,
    /// Dynamo RouterEvent objects as a JSON array.
    DynamoJson,
    /// The same as MessagePack maps.
    DynamoMsgpack,
    /// SGLang's layouts (decode only).
    Sglang,
}

impl Format {
    fn raw(self) -> u32 {
        match self {
            Format::Vllm => ffi::KVREG_WIRE_VLLM,
            Format::VllmLegacy => ffi::KVREG_WIRE_VLLM_LEGACY,
            Format::DynamoJson => ffi::KVREG_WIRE_DYNAMO_JSON,
            Format::DynamoMsgpack => ffi::KVREG_WIRE_DYNAMO_MSGPACK,
            Format::Sglang => ffi::KVREG_WIRE_SGLANG,
        }
    }
}

/// Where a Dynamo encoder's RouterEvent ids come from (`KVREG_WIRE_OPT_EVENT_IDS`).
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash, Default)]
pub enum EventIds {
    /// Every RouterEvent, live or snapshot, takes the encoder's next id (the default).
    #[default]
    Contiguous,
    /// The kvreg event_id of each group's first event; only snapshot events are numbered.
    Kvreg,
}

/// A decoder limit (`KVREG_WIRE_DEC_OPT_*`).
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum DecoderLimit {
    /// Largest payload in bytes (1 ..= 2^32-1; default 16 MiB).
    MaxPayload,
    /// Deepest nesting of arrays / maps (1 ..= 64; default 32).
    MaxDepth,
    /// Most events in one payload (>= 1; default 65,536).
    MaxEvents,
}

/// A field that a payload may leave out, write as nil / null, or set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Field<T> {
    #[default]
    Absent,
    Nil,
    Set(T),
}

impl<T> Field<T> {
    fn from_form(form: u32, value: impl FnOnce() -> Option<T>) -> Field<T> {
        match form {
            ffi::KVREG_WIRE_FIELD_SET => value().map_or(Field::Nil, Field::Set),
            ffi::KVREG_WIRE_FIELD_NIL => Field::Nil,
            _ => Field::Absent,
        }
    }

    /// The value when set.
    pub fn value(&self) -> Option<&T> {
        match self {
            Field::Set(v) => Some(v),
            _ => None,
        }
    }
}

/// One multimodal object of a Dynamo stored block (its mm_extra_info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmObject {
    /// Index of its block in the event.
    pub block: u32,
    pub mm_hash: u64,
    /// (start, end) token offsets within the block.
    pub offsets: Vec<(u64, u64)>,
}

/// What a decoded event carries beyond [`WireEvent`] (`kvreg_wire_event_ext`), copied out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WireEventExt {
    /// The type name as on the wire ("BlockStored", "TierBlocksCleared", "stored", ...).
    pub tag: Option<String>,
    /// `KVREG_WIRE_SHAPE_*`: 1 map, 2 positional array, 3 Dynamo RouterEvent.
    pub shape: u32,
    pub medium: Field<()>,
    pub lora_id: Field<i64>,
    /// EAGLE bigram token ids, when the payload had pairs.
    pub token_pairs: Option<Vec<(u32, u32)>>,
    pub cache_salt: Field<String>,
    pub kv_cache_spec_kind: Field<String>,
    pub kv_cache_spec_sliding_window: Field<i64>,
    /// extra_keys as its MessagePack bytes.
    pub extra_keys: Field<Vec<u8>>,
    pub locality: Field<String>,
    pub ownership: Field<String>,
    pub session_id: Field<String>,
    /// Dynamo (0.6): stored.start_position.
    pub start_position: Field<u32>,
    /// Dynamo (0.6): the objects of every block whose mm_extra_info is set.
    pub mm_objects: Vec<MmObject>,
    /// Dynamo (0.6): residency_domain (Nil also for a value of another type).
    pub residency_domain: Field<String>,
    /// Dynamo (0.6): state_source's bytes as on the wire (msgpack bytes or JSON text).
    pub state_source: Field<Vec<u8>>,
}

/// Turns kvreg events into payloads. See the module docs.
pub struct Encoder {
    raw: NonNull<ffi::kvreg_wire_encoder>,
}

// SAFETY: the C encoder may be used from any thread, one at a time; &mut self ensures that.
unsafe impl Send for Encoder {}

impl Encoder {
    /// An encoder for `Vllm`, `VllmLegacy`, `DynamoJson` or `DynamoMsgpack` (`Sglang` is
    /// `InvalidArgument`). `NotSupported` when the library was built without the wire feature.
    pub fn new(format: Format) -> Result<Encoder> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe { ffi::kvreg_wire_encoder_new(&mut raw, format.raw()) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(Encoder { raw })
    }

    fn set(&mut self, option: u32, value: u64) -> Result<()> {
        // SAFETY: live encoder, used by this thread only (&mut self).
        check(unsafe { ffi::kvreg_wire_encoder_set(self.raw.as_ptr(), option, value) }).map(drop)
    }

    /// Data-parallel rank written in each batch (default 0; at most i32::MAX).
    pub fn set_dp_rank(&mut self, rank: u64) -> Result<()> {
        self.set(ffi::KVREG_WIRE_OPT_DP_RANK, rank)
    }

    /// Most kvreg events in one payload (default 1024, at least 1).
    pub fn set_max_events(&mut self, n: u64) -> Result<()> {
        self.set(ffi::KVREG_WIRE_OPT_MAX_EVENTS, n)
    }

    /// Dynamo RouterEvent.worker_id (default 0).
    pub fn set_worker_id(&mut self, id: u64) -> Result<()> {
        self.set(ffi::KVREG_WIRE_OPT_WORKER_ID, id)
    }

    /// vLLM formats: the token count every Register must have (vLLM's consumers drop stored
    /// events of another block size). 0, the default, does not check.
    pub fn set_block_size(&mut self, tokens: u64) -> Result<()> {
        self.set(ffi::KVREG_WIRE_OPT_BLOCK_SIZE, tokens)
    }

    fn get(&self, option: u32) -> Result<u64> {
        let mut v: u64 = 0;
        // SAFETY: live encoder, valid out pointer; reading an option changes nothing.
        check(unsafe { ffi::kvreg_wire_encoder_get(self.raw.as_ptr(), option, &mut v) })?;
        Ok(v)
    }

    /// Dynamo formats: where RouterEvent event ids come from (`EventIds::Contiguous`, the
    /// default: the encoder numbers every RouterEvent, live and snapshot, so that Dynamo's
    /// consumers see one contiguous run; `EventIds::Kvreg`: 0.5's ids).
    pub fn set_event_ids(&mut self, ids: EventIds) -> Result<()> {
        let v = match ids {
            EventIds::Contiguous => ffi::KVREG_WIRE_EVENT_IDS_CONTIGUOUS,
            EventIds::Kvreg => ffi::KVREG_WIRE_EVENT_IDS_KVREG,
        };
        self.set(ffi::KVREG_WIRE_OPT_EVENT_IDS, v)
    }

    /// The id the next Dynamo RouterEvent takes (`KVREG_WIRE_OPT_NEXT_EVENT_ID`).
    pub fn next_event_id(&self) -> Result<u64> {
        self.get(ffi::KVREG_WIRE_OPT_NEXT_EVENT_ID)
    }

    /// Sets the id the next Dynamo RouterEvent takes (e.g. a worker resuming its stream).
    pub fn set_next_event_id(&mut self, id: u64) -> Result<()> {
        self.set(ffi::KVREG_WIRE_OPT_NEXT_EVENT_ID, id)
    }

    /// LoRA adapter name written as lora_name in stored events (None: nil, the default).
    /// A name containing NUL is `InvalidArgument`.
    pub fn set_lora_name(&mut self, name: Option<&str>) -> Result<()> {
        let name = match name {
            Some(n) => Some(CString::new(n).map_err(|_| Error::from_code(ffi::KVREG_EINVAL))?),
            None => None,
        };
        let p = name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
        // SAFETY: live encoder; the name is copied by the library.
        check(unsafe { ffi::kvreg_wire_encoder_set_lora_name(self.raw.as_ptr(), p) }).map(drop)
    }

    /// Encodes `events` (in event_id order, as `poll` or a `Snapshot` gives them) into as many
    /// payloads as `max_events` needs; none for no events. `ts` is the batch timestamp in
    /// seconds since the Unix epoch (None: now).
    ///
    /// An event the format cannot carry is never sent half-right: `InvalidState` for a vLLM
    /// Register without tokens (or of another block size than `set_block_size`),
    /// `InvalidArgument` for an unknown kind or medium. The [`EncodeError`] then holds the
    /// payloads encoded before that event (complete, to send) and its index.
    pub fn encode(&mut self, events: &[Event], ts: Option<f64>) -> std::result::Result<Vec<Vec<u8>>, EncodeError> {
        let mut payloads = Vec::new();
        if events.is_empty() {
            return Ok(payloads);
        }
        // The C records point into `events`' token vectors, which outlive this call.
        let raw: Vec<ffi::kvreg_event> = events.iter().map(to_raw).collect();
        let ts = ts.unwrap_or(-1.0);
        let mut done = 0;
        while done < raw.len() {
            let mut consumed: usize = 0;
            let mut data: *const u8 = ptr::null();
            let mut len: usize = 0;
            // SAFETY: live encoder (&mut self); raw[done..] are valid records whose token
            // pointers stay valid for the call; valid out pointers.
            let status = unsafe {
                ffi::kvreg_wire_encode(
                    self.raw.as_ptr(),
                    raw[done..].as_ptr(),
                    raw.len() - done,
                    ts,
                    &mut consumed,
                    &mut data,
                    &mut len,
                )
            };
            if let Err(error) = check(status) {
                return Err(EncodeError { error, index: done, payloads });
            }
            // SAFETY: the payload stays valid until the encoder's next call: copied now.
            payloads.push(if len == 0 { Vec::new() } else { unsafe { slice::from_raw_parts(data, len) }.to_vec() });
            done += consumed.max(1);
        }
        Ok(payloads)
    }
}

fn to_raw(ev: &Event) -> ffi::kvreg_event {
    ffi::kvreg_event {
        kind: ev.kind.raw(),
        pool_id: ev.pool_id,
        event_id: ev.event_id,
        sequence_hash: ev.sequence_hash,
        block_hash: ev.block_hash,
        parent_sequence_hash: ev.parent_sequence_hash.unwrap_or(0),
        has_parent: u32::from(ev.parent_sequence_hash.is_some()),
        // More than u32::MAX tokens cannot come from the library; saturate rather than wrap
        // (the encoder then reads fewer tokens than the Vec has, never more).
        n_tokens: ev.tokens.len().min(u32::MAX as usize) as u32,
        tokens: if ev.tokens.is_empty() { ptr::null() } else { ev.tokens.as_ptr() },
        medium: ev.medium.raw(),
        reserved32: 0,
        reserved: [0; 3],
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: owned encoder, freed once.
        unsafe { ffi::kvreg_wire_encoder_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Encoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Encoder")
    }
}

/// An `Encoder::encode` that stopped at an event its format cannot carry.
#[derive(Debug, Clone)]
pub struct EncodeError {
    /// The library's status for that event.
    pub error: Error,
    /// Its position in the events given to `encode`.
    pub index: usize,
    /// The payloads of the events before it: complete, send them.
    pub payloads: Vec<Vec<u8>>,
}

impl EncodeError {
    pub fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (event {})", self.error, self.index)
    }
}

impl std::error::Error for EncodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Error {
        e.error
    }
}

/// What kind of decoded event.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum WireEventKind {
    /// vLLM BlockStored, Dynamo stored.
    Stored,
    /// vLLM BlockRemoved, Dynamo removed.
    Removed,
    /// vLLM AllBlocksCleared, Dynamo cleared.
    Cleared,
    /// A type added by a newer library.
    Other(u32),
}

/// One decoded event, copied out of the decoder: it owns everything.
#[derive(Debug, Clone, PartialEq)]
pub struct WireEvent {
    pub kind: WireEventKind,
    /// The engine's hashes (bytes hashes as their last 8 bytes big-endian, signed ones
    /// bit-cast).
    pub block_hashes: Vec<u64>,
    pub parent_block_hash: Option<u64>,
    /// 0 when absent.
    pub block_size: u32,
    pub token_ids: Vec<u32>,
    /// `Medium::Other(KVREG_MEDIUM_UNKNOWN)` when `medium_name` is not one the library knows.
    pub medium: Medium,
    /// As on the wire; None when absent or nil.
    pub medium_name: Option<String>,
    pub lora_name: Option<String>,
    pub group_idx: Option<i64>,
    /// Of the batch.
    pub dp_rank: Option<i64>,
    /// Of the batch (vLLM / SGLang formats; 0 for Dynamo).
    pub ts: f64,
    /// Dynamo formats; 0 otherwise.
    pub worker_id: u64,
    /// Dynamo formats; 0 otherwise.
    pub event_id: u64,
    /// Dynamo stored events: each block's tokens_hash; empty otherwise.
    pub tokens_hashes: Vec<u64>,
}

/// # Safety
/// `p` is NULL or points to `n` readable values.
unsafe fn copy<T: Copy>(p: *const T, n: usize) -> Vec<T> {
    if p.is_null() || n == 0 {
        Vec::new()
    } else {
        slice::from_raw_parts(p, n).to_vec()
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

impl WireEvent {
    /// # Safety
    /// The record's pointers are valid (the decoder has not been called again).
    unsafe fn from_raw(c: &ffi::kvreg_wire_event) -> WireEvent {
        WireEvent {
            kind: match c.type_ {
                ffi::KVREG_WIRE_STORED => WireEventKind::Stored,
                ffi::KVREG_WIRE_REMOVED => WireEventKind::Removed,
                ffi::KVREG_WIRE_CLEARED => WireEventKind::Cleared,
                other => WireEventKind::Other(other),
            },
            block_hashes: copy(c.block_hashes, c.n_block_hashes),
            parent_block_hash: if c.has_parent != 0 { Some(c.parent_block_hash) } else { None },
            block_size: c.block_size,
            token_ids: copy(c.token_ids, c.n_token_ids),
            medium: Medium::from_raw(c.medium),
            medium_name: text(c.medium_name),
            lora_name: text(c.lora_name),
            group_idx: if c.has_group_idx != 0 { Some(c.group_idx) } else { None },
            dp_rank: if c.has_dp_rank != 0 { Some(c.dp_rank) } else { None },
            ts: c.ts,
            worker_id: c.worker_id,
            event_id: c.event_id,
            tokens_hashes: copy(c.tokens_hashes, c.n_block_hashes),
        }
    }
}

/// # Safety
/// `x` was filled by kvreg_wire_decoder_event_ext and the decoder has not been called since.
unsafe fn ext_from_raw(x: &ffi::kvreg_wire_event_ext) -> WireEventExt {
    let s = |form: u32, p: *const c_char| Field::from_form(form, || text(p));
    let offsets = copy(x.mm_offsets, x.n_mm_offsets);
    let mm_objects = copy(x.mm_objects, x.n_mm_objects)
        .into_iter()
        .map(|m| MmObject {
            block: m.block,
            mm_hash: m.mm_hash,
            offsets: (0..m.n_offsets as usize)
                .filter_map(|j| {
                    let i = 2 * (m.first_offset + j);
                    Some((*offsets.get(i)?, *offsets.get(i + 1)?))
                })
                .collect(),
        })
        .collect();
    let pairs = copy(x.pair_token_ids, x.n_pair_token_ids);
    WireEventExt {
        tag: text(x.tag),
        shape: x.shape,
        medium: Field::from_form(x.medium_form, || Some(())),
        lora_id: Field::from_form(x.lora_id_form, || Some(x.lora_id)),
        token_pairs: if x.token_pairs != 0 {
            Some(pairs.chunks_exact(2).map(|p| (p[0], p[1])).collect())
        } else {
            None
        },
        cache_salt: s(x.cache_salt_form, x.cache_salt),
        kv_cache_spec_kind: s(x.kv_cache_spec_kind_form, x.kv_cache_spec_kind),
        kv_cache_spec_sliding_window: Field::from_form(x.sliding_window_form, || {
            Some(x.kv_cache_spec_sliding_window)
        }),
        extra_keys: Field::from_form(x.extra_keys_form, || Some(copy(x.extra_keys, x.extra_keys_len))),
        locality: s(x.locality_form, x.locality),
        ownership: s(x.ownership_form, x.ownership),
        session_id: s(x.session_id_form, x.session_id),
        start_position: Field::from_form(x.start_position_form, || Some(x.start_position)),
        mm_objects,
        residency_domain: s(x.residency_domain_form, x.residency_domain),
        state_source: Field::from_form(x.state_source_form, || {
            Some(copy(x.state_source, x.state_source_len))
        }),
    }
}

/// A payload that did not decode (`ErrorKind::Protocol`: `offset` and `detail` say where and
/// why), or another failure of the decoder (`ErrorKind::OutOfMemory`...; offset 0, no detail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub error: Error,
    /// Byte offset of the problem in the payload (`len` when it ended too early).
    pub offset: usize,
    /// The decoder's description of it.
    pub detail: String,
}

impl DecodeError {
    pub fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.error.kind() == ErrorKind::Protocol {
            write!(f, "{} at offset {}: {}", self.error, self.offset, self.detail)
        } else {
            fmt::Display::fmt(&self.error, f)
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Error {
        e.error
    }
}

/// Counters of a [`Decoder`].
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Payloads decoded.
    pub batches: u64,
    /// Payloads rejected (`ErrorKind::Protocol`).
    pub rejected: u64,
    /// Events returned.
    pub events: u64,
    /// Events of unknown type skipped.
    pub skipped: u64,
}

/// Turns payloads from engines (untrusted bytes) into [`WireEvent`]s. See the module docs.
pub struct Decoder {
    raw: NonNull<ffi::kvreg_wire_decoder>,
}

// SAFETY: the C decoder may be used from any thread, one at a time; &mut self ensures that.
unsafe impl Send for Decoder {}

impl Decoder {
    /// A decoder for `Vllm` (also SGLang and legacy payloads), `VllmLegacy`, `Sglang`,
    /// `DynamoJson` or `DynamoMsgpack`. `NotSupported` when the library was built without
    /// the wire feature.
    pub fn new(format: Format) -> Result<Decoder> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe { ffi::kvreg_wire_decoder_new(&mut raw, format.raw()) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(Decoder { raw })
    }

    /// Decodes one payload into its events, in order (events of unknown types are skipped
    /// and counted in `stats().skipped`).
    pub fn decode(&mut self, payload: &[u8]) -> std::result::Result<Vec<WireEvent>, DecodeError> {
        let mut evs: *const ffi::kvreg_wire_event = ptr::null();
        let mut n: usize = 0;
        let mut offset: usize = 0;
        // SAFETY: live decoder (&mut self); payload is read during the call only.
        let status = unsafe {
            ffi::kvreg_wire_decode(
                self.raw.as_ptr(),
                payload.as_ptr().cast(),
                payload.len(),
                &mut evs,
                &mut n,
                &mut offset,
            )
        };
        if let Err(error) = check(status) {
            let (offset, detail) = if status == ffi::KVREG_EPROTO {
                // SAFETY: live decoder; the text is valid until its next call: copied now.
                (offset, unsafe { text(ffi::kvreg_wire_decoder_error(self.raw.as_ptr())) }.unwrap_or_default())
            } else {
                (0, String::new())
            };
            return Err(DecodeError { error, offset, detail });
        }
        if evs.is_null() || n == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: n records, valid (with what they point to) until the decoder's next call.
        Ok(unsafe { slice::from_raw_parts(evs, n) }.iter().map(|e| unsafe { WireEvent::from_raw(e) }).collect())
    }

    /// Sets one of the decoder's limits (`InvalidArgument` out of its range).
    pub fn set_limit(&mut self, limit: DecoderLimit, value: u64) -> Result<()> {
        let opt = match limit {
            DecoderLimit::MaxPayload => ffi::KVREG_WIRE_DEC_OPT_MAX_PAYLOAD,
            DecoderLimit::MaxDepth => ffi::KVREG_WIRE_DEC_OPT_MAX_DEPTH,
            DecoderLimit::MaxEvents => ffi::KVREG_WIRE_DEC_OPT_MAX_EVENTS,
        };
        // SAFETY: live decoder (&mut self).
        check(unsafe { ffi::kvreg_wire_decoder_set(self.raw.as_ptr(), opt, value) }).map(drop)
    }

    /// The extended fields of event `index` of the last successful `decode` (`OutOfRange`
    /// past the batch).
    pub fn event_ext(&self, index: usize) -> Result<WireEventExt> {
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut x: ffi::kvreg_wire_event_ext = unsafe { std::mem::zeroed() };
        x.struct_size = std::mem::size_of::<ffi::kvreg_wire_event_ext>() as u32;
        // SAFETY: live decoder; x is writable for struct_size bytes.
        check(unsafe { ffi::kvreg_wire_decoder_event_ext(self.raw.as_ptr(), index, &mut x) })?;
        // Fields past what the library filled (an older library) stay zero: absent.
        // SAFETY: the pointers are valid until the decoder's next call; all copied now.
        Ok(unsafe { ext_from_raw(&x) })
    }

    /// The last decoded payload encoded again the way its upstream encoder writes it (for a
    /// payload that encoder wrote, the same bytes). `InvalidState` when nothing was decoded
    /// or the payload held something the decoder does not keep.
    pub fn reencode(&mut self) -> Result<Vec<u8>> {
        let mut p: *const u8 = ptr::null();
        let mut n: usize = 0;
        // SAFETY: live decoder (&mut self); the bytes are copied before its next call.
        check(unsafe { ffi::kvreg_wire_decoder_reencode(self.raw.as_ptr(), &mut p, &mut n) })?;
        // SAFETY: n bytes at p, valid until the decoder's next call.
        Ok(unsafe { copy(p, n) })
    }

    /// The decoder's counters.
    pub fn stats(&self) -> Result<DecoderStats> {
        let get = |stat: u32| -> Result<u64> {
            let mut v: u64 = 0;
            // SAFETY: live decoder, valid out pointer; reading counters does not decode.
            check(unsafe { ffi::kvreg_wire_decoder_stat(self.raw.as_ptr(), stat, &mut v) })?;
            Ok(v)
        };
        Ok(DecoderStats {
            batches: get(ffi::KVREG_WIRE_STAT_BATCHES)?,
            rejected: get(ffi::KVREG_WIRE_STAT_REJECTED)?,
            events: get(ffi::KVREG_WIRE_STAT_EVENTS)?,
            skipped: get(ffi::KVREG_WIRE_STAT_SKIPPED)?,
        })
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: owned decoder, freed once.
        unsafe { ffi::kvreg_wire_decoder_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Decoder")
    }
}
