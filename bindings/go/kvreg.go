// Package kvreg is the Go binding of libkvreg, a C library that names, registers and tracks
// KV-cache blocks for LLM inference engines (Dynamo-compatible chained XXH3 hashes, pools
// sharing one global registry, Register/Remove events).
//
// The binding is a thin cgo layer over include/kvreg.h. It adds what Go needs on top:
// explicit Close methods, errors that work with errors.Is, and Go-owned copies of everything
// the library only lends (event tokens, block tokens).
//
// Lifetimes follow one rule: an object lives until its Close. Finalizers are only a leak
// safety net: they report the leak (see SetLeakHandler) and never emit events; a Pool that
// becomes garbage without Close keeps its blocks registered until Registry.Close.
//
// Events are delivered in POLL mode only (Registry.Poll, PollWait, Events): the library never
// calls into Go, so no Go pointer is ever handed to C beyond the duration of one call.
//
// Import path: github.com/libkvreg/libkvreg/bindings/go (package name kvreg).
package kvreg

/*
// KVREG_EXPERIMENTAL: the package may use the experimental tier (kvreg_net.h, kvreg_index.h,
// kvreg_nats.h; README "API stability"). It still calls some 0.x names (their 0.6 names are
// in docs/config.md): cgo must not print their deprecation warnings to every user's build.
#cgo CFLAGS: -DKVREG_EXPERIMENTAL -Wno-deprecated-declarations
#include <kvreg.h>

// The binding relies on the 0.3.0 API (KVREG_VERSION_NUMBER = MAJOR*10000 + MINOR*100 + PATCH):
// pool media, clear, snapshots, features and kvreg_wire.h (0.2: contains answers through an
// out-parameter, poll_wait, wakeup and flush).
#if !defined(KVREG_VERSION_NUMBER) || KVREG_VERSION_NUMBER < 300
#error "the kvreg Go binding needs libkvreg >= 0.3.0"
#endif
*/
import "C"

// HeaderVersion is KVREG_VERSION_NUMBER of the header this package was compiled against.
const HeaderVersion = uint(C.KVREG_VERSION_NUMBER)

// RouterSalt is the salt (XXH3 seed) Dynamo's KV router uses; hashes made with another salt
// do not match the router's.
const RouterSalt = uint64(C.KVREG_ROUTER_SALT)

// MaxPools is the most live pools one registry can have (KVREG_MAX_POOLS of the header this
// package was compiled against); pool ids are 1..MaxPools.
const MaxPools = int(C.KVREG_MAX_POOLS)

// Optional parts of the library (KVREG_FEATURE_*), chosen when it is built.
const (
	FeatureWire = uint(C.KVREG_FEATURE_WIRE) // Encoder / Decoder (needs msgpack-c)
	FeatureZMQ  = uint(C.KVREG_FEATURE_ZMQ)  // ZeroMQ publisher and subscriber
)

// Features is the bitwise OR of the Feature* built into the loaded library. Without
// FeatureWire, NewEncoder and NewDecoder fail with ErrNotSupported.
func Features() uint { return uint(C.kvreg_features()) }

// Version returns the runtime library's version number (MAJOR*10000 + MINOR*100 + PATCH)
// and string. It can differ from HeaderVersion when the shared library was upgraded.
func Version() (uint, string) {
	return uint(C.kvreg_version_number()), C.GoString(C.kvreg_version_string())
}
