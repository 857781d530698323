package kvreg_test

import (
	"fmt"

	kvreg "github.com/libkvreg/libkvreg/bindings/go"
)

// The README example, kept compiling and checked by go test.
func Example() {
	reg, _ := kvreg.NewRegistry(nil) // events are queued for Poll
	defer reg.Close()                // frees the registry and every pool
	gpu, _ := reg.NewPool("gpu")
	blocks, _ := kvreg.HashBlocks([]uint32{1, 2, 3, 4, 5, 6, 7, 8}, 4, kvreg.RouterSalt)
	b, err := gpu.Register(blocks[0].Desc(nil)) // errors.Is(err, kvreg.ErrExist) if held
	fmt.Println(err)
	n, _ := gpu.MatchPrefix([]uint64{blocks[0].SequenceHash, blocks[1].SequenceHash})
	fmt.Println(n)
	_ = gpu.Release(b) // the last reference: a Remove event
	events, _ := reg.Poll(100)
	for _, ev := range events {
		fmt.Println(ev.ID, ev.Kind, ev.SequenceHash == blocks[0].SequenceHash)
	}
	// Output:
	// <nil>
	// 1
	// 0 Register true
	// 1 Remove true
}
