package opencl

import "testing"

// MemStats counts every buffer Alloc makes and the bytes held, which a
// Release (once, however often it is called) gives back; the peak stays.
func TestMemStatsCountsBuffers(t *testing.T) {
	d := openTest(t)
	before := d.MemStats()
	a, err := Alloc[float32](d, 1000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Alloc[uint8](d, 24)
	if err != nil {
		t.Fatal(err)
	}
	got := d.MemStats()
	if got.Allocs != before.Allocs+2 || got.Live != before.Live+4024 || got.Peak < got.Live {
		t.Fatalf("after two buffers of 4000 and 24 bytes: %+v (before %+v)", got, before)
	}
	a.Release()
	a.Release()
	b.Release()
	end := d.MemStats()
	if end.Allocs != got.Allocs || end.Live != before.Live || end.Peak != got.Peak {
		t.Fatalf("after releasing them: %+v, want %d buffers, %d bytes live, peak %d", end, got.Allocs, before.Live, got.Peak)
	}
	if _, err := Alloc[float32](d, 0); err == nil || d.MemStats().Allocs != end.Allocs {
		t.Fatalf("a refused buffer was counted: %+v, %v", d.MemStats(), err)
	}
}
