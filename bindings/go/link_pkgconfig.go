//go:build !kvreg_nopkgconfig

package kvreg

// How cgo finds libkvreg by default: `pkg-config kvreg` (its kvreg.pc gives -I, -L, -lkvreg
// and, for a private prefix, a RUNPATH). Without pkg-config, or to use a library it does not
// know, build with -tags kvreg_nopkgconfig (link_default.go).

/*
#cgo pkg-config: kvreg
*/
import "C"
