package kvreg

/*
#include <kvreg.h>
*/
import "C"

import (
	"strconv"
	"strings"
)

// Error is a libkvreg status code together with the operation that returned it.
// Compare with the sentinels through errors.Is: errors.Is(err, kvreg.ErrStale).
type Error struct {
	Code int    // negative KVREG_E* value
	Op   string // Go method or C function that failed; empty for the sentinels
	// detail, when set, replaces kvreg_strerror's text: the binding's own refusals (a Close
	// while other objects still use the one closed) say what they refused.
	detail string
}

// Sentinels, one per KVREG_E* code. They carry no Op, so Is matches any error with their code.
var (
	ErrInvalid  = &Error{Code: int(C.KVREG_EINVAL)}
	ErrNoMem    = &Error{Code: int(C.KVREG_ENOMEM)}
	ErrRange    = &Error{Code: int(C.KVREG_ERANGE)}
	ErrState    = &Error{Code: int(C.KVREG_ESTATE)}
	ErrExist    = &Error{Code: int(C.KVREG_EEXIST)}
	ErrNotFound = &Error{Code: int(C.KVREG_ENOENT)}
	ErrStale    = &Error{Code: int(C.KVREG_ESTALE)}
	ErrBusy     = &Error{Code: int(C.KVREG_EBUSY)}
	ErrOverflow = &Error{Code: int(C.KVREG_EOVERFLOW)}
	// ErrNotSupported: the feature was not built into the loaded library (see Features).
	ErrNotSupported = &Error{Code: int(C.KVREG_ENOTSUP)}
	// ErrProto: malformed input from outside (a wire payload that does not decode); a
	// Decoder returns it as a *DecodeError with the byte offset.
	ErrProto = &Error{Code: int(C.KVREG_EPROTO)}
)

// Error returns "kvreg: <op>: <kvreg_strerror(code)>" (for the binding's own ErrBusy refusals,
// what is still open instead of kvreg_strerror's text).
func (e *Error) Error() string {
	msg := e.detail
	if msg == "" {
		msg = C.GoString(C.kvreg_strerror(C.int(e.Code)))
	}
	if e.Op == "" {
		return "kvreg: " + msg
	}
	return "kvreg: " + e.Op + ": " + msg
}

// Is reports whether target is an *Error with the same code whose Op is empty (a sentinel)
// or equal to e's, so errors.Is(err, ErrStale) works however err was wrapped.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && (t.Op == "" || t.Op == e.Op)
}

// check turns a C status into nil or an *Error naming op.
func check(op string, status C.int) error {
	if status >= 0 {
		return nil
	}
	return &Error{Code: int(status), Op: op}
}

// cString copies v for C, or refuses it (ErrInvalid) when it holds a NUL: C would read only
// the part before it, and the call would succeed with a value the caller never gave (a URL
// list losing its failover servers, a name losing its tail).
func cString(op, v string) (*C.char, error) {
	if strings.IndexByte(v, 0) >= 0 {
		return nil, &Error{Code: int(C.KVREG_EINVAL), Op: op, detail: "invalid argument: a NUL inside a string"}
	}
	return C.CString(v), nil
}

// closedErr is what every method of a closed object returns. ESTALE is the code the library
// itself uses for a freed pool, so one errors.Is(err, ErrStale) covers both cases.
func closedErr(op string) error {
	return &Error{Code: int(C.KVREG_ESTALE), Op: op + " (closed)"}
}

// busyErr is what Registry.Close and Index.Close return while n objects of kind what (a
// NatsPublisher, a NatsConsumer) still use them: the C contract wants those freed first.
// It matches ErrBusy; nothing was closed.
func busyErr(op string, n int, what string) error {
	return &Error{Code: int(C.KVREG_EBUSY), Op: op,
		detail: "busy: " + strconv.Itoa(n) + " " + what + " still open (close it first)"}
}
