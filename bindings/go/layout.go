package kvreg

/*
#include <stddef.h>
#include <kvreg.h>
#include <kvreg_wire.h>
*/
import "C"

import "unsafe"

// cLayout reports sizes and offsets of the C records the binding reads, so a test (which
// cannot use cgo itself) can pin them to the header's promises: the event stride must not
// change across versions, and the 0.3 fields must sit where the old reserved words were.
func cLayout() map[string]uintptr {
	var ev C.kvreg_event
	var we C.kvreg_wire_event
	return map[string]uintptr{
		"event.size":               unsafe.Sizeof(ev),
		"event.tokens":             unsafe.Offsetof(ev.tokens),
		"event.medium":             unsafe.Offsetof(ev.medium),
		"event.reserved32":         unsafe.Offsetof(ev.reserved32),
		"event.reserved":           unsafe.Offsetof(ev.reserved),
		"wire_event.size":          unsafe.Sizeof(we),
		"wire_event.ts":            unsafe.Offsetof(we.ts),
		"wire_event.tokens_hashes": unsafe.Offsetof(we.tokens_hashes),
		"pointer.size":             unsafe.Sizeof(uintptr(0)),
	}
}
