package kvreg

import "testing"

// The C records keep their size across versions (arrays of events keep their stride), and
// the 0.3 fields took the place of reserved words: medium and reserved32 where reserved[0]
// was, reserved[3] after them.
func TestCLayout(t *testing.T) {
	l := cLayout()
	if l["pointer.size"] != 8 {
		t.Skipf("layout numbers are pinned for LP64 only (pointer size %d)", l["pointer.size"])
	}
	want := map[string]uintptr{
		"event.size": 88, "event.tokens": 48, "event.medium": 56, "event.reserved32": 60,
		"event.reserved": 64, "wire_event.size": 152, "wire_event.ts": 96,
		"wire_event.tokens_hashes": 120,
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("%s = %d, want %d", k, l[k], v)
		}
	}
}
