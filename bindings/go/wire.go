package kvreg

/*
#include <stdlib.h>
#include <string.h>
#include <kvreg_wire.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// WireFormat names an encoding of events on the wire (KVREG_WIRE_*).
type WireFormat uint32

// Wire formats.
const (
	// WireVLLM is vLLM's KVEventBatch with map events (vLLM >= 0.24, Dynamo, llm-d). Its
	// decoder also reads SGLang and legacy positional payloads.
	WireVLLM = WireFormat(C.KVREG_WIRE_VLLM)
	// WireVLLMLegacy is the same batch with positional (array) events.
	WireVLLMLegacy = WireFormat(C.KVREG_WIRE_VLLM_LEGACY)
	// WireDynamoJSON is Dynamo RouterEvent objects as a JSON array.
	WireDynamoJSON = WireFormat(C.KVREG_WIRE_DYNAMO_JSON)
	// WireDynamoMsgpack is the same as MessagePack maps.
	WireDynamoMsgpack = WireFormat(C.KVREG_WIRE_DYNAMO_MSGPACK)
	// WireSGLang is SGLang's layouts (decode only).
	WireSGLang = WireFormat(C.KVREG_WIRE_SGLANG)
)

// WireEventType tells the decoded event types apart (KVREG_WIRE_STORED ...).
type WireEventType uint32

// Decoded event types.
const (
	WireStored  = WireEventType(C.KVREG_WIRE_STORED)  // vLLM BlockStored, Dynamo stored
	WireRemoved = WireEventType(C.KVREG_WIRE_REMOVED) // vLLM BlockRemoved, Dynamo removed
	WireCleared = WireEventType(C.KVREG_WIRE_CLEARED) // vLLM AllBlocksCleared, Dynamo cleared
)

// wireErr maps the wire stubs' ENOTSUP to an error that says what to do about it.
func wireErr(op string, status C.int) error {
	if status == C.KVREG_ENOTSUP {
		return &Error{Code: int(status), Op: op + " (libkvreg built without the wire feature: " +
			"Features() lacks FeatureWire; rebuild it with msgpack-c)"}
	}
	return check(op, status)
}

// EncoderOptions configure an Encoder; the zero value gives the library's defaults.
type EncoderOptions struct {
	DPRank    uint64 // data-parallel rank written in each batch (default 0)
	MaxEvents uint64 // most kvreg events in one payload (0: library default, 1024)
	WorkerID  uint64 // Dynamo RouterEvent.worker_id (default 0)
	// BlockSize (vLLM formats): the token count every Register must have; vLLM's consumers
	// drop stored events of another block size. 0: not checked.
	BlockSize uint64
	LoraName  string // written as lora_name in stored events ("": nil)
	// Dynamo formats: the event_id of the first RouterEvent made of snapshot events; each
	// takes the next one, so a snapshot's ids are contiguous (0: the default, 0). 0.5.
	SnapshotEventID uint64
}

// Encoder turns Events into wire payloads. Not for concurrent use (the wrapper serialises
// calls so that Close is safe); make one per goroutine. Close it when done.
type Encoder struct {
	mu  sync.Mutex
	ptr *C.kvreg_wire_encoder // nil once closed
}

// NewEncoder makes an encoder for WireVLLM, WireVLLMLegacy, WireDynamoJSON or
// WireDynamoMsgpack (else ErrInvalid); opts may be nil. ErrNotSupported when the library was
// built without the wire feature.
func NewEncoder(format WireFormat, opts *EncoderOptions) (*Encoder, error) {
	var p *C.kvreg_wire_encoder
	if err := wireErr("kvreg_wire_encoder_new",
		C.kvreg_wire_encoder_new(&p, C.uint32_t(format))); err != nil {
		return nil, err
	}
	e := &Encoder{ptr: p}
	runtime.SetFinalizer(e, (*Encoder).finalize)
	if opts != nil {
		if err := e.configure(opts); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

func (e *Encoder) configure(o *EncoderOptions) error {
	set := func(opt C.uint32_t, v uint64, def uint64) error {
		if v == def {
			return nil
		}
		return check("kvreg_wire_encoder_set", C.kvreg_wire_encoder_set(e.ptr, opt, C.uint64_t(v)))
	}
	if err := set(C.KVREG_WIRE_OPT_DP_RANK, o.DPRank, 0); err != nil {
		return err
	}
	if err := set(C.KVREG_WIRE_OPT_MAX_EVENTS, o.MaxEvents, 0); err != nil {
		return err
	}
	if err := set(C.KVREG_WIRE_OPT_WORKER_ID, o.WorkerID, 0); err != nil {
		return err
	}
	if err := set(C.KVREG_WIRE_OPT_BLOCK_SIZE, o.BlockSize, 0); err != nil {
		return err
	}
	if err := set(C.KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, o.SnapshotEventID, 0); err != nil {
		return err
	}
	if o.LoraName != "" {
		cs, err := cString("kvreg_wire_encoder_set_lora_name", o.LoraName)
		if err != nil {
			return err
		}
		defer C.free(unsafe.Pointer(cs))
		return check("kvreg_wire_encoder_set_lora_name",
			C.kvreg_wire_encoder_set_lora_name(e.ptr, cs))
	}
	return nil
}

// Close frees the encoder. Idempotent; later calls return ErrStale errors.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ptr != nil {
		C.kvreg_wire_encoder_free(e.ptr)
		e.ptr = nil
		runtime.SetFinalizer(e, nil)
	}
	return nil
}

func (e *Encoder) finalize() {
	e.Close()
	reportLeak(Leak{Type: "Encoder"})
}

// EncodeError is the error of an Encode that met an event its format cannot carry (a vLLM
// Register without tokens or of another block size: ErrState; an unknown kind or medium:
// ErrInvalid). Index is that event's position; the payloads returned with it hold the events
// before it, complete and ready to send. errors.Is(err, ErrState) works through Unwrap.
type EncodeError struct {
	Index int
	Err   error
}

func (e *EncodeError) Error() string {
	return e.Err.Error() + " (event " + uitoa(uint64(e.Index)) + ")"
}

// Unwrap returns the *Error with the library's status.
func (e *EncodeError) Unwrap() error { return e.Err }

// Encode turns events (in ID order, as Poll or a Snapshot gives them) into as many payloads
// as MaxEvents needs; none for no events. ts is the batch timestamp in seconds since the Unix
// epoch; a negative ts means now. Each payload is a Go copy the caller owns.
func (e *Encoder) Encode(events []Event, ts float64) ([][]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ptr == nil {
		return nil, closedErr("Encoder.Encode")
	}
	if len(events) == 0 {
		return [][]byte{}, nil
	}
	// The events (and the tokens they point to) go into C memory: C must not be handed Go
	// memory that holds pointers.
	cevs, free := eventsToC(events)
	defer free()
	var payloads [][]byte
	for done := 0; done < len(events); {
		var consumed, length C.size_t
		var data *C.uint8_t
		st := C.kvreg_wire_encode(e.ptr, &cevs[done], C.size_t(len(events)-done), C.double(ts),
			&consumed, &data, &length)
		if st < 0 {
			return payloads, &EncodeError{Index: done, Err: wireErr("kvreg_wire_encode", st)}
		}
		// The payload lives in the encoder until its next call: copy it now.
		payloads = append(payloads, C.GoBytes(unsafe.Pointer(data), C.int(length)))
		done += int(consumed)
	}
	return payloads, nil
}

// eventsToC copies events into one C allocation: the kvreg_event array, then every token.
func eventsToC(events []Event) ([]C.kvreg_event, func()) {
	ntok := 0
	for i := range events {
		ntok += len(events[i].Tokens)
	}
	evSize := int(unsafe.Sizeof(C.kvreg_event{}))
	mem := C.calloc(C.size_t(len(events)*evSize+ntok*4), 1) // cgo's calloc panics on NULL
	cevs := unsafe.Slice((*C.kvreg_event)(mem), len(events))
	toks := unsafe.Slice((*uint32)(unsafe.Add(mem, len(events)*evSize)), ntok)
	for i := range events {
		ev, c := &events[i], &cevs[i]
		c.kind = C.uint32_t(ev.Kind)
		c.pool_id = C.uint32_t(ev.PoolID)
		c.event_id = C.uint64_t(ev.ID)
		c.sequence_hash = C.uint64_t(ev.SequenceHash)
		c.block_hash = C.uint64_t(ev.BlockHash)
		if ev.HasParent {
			c.parent_sequence_hash = C.uint64_t(ev.ParentSequenceHash)
			c.has_parent = 1
		}
		c.medium = C.uint32_t(ev.Medium)
		if n := len(ev.Tokens); n > 0 {
			copy(toks, ev.Tokens)
			c.tokens = (*C.uint32_t)(unsafe.Pointer(&toks[0]))
			c.n_tokens = C.uint32_t(n)
			toks = toks[n:]
		}
	}
	return cevs, func() { C.free(mem) }
}

// WireEvent is one decoded event, a Go copy owned by the caller.
type WireEvent struct {
	Type            WireEventType
	BlockHashes     []uint64 // the engine's hashes (bytes hashes: their last 8 bytes, big-endian)
	ParentBlockHash uint64   // 0 when !HasParent
	HasParent       bool
	BlockSize       uint32   // 0 when absent
	TokenIDs        []uint32 // nil when absent
	Medium          Medium   // MediumUnknown when MediumName is not a name the library knows
	MediumName      string   // as on the wire; "" when absent or nil
	LoraName        string   // "" when absent or nil
	GroupIdx        int64    // valid when HasGroupIdx
	HasGroupIdx     bool
	DPRank          int64 // of the batch; valid when HasDPRank
	HasDPRank       bool
	TS              float64  // of the batch (vLLM / SGLang formats; 0 for Dynamo)
	WorkerID        uint64   // Dynamo formats; 0 otherwise
	EventID         uint64   // Dynamo formats; 0 otherwise
	TokensHashes    []uint64 // Dynamo stored: each block's tokens_hash; nil otherwise
}

// DecodeError is a payload the decoder rejected (malformed input): errors.Is(err, ErrProto).
type DecodeError struct {
	Offset int    // byte offset of the problem in the payload (len(payload) if it ended early)
	Detail string // the decoder's description
}

func (e *DecodeError) Error() string {
	return "kvreg: Decoder.Decode: " + C.GoString(C.kvreg_strerror(C.KVREG_EPROTO)) +
		" at offset " + uitoa(uint64(e.Offset)) + ": " + e.Detail
}

// Unwrap makes errors.Is(err, ErrProto) true.
func (e *DecodeError) Unwrap() error {
	return &Error{Code: int(C.KVREG_EPROTO), Op: "kvreg_wire_decode"}
}

// Decoder turns payloads from engines (untrusted bytes) into WireEvents. Not for concurrent
// use (the wrapper serialises calls so that Close is safe). Close it when done.
type Decoder struct {
	mu  sync.Mutex
	ptr *C.kvreg_wire_decoder // nil once closed
}

// NewDecoder makes a decoder for WireVLLM (also SGLang and legacy payloads), WireVLLMLegacy,
// WireSGLang, WireDynamoJSON or WireDynamoMsgpack. ErrNotSupported when the library was
// built without the wire feature.
func NewDecoder(format WireFormat) (*Decoder, error) {
	var p *C.kvreg_wire_decoder
	if err := wireErr("kvreg_wire_decoder_new",
		C.kvreg_wire_decoder_new(&p, C.uint32_t(format))); err != nil {
		return nil, err
	}
	d := &Decoder{ptr: p}
	runtime.SetFinalizer(d, (*Decoder).finalize)
	return d, nil
}

// Close frees the decoder. Idempotent; later calls return ErrStale errors.
func (d *Decoder) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ptr != nil {
		C.kvreg_wire_decoder_free(d.ptr)
		d.ptr = nil
		runtime.SetFinalizer(d, nil)
	}
	return nil
}

func (d *Decoder) finalize() {
	d.Close()
	reportLeak(Leak{Type: "Decoder"})
}

// DecoderLimit names a decoder limit (kvreg_wire.h, "Decoder limits").
type DecoderLimit uint32

// The decoder limits: payload bytes (default 16 MiB), nesting (default 32, at most 64) and
// events per payload (default 65536). Past one, Decode gives a *DecodeError. 0.5.
const (
	LimitMaxPayload DecoderLimit = C.KVREG_WIRE_DEC_OPT_MAX_PAYLOAD
	LimitMaxDepth   DecoderLimit = C.KVREG_WIRE_DEC_OPT_MAX_DEPTH
	LimitMaxEvents  DecoderLimit = C.KVREG_WIRE_DEC_OPT_MAX_EVENTS
)

// SetLimit sets one of the decoder's limits (ErrInvalid for a value out of its range).
func (d *Decoder) SetLimit(limit DecoderLimit, value uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ptr == nil {
		return closedErr("Decoder.SetLimit")
	}
	return wireErr("kvreg_wire_decoder_set",
		C.kvreg_wire_decoder_set(d.ptr, C.uint32_t(limit), C.uint64_t(value)))
}

// Reencode encodes the last payload decoded again from what was decoded, the way its
// upstream encoder wrote it (vLLM / SGLang: byte-identical to an upstream payload).
// ErrState when nothing was decoded or the payload held something the decoder does not
// keep; ErrNotSupported for Dynamo formats. 0.5.
func (d *Decoder) Reencode() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ptr == nil {
		return nil, closedErr("Decoder.Reencode")
	}
	var p *C.uint8_t
	var n C.size_t
	if err := wireErr("kvreg_wire_decoder_reencode",
		C.kvreg_wire_decoder_reencode(d.ptr, &p, &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n)), nil
}

// Decode decodes one payload into its events, in order (events of unknown types are skipped
// and counted in DecoderStats.Skipped). A payload that does not decode gives a *DecodeError.
func (d *Decoder) Decode(payload []byte) ([]WireEvent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ptr == nil {
		return nil, closedErr("Decoder.Decode")
	}
	var evs *C.kvreg_wire_event
	var n, offset C.size_t
	var data unsafe.Pointer
	if len(payload) > 0 {
		data = unsafe.Pointer(&payload[0]) // read during the call only; holds no Go pointers
	}
	st := C.kvreg_wire_decode(d.ptr, data, C.size_t(len(payload)), &evs, &n, &offset)
	runtime.KeepAlive(payload)
	if st == C.KVREG_EPROTO {
		return nil, &DecodeError{Offset: int(offset),
			Detail: C.GoString(C.kvreg_wire_decoder_error(d.ptr))}
	}
	if err := wireErr("kvreg_wire_decode", st); err != nil {
		return nil, err
	}
	out := make([]WireEvent, 0, int(n))
	if n > 0 {
		// Borrowed until the decoder's next call: copy everything out now.
		for _, c := range unsafe.Slice(evs, int(n)) {
			out = append(out, wireEventFromC(&c))
		}
	}
	return out, nil
}

func wireEventFromC(c *C.kvreg_wire_event) WireEvent {
	ev := WireEvent{
		Type:            WireEventType(c._type),
		ParentBlockHash: uint64(c.parent_block_hash),
		HasParent:       c.has_parent != 0,
		BlockSize:       uint32(c.block_size),
		Medium:          Medium(c.medium),
		GroupIdx:        int64(c.group_idx),
		HasGroupIdx:     c.has_group_idx != 0,
		DPRank:          int64(c.dp_rank),
		HasDPRank:       c.has_dp_rank != 0,
		TS:              float64(c.ts),
		WorkerID:        uint64(c.worker_id),
		EventID:         uint64(c.event_id),
	}
	if c.n_block_hashes > 0 && c.block_hashes != nil {
		ev.BlockHashes = copyU64(c.block_hashes, int(c.n_block_hashes))
		if c.tokens_hashes != nil {
			ev.TokensHashes = copyU64(c.tokens_hashes, int(c.n_block_hashes))
		}
	}
	if c.n_token_ids > 0 && c.token_ids != nil {
		ev.TokenIDs = make([]uint32, int(c.n_token_ids))
		copy(ev.TokenIDs, unsafe.Slice((*uint32)(unsafe.Pointer(c.token_ids)), int(c.n_token_ids)))
	}
	if c.medium_name != nil {
		ev.MediumName = C.GoString(c.medium_name)
	}
	if c.lora_name != nil {
		ev.LoraName = C.GoString(c.lora_name)
	}
	return ev
}

func copyU64(p *C.uint64_t, n int) []uint64 {
	out := make([]uint64, n)
	copy(out, unsafe.Slice((*uint64)(unsafe.Pointer(p)), n))
	return out
}

// DecoderStats are a Decoder's counters.
type DecoderStats struct {
	Batches  uint64 // payloads decoded
	Rejected uint64 // payloads rejected (DecodeError)
	Events   uint64 // events returned
	Skipped  uint64 // events of unknown type skipped
}

// Stats reads the decoder's counters.
func (d *Decoder) Stats() (DecoderStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var st DecoderStats
	if d.ptr == nil {
		return st, closedErr("Decoder.Stats")
	}
	for _, f := range []struct {
		s   C.uint32_t
		dst *uint64
	}{
		{C.KVREG_WIRE_STAT_BATCHES, &st.Batches}, {C.KVREG_WIRE_STAT_REJECTED, &st.Rejected},
		{C.KVREG_WIRE_STAT_EVENTS, &st.Events}, {C.KVREG_WIRE_STAT_SKIPPED, &st.Skipped},
	} {
		var v C.uint64_t
		if err := check("kvreg_wire_decoder_stat", C.kvreg_wire_decoder_stat(d.ptr, f.s, &v)); err != nil {
			return DecoderStats{}, err
		}
		*f.dst = uint64(v)
	}
	return st, nil
}
