package ops

import "testing"

// ConvDeviceBytes and ResNetDeviceBytes are what one training pass on a
// fresh pool holds on the device, to the byte: the memory estimate counts
// what the cores allocate.
func TestDeviceBytesMatchMeasured(t *testing.T) {
	for _, c := range []struct {
		name string
		spec ConvSpec
		N    int
	}{
		{"small", arenaSpec, 7},
		{"conv4-omniglot", ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}, 10},
		{"floor-5x5", ConvSpec{Channels: 2, Height: 5, Width: 5, Blocks: 2, Filters: 8, Keep: 0.8, FloorPool: true}, 3},
	} {
		dev := testDevice(t) // its own: the cases before may release theirs meanwhile
		pool := &Pool{}
		pool.SetDevice(dev)
		k, err := NewConvKernel(pool, c.spec)
		if err != nil {
			t.Fatal(err)
		}
		before := dev.MemStats().Live
		newConvProblem(c.spec, c.N, 1).run(t, k, 1, true)
		if got, want := dev.MemStats().Live-before, ConvDeviceBytes(c.spec, c.N); float64(got) != want {
			t.Errorf("%s, %d images: the pass holds %d bytes, ConvDeviceBytes says %.0f", c.name, c.N, got, want)
		}
	}
	for _, c := range []struct {
		name string
		spec ResNetSpec
		lay  BNLayout
	}{
		{"small", ResNetSpec{Channels: 3, Height: 16, Width: 16, Widths: [4]int{4, 4, 8, 8}, Out: 4}, BNLayout{Episodes: 1, Support: 5, Query: 3}},
		{"48x48", resDevSmall, BNLayout{Episodes: 2, Support: 3, Query: 1}},
	} {
		dev := testDevice(t) // its own: the cases before may release theirs meanwhile
		pool := &Pool{}
		pool.SetDevice(dev)
		k, err := NewResNetKernel(pool, c.spec)
		if err != nil {
			t.Fatal(err)
		}
		p := newResProblem(c.spec, c.lay, 2)
		before := dev.MemStats().Live
		p.forward(t, k, BNTrain)
		var grads [][]float64
		for _, ps := range p.params {
			grads = append(grads, make([]float64, len(ps)))
		}
		if err := k.Backward(p.r, grads, nil); err != nil { // the engine's: no input gradient
			t.Fatal(err)
		}
		if got, want := dev.MemStats().Live-before, ResNetDeviceBytes(c.spec, c.lay.Images()); float64(got) != want {
			t.Errorf("%s, %d images: the pass holds %d bytes, ResNetDeviceBytes says %.0f", c.name, c.lay.Images(), got, want)
		}
	}
}
