package kvreg

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorsIsMatchesByCode(t *testing.T) {
	sentinels := []*Error{ErrInvalid, ErrNoMem, ErrRange, ErrState, ErrExist, ErrNotFound,
		ErrStale, ErrBusy, ErrOverflow}
	for i, s := range sentinels {
		// The codes are the header's stable values -1 .. -9, in this order.
		if s.Code != -(i + 1) {
			t.Errorf("sentinel %d has code %d, want %d", i, s.Code, -(i + 1))
		}
		err := fmt.Errorf("wrapped: %w", &Error{Code: s.Code, Op: "kvreg_release"})
		for j, other := range sentinels {
			if got := errors.Is(err, other); got != (i == j) {
				t.Errorf("errors.Is(code %d, code %d) = %v", s.Code, other.Code, got)
			}
		}
	}
	if errors.Is(&Error{Code: -7, Op: "a"}, &Error{Code: -7, Op: "b"}) {
		t.Error("errors with different Ops must not match each other, only the sentinel")
	}
}

func TestErrorMessage(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range []*Error{ErrInvalid, ErrStale, ErrExist, ErrNotFound} {
		msg := (&Error{Code: s.Code, Op: "Pool.Release"}).Error()
		if !strings.HasPrefix(msg, "kvreg: Pool.Release: ") || len(msg) <= len("kvreg: Pool.Release: ") {
			t.Errorf("message %q lacks the op or the strerror text", msg)
		}
		if seen[msg] {
			t.Errorf("two codes share the message %q", msg)
		}
		seen[msg] = true
	}
	if got := (&Error{Code: -1000}).Error(); !strings.Contains(got, "unknown") {
		t.Errorf("unknown code message = %q, want kvreg_strerror's \"unknown error\"", got)
	}
}

func TestVersion(t *testing.T) {
	n, s := Version()
	if n != HeaderVersion {
		t.Errorf("runtime version %d, header %d", n, HeaderVersion)
	}
	if want := fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100); s != want {
		t.Errorf("version string %q, want %q", s, want)
	}
}

// A string holding a NUL is refused with ErrInvalid wherever the binding hands a string to C:
// C reads only up to the NUL, so the call used to succeed with a shorter value (a pool name,
// a LoRA name, a URL list losing its failover servers).
func TestStringWithNulRefused(t *testing.T) {
	reg := newReg(t, nil)
	if _, err := reg.NewPool("gpu\x00junk"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewPool with a NUL: %v, want ErrInvalid", err)
	}
	if _, err := NewEncoder(WireVLLM, &EncoderOptions{LoraName: "adapter\x00x"}); !errors.Is(err, ErrInvalid) &&
		!errors.Is(err, ErrNotSupported) {
		t.Fatalf("NewEncoder with a NUL in LoraName: %v, want ErrInvalid", err)
	}
	if !NatsAvailable() {
		return
	}
	pub := newNatsPublisher(t, reg)
	if err := pub.SetString(NatsURL, "nats://10.0.0.1:4222\x00,nats://10.0.0.2:4222"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("publisher SetString with a NUL: %v, want ErrInvalid", err)
	}
	if err := newNatsConsumer(t).SetString(NatsStream, "EV\x00ENTS"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("consumer SetString with a NUL: %v, want ErrInvalid", err)
	}
}
