//go:build kvreg_nopkgconfig

package kvreg

// -tags kvreg_nopkgconfig: no pkg-config; -lkvreg from the compiler's and linker's default
// paths (a system install), or from the directory named in CGO_CFLAGS / CGO_LDFLAGS, e.g.
//   CGO_CFLAGS=-I$P/include CGO_LDFLAGS="-L$LIB -Wl,-rpath,$LIB" go build -tags kvreg_nopkgconfig

/*
#cgo LDFLAGS: -lkvreg
*/
import "C"
