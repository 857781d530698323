package kvreg

import (
	"errors"
	"testing"
)

// One hash held by a GPU pool and a CPU pool, then released from GPU, then from CPU: the
// global mode gives one Register and one Remove (with the Register's medium, GPU), the
// per-tier mode a Register and a Remove for each medium, the CPU copy outliving the GPU one.
func TestEventModeOption(t *testing.T) {
	type ev struct {
		kind   EventKind
		medium Medium
	}
	cases := []struct {
		mode EventMode
		want []ev
	}{
		{EventsGlobal, []ev{{EventRegister, MediumGPU}, {EventRemove, MediumGPU}}},
		{EventsPerTier, []ev{{EventRegister, MediumGPU}, {EventRegister, MediumCPU},
			{EventRemove, MediumGPU}, {EventRemove, MediumCPU}}},
	}
	for _, c := range cases {
		r := newReg(t, &Options{EventMode: c.mode})
		gpu := newPool(t, r, "gpu")
		cpu, err := r.NewPoolMedium("cpu", MediumCPU)
		if err != nil {
			t.Fatal(err)
		}
		g := mustRegister(t, gpu, byHash(7))
		k := mustRegister(t, cpu, byHash(7))
		if err := gpu.Release(g); err != nil {
			t.Fatal(err)
		}
		if err := cpu.Release(k); err != nil {
			t.Fatal(err)
		}
		got := pollAll(t, r)
		if len(got) != len(c.want) {
			t.Fatalf("mode %d: %d events (%+v), want %d", c.mode, len(got), got, len(c.want))
		}
		for i, w := range c.want {
			if got[i].Kind != w.kind || got[i].Medium != w.medium || got[i].SequenceHash != 7 {
				t.Errorf("mode %d: event %d = %+v, want %v on %v", c.mode, i, got[i], w.kind,
					w.medium)
			}
		}
		cpu.Close()
	}
	if _, err := NewRegistry(&Options{EventMode: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown event mode: err = %v, want ErrInvalid", err)
	}
}
