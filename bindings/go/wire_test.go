package kvreg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// exampleA is a vLLM KVEventBatch written out by hand from vLLM's msgspec rules (as
// tests/wire/wire_examples.h has it):
// [1.5, [BlockStored(H1, H2; tokens 1..4; block_size 2; GPU), BlockRemoved([H2], GPU),
// AllBlocksCleared], 0] with current vLLM's map events, 285 bytes.
const exampleAHex = "93 cb 3f f8 00 00 00 00 00 00 93" +
	" 8b" +
	" a4 74797065 ab 426c6f636b53746f726564" +
	" ac 626c6f636b5f686173686573 92 cf dab89baa7b5857c0 cf 1f2e3d4c5b6a7988" +
	" b1 706172656e745f626c6f636b5f68617368 c0" +
	" a9 746f6b656e5f696473 94 01 02 03 04" +
	" aa 626c6f636b5f73697a65 02" +
	" a7 6c6f72615f6964 c0" +
	" a6 6d656469756d a3 475055" +
	" a9 6c6f72615f6e616d65 c0" +
	" aa 65787472615f6b657973 92 c0 c0" +
	" a9 67726f75705f696478 00" +
	" b2 6b765f63616368655f737065635f6b696e64 ae 66756c6c5f617474656e74696f6e" +
	" 84" +
	" a4 74797065 ac 426c6f636b52656d6f766564 ac 626c6f636b5f686173686573 91 cf 1f2e3d4c5b6a7988" +
	" a6 6d656469756d a3 475055 a9 67726f75705f696478 00" +
	" 81 a4 74797065 b0 416c6c426c6f636b73436c6561726564" +
	" 00"

const exH1, exH2 = 0xdab89baa7b5857c0, 0x1f2e3d4c5b6a7988

