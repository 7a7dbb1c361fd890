package opencl

import "sync/atomic"

// MemStats counts a Device's buffers: how many Alloc made, and the bytes
// they hold now and held at most. Nothing else allocates device memory
// through this package (programs and kernels aside), so Live is what the
// process holds on the device; tests and the memory estimate's
// calibration read it.
type MemStats struct {
	Allocs     int64 // buffers made so far
	Live, Peak int64 // bytes held now, and at most
}

type memCounter struct {
	allocs, live, peak atomic.Int64
}

func (c *memCounter) add(bytes int64) {
	if bytes > 0 {
		c.allocs.Add(1)
	}
	live := c.live.Add(bytes)
	for {
		p := c.peak.Load()
		if live <= p || c.peak.CompareAndSwap(p, live) {
			return
		}
	}
}

// MemStats is what d's buffers hold (see MemStats).
func (d *Device) MemStats() MemStats {
	return MemStats{Allocs: d.mem.allocs.Load(), Live: d.mem.live.Load(), Peak: d.mem.peak.Load()}
}