func exampleA(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(exampleAHex, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 285 {
		t.Fatalf("example A is %d bytes, want 285", len(b))
	}
	return b
}

func needWire(t *testing.T) {
	t.Helper()
	if Features()&FeatureWire == 0 {
		t.Skip("libkvreg built without the wire feature (TestWireNotSupported checks that)")
	}
}

func newDecoder(t *testing.T, f WireFormat) *Decoder {
	t.Helper()
	d, err := NewDecoder(f)
	if err != nil {
		t.Fatalf("NewDecoder(%d): %v", f, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func newEncoder(t *testing.T, f WireFormat, o *EncoderOptions) *Encoder {
	t.Helper()
	e, err := NewEncoder(f, o)
	if err != nil {
		t.Fatalf("NewEncoder(%d): %v", f, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// chainEvents registers n chained blocks of blockSize tokens in a pool on medium, then (with
// remove) releases them; it returns the polled events and the blocks' hashes and tokens.
func chainEvents(t *testing.T, n int, medium Medium, remove bool) ([]Event, []BlockInfo, []uint32) {
	t.Helper()
	r := newReg(t, &Options{KeepTokens: true})
	p, err := r.NewPoolMedium("p", medium)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tokens := make([]uint32, n*4)
	for i := range tokens {
		tokens[i] = uint32(1000 + i)
	}
	infos, err := HashBlocks(tokens, 4, RouterSalt)
	if err != nil {
		t.Fatal(err)
	}
	var held []Block
	for i := range infos {
		held = append(held, mustRegister(t, p, infos[i].Desc(tokens[i*4:i*4+4])))
	}
	if remove {
		for _, b := range held {
			mustRelease(t, p, b)
		}
	}
	return pollAll(t, r), infos, tokens
}

func TestWireNotSupported(t *testing.T) {
	if Features()&FeatureWire == 0 {
		_, err := NewEncoder(WireVLLM, nil)
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "without the wire feature") {
			t.Errorf("NewEncoder without wire: %v", err)
		}
		if _, err := NewDecoder(WireVLLM); !errors.Is(err, ErrNotSupported) {
			t.Errorf("NewDecoder without wire: %v", err)
		}
		return
	}
	// With the feature built in, check the mapping the stubs' status goes through.
	err := wireErr("kvreg_wire_encoder_new", -10)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "without the wire feature") {
		t.Errorf("ENOTSUP maps to %v", err)
	}
}

func TestWireDecodeExampleA(t *testing.T) {
	needWire(t)
	d := newDecoder(t, WireVLLM)
	evs, err := d.Decode(exampleA(t))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(evs) != 3 || evs[0].Type != WireStored || evs[1].Type != WireRemoved || evs[2].Type != WireCleared {
		t.Fatalf("decoded %+v", evs)
	}
	st := evs[0]
	if len(st.BlockHashes) != 2 || st.BlockHashes[0] != exH1 || st.BlockHashes[1] != exH2 {
		t.Errorf("block hashes %x", st.BlockHashes)
	}
	if st.HasParent || st.BlockSize != 2 || len(st.TokenIDs) != 4 || st.TokenIDs[0] != 1 || st.TokenIDs[3] != 4 {
		t.Errorf("stored event %+v", st)
	}
	if st.Medium != MediumGPU || st.MediumName != "GPU" || st.LoraName != "" {
		t.Errorf("medium %v %q lora %q", st.Medium, st.MediumName, st.LoraName)
	}
	if !st.HasGroupIdx || st.GroupIdx != 0 || !st.HasDPRank || st.DPRank != 0 || st.TS != 1.5 {
		t.Errorf("group/dp/ts %+v", st)
	}
	if st.WorkerID != 0 || st.EventID != 0 || st.TokensHashes != nil {
		t.Errorf("Dynamo-only fields set: %+v", st)
	}
	if rm := evs[1]; len(rm.BlockHashes) != 1 || rm.BlockHashes[0] != exH2 || rm.MediumName != "GPU" ||
		rm.TokenIDs != nil {
		t.Errorf("removed event %+v", rm)
	}
	if s, err := d.Stats(); err != nil || s != (DecoderStats{Batches: 1, Events: 3}) {
		t.Errorf("Stats = %+v, %v", s, err)
	}
}

func TestWireDecodeMalformed(t *testing.T) {
	needWire(t)
	d := newDecoder(t, WireVLLM)
	a := exampleA(t)
	// block_size's value 0x02 becomes the string "x": a known field of the wrong type.
	key, _ := hex.DecodeString("aa626c6f636b5f73697a65")
	at := bytes.Index(a, key) + len(key)
	if a[at] != 0x02 {
		t.Fatalf("byte %d is %#x, not block_size's value", at, a[at])
	}
	bad := append(append(append([]byte{}, a[:at]...), 0xa1, 'x'), a[at+1:]...)
	cases := []struct {
		name    string
		payload []byte
		offset  int
	}{
		{"wrong type", bad, at},
		{"dp_rank missing", a[:len(a)-1], len(a) - 1},
		{"empty", nil, 0},
	}
	for _, c := range cases {
		evs, err := d.Decode(c.payload)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrProto) || evs != nil {
			t.Errorf("%s: %v, %v; want a *DecodeError matching ErrProto", c.name, evs, err)
			continue
		}
		if de.Offset != c.offset || de.Detail == "" || !strings.Contains(err.Error(), de.Detail) {
			t.Errorf("%s: offset %d (want %d), detail %q", c.name, de.Offset, c.offset, de.Detail)
		}
	}
	if s, _ := d.Stats(); s.Rejected != 3 {
		t.Errorf("Rejected = %d, want 3", s.Rejected)
	}
	if _, err := d.Decode(a); err != nil {
		t.Errorf("the decoder must stay usable: %v", err)
	}
}

func TestWireRoundTripVLLM(t *testing.T) {
	needWire(t)
	evs, infos, tokens := chainEvents(t, 3, MediumCPU, true)
	for _, f := range []WireFormat{WireVLLM, WireVLLMLegacy} {
		e := newEncoder(t, f, &EncoderOptions{DPRank: 3, BlockSize: 4, LoraName: "ad"})
		d := newDecoder(t, WireVLLM)
		payloads, err := e.Encode(evs, 12.25)
		if err != nil || len(payloads) != 1 {
			t.Fatalf("format %d: Encode = %d payloads, %v", f, len(payloads), err)
		}
		got, err := d.Decode(payloads[0])
		if err != nil || len(got) != 2 || got[0].Type != WireStored || got[1].Type != WireRemoved {
			t.Fatalf("format %d: decoded %+v, %v", f, got, err)
		}
		st := got[0]
		for i, info := range infos {
			if st.BlockHashes[i] != info.SequenceHash {
				t.Errorf("format %d: hash %d = %x, want %x", f, i, st.BlockHashes[i], info.SequenceHash)
			}
		}
		if len(st.TokenIDs) != len(tokens) || st.TokenIDs[5] != tokens[5] || st.BlockSize != 4 || st.HasParent {
			t.Errorf("format %d: stored %+v", f, st)
		}
		if st.Medium != MediumCPU || st.MediumName != "CPU" || st.LoraName != "ad" ||
			st.DPRank != 3 || st.TS != 12.25 {
			t.Errorf("format %d: fields %+v", f, st)
		}
		if len(got[1].BlockHashes) != 3 {
			t.Errorf("format %d: removed %+v", f, got[1])
		}
	}
}

func TestWireRoundTripDynamo(t *testing.T) {
	needWire(t)
	evs, infos, _ := chainEvents(t, 2, MediumStorage, false)
	for _, f := range []WireFormat{WireDynamoJSON, WireDynamoMsgpack} {
		e := newEncoder(t, f, &EncoderOptions{WorkerID: 1<<63 + 5})
		d := newDecoder(t, f)
		payloads, err := e.Encode(evs, -1)
		if err != nil {
			t.Fatal(err)
		}
		var got []WireEvent
		for _, p := range payloads {
			g, err := d.Decode(p)
			if err != nil {
				t.Fatalf("format %d: %v", f, err)
			}
			got = append(got, g...)
		}
		if len(got) != 1 || got[0].Type != WireStored || got[0].WorkerID != 1<<63+5 ||
			got[0].Medium != MediumStorage || len(got[0].TokensHashes) != 2 {
			t.Fatalf("format %d: %+v", f, got)
		}
		for i, info := range infos {
			if got[0].BlockHashes[i] != info.SequenceHash || got[0].TokensHashes[i] != info.BlockHash {
				t.Errorf("format %d: block %d hashes %x/%x", f, i, got[0].BlockHashes[i], got[0].TokensHashes[i])
			}
		}
	}
}

func TestWireEncodeSplitsAndStops(t *testing.T) {
	needWire(t)
	evs, infos, _ := chainEvents(t, 5, MediumGPU, true)
	e := newEncoder(t, WireVLLM, &EncoderOptions{MaxEvents: 2})
	d := newDecoder(t, WireVLLM)
	payloads, err := e.Encode(evs, 1)
	if err != nil || len(payloads) != 5 {
		t.Fatalf("10 events at most 2 per payload: %d payloads, %v", len(payloads), err)
	}
	var stored []uint64
	for _, p := range payloads {
		got, err := d.Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range got {
			if ev.Type == WireStored {
				stored = append(stored, ev.BlockHashes...)
			}
		}
	}
	if len(stored) != len(infos) {
		t.Fatalf("stored %d hashes, want %d", len(stored), len(infos))
	}
	for i := range infos {
		if stored[i] != infos[i].SequenceHash {
			t.Errorf("stored hash %d out of order", i)
		}
	}

	// A Register without tokens cannot go out as vLLM: the payloads before it come back.
	hashOnly := evs[1]
	hashOnly.Tokens = nil
	payloads, err = e.Encode([]Event{evs[0], hashOnly}, 1)
	var ee *EncodeError
	if !errors.As(err, &ee) || !errors.Is(err, ErrState) || ee.Index != 1 || len(payloads) != 1 {
		t.Errorf("hash-only Register: %d payloads, %v", len(payloads), err)
	}
	bad := evs[0]
	bad.Medium = 9
	if _, err := e.Encode([]Event{bad}, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown medium: %v, want ErrInvalid", err)
	}
	if p, err := e.Encode(nil, 1); err != nil || len(p) != 0 {
		t.Errorf("no events: %d payloads, %v", len(p), err)
	}
	if _, err := NewEncoder(WireSGLang, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("SGLang encoder: %v, want ErrInvalid", err)
	}
	if _, err := NewEncoder(WireVLLM, &EncoderOptions{DPRank: 1 << 40}); !errors.Is(err, ErrInvalid) {
		t.Errorf("dp rank 2^40: %v, want ErrInvalid", err)
	}
	e.Close()
	if _, err := e.Encode(evs, 1); !errors.Is(err, ErrStale) {
		t.Errorf("Encode after Close: %v, want ErrStale", err)
	}
}

func TestWireEncodesSnapshotAndCleared(t *testing.T) {
	needWire(t)
	r := newReg(t, &Options{KeepTokens: true})
	p := newPool(t, r, "g")
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	infos, _ := HashBlocks(tokens, 4, 0)
	for i := range infos {
		mustRegister(t, p, infos[i].Desc(tokens[i*4:i*4+4]))
	}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Clear(); err != nil {
		t.Fatal(err)
	}
	evs := pollAll(t, r)
	cleared := evs[len(evs)-1]
	e := newEncoder(t, WireVLLM, nil)
	d := newDecoder(t, WireVLLM)
	payloads, err := e.Encode(append(snap.Events, cleared), 2)
	if err != nil || len(payloads) != 1 {
		t.Fatalf("%d payloads, %v", len(payloads), err)
	}
	got, err := d.Decode(payloads[0])
	if err != nil || len(got) != 2 || got[0].Type != WireStored || got[1].Type != WireCleared ||
		len(got[0].BlockHashes) != 2 || got[0].BlockHashes[1] != infos[1].SequenceHash {
		t.Errorf("decoded %+v, %v", got, err)
	}
}

func TestWireLimitsAndReencode(t *testing.T) {
	needWire(t)
	a := exampleA(t)
	d := newDecoder(t, WireVLLM)
	if _, err := d.Reencode(); !errors.Is(err, ErrState) {
		t.Errorf("Reencode before any decode: %v", err)
	}
	if err := d.SetLimit(LimitMaxPayload, uint64(len(a))); err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
	if _, err := d.Decode(a); err != nil {
		t.Fatalf("Decode at the limit: %v", err)
	}
	again, err := d.Reencode()
	if err != nil || !bytes.Equal(again, a) {
		t.Errorf("Reencode = %x, %v; want the input", again, err)
	}
	if err := d.SetLimit(LimitMaxPayload, uint64(len(a)-1)); err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
	var de *DecodeError
	if _, err := d.Decode(a); !errors.As(err, &de) || de.Offset != len(a)-1 {
		t.Errorf("Decode one past the limit: %v", err)
	}
	if err := d.SetLimit(LimitMaxDepth, 65); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetLimit(depth 65): %v", err)
	}
}
