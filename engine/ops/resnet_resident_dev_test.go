package ops

import (
	"math"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	"gonum.org/v1/gonum/floats"
)

// resResidentTensors is p's convolution weights (the resident tensors).
func resResidentTensors(p *resProblem) [][]float64 {
	var ts [][]float64
	for l := range p.spec.Convs() {
		ts = append(ts, p.params[3*l])
	}
	return ts
}

func resResidentZeros(spec ResNetSpec) [][]float64 {
	var ts [][]float64
	for _, cv := range spec.Convs() {
		ts = append(ts, make([]float64, cv.Out*cv.FanIn()))
	}
	return ts
}

func xferDiff(a, b opencl.Transfers) opencl.Transfers {
	return opencl.Transfers{Writes: b.Writes - a.Writes, WriteBytes: b.WriteBytes - a.WriteBytes, Reads: b.Reads - a.Reads, ReadBytes: b.ReadBytes - a.ReadBytes}
}

// A ResNet kernel whose convolution weights are resident computes, over
// three training steps, part 1's features, input gradient and γ, β and
// linear-layer gradients bit for bit; its weight gradients stay on the
// device (the caller's slices untouched), their square norm is the host's
// within 1e-12, and Adam there leaves the host's weights (bits with
// double masters). What crosses per pass is part 1's traffic less the
// weights (one write of 4 bytes a weight) and their gradients (one read
// of as many): the images, batch norm's per-image sums and coefficients,
// the pooled features and their gradient, the input gradient; per step,
// the norm's one scalar more. An evaluation kernel reading the weights
// gives part 1's features, also after a host write.
func TestResNetResidentMatchesPart1(t *testing.T) {
	dev := testDevice(t)
	spec := resTiny
	c, err := NewResNetResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	p := newResProblem(spec, BNLayout{Episodes: 2, Support: 4, Query: 1}, 21)
	res, ref := newResDevKernelOn(t, dev, spec), newResDevKernelOn(t, dev, spec)
	if err := c.attach(res, false); err != nil {
		t.Fatal(err)
	}
	m, v := resResidentZeros(spec), resResidentZeros(spec)
	if err := c.Upload(resResidentTensors(p), m, v); err != nil {
		t.Fatal(err)
	}
	L := len(spec.Convs())
	for it := 1; it <= 3; it++ {
		before := dev.Transfers()
		out, grads, gx := p.run(t, res, BNTrain)
		mid := dev.Transfers()
		sq, err := c.GradNormSq()
		if err != nil {
			t.Fatal(err)
		}
		const lr, b1, b2 = 1e-2, 0.9, 0.999
		step := lr * math.Sqrt(1-math.Pow(b2, float64(it))) / (1 - math.Pow(b1, float64(it)))
		steps := make([]AdamStep, L)
		for l := range steps {
			steps[l] = AdamStep{Scale: 0.5, Step: step, B1: b1, B2: b2, Eps: 1e-8, Factor: 1 - lr*0.01, Decay: true}
		}
		if err := c.Adam(steps); err != nil {
			t.Fatal(err)
		}
		after := dev.Transfers()
		pass, upd := xferDiff(before, mid), xferDiff(mid, after)

		refBefore := dev.Transfers()
		want, wgrads, wgx := p.run(t, ref, BNTrain)
		refPass := xferDiff(refBefore, dev.Transfers())
		t.Logf("step %d: resident pass %+v, update %+v; part 1's pass %+v", it, pass, upd, refPass)
		wb := 4 * int64(c.n)
		if pass.Writes != refPass.Writes-1 || pass.WriteBytes != refPass.WriteBytes-wb || pass.Reads != refPass.Reads-1 || pass.ReadBytes != refPass.ReadBytes-wb {
			t.Errorf("step %d: the resident pass moved %+v, part 1's %+v: want one write and one read of %d bytes fewer", it, pass, refPass, wb)
		}
		norm := int64(8)
		if !c.FP64() {
			norm = 4
		}
		if upd != (opencl.Transfers{Reads: 1, ReadBytes: norm}) {
			t.Errorf("step %d: the norm and the update moved %+v, want one read of %d bytes", it, upd, norm)
		}
		if !slices.Equal(out, want) || !slices.Equal(gx, wgx) {
			t.Fatalf("step %d: the features or the input gradient differ from part 1's", it)
		}
		var hsq float64
		for l := range L {
			if slices.ContainsFunc(grads[3*l], func(x float64) bool { return x != 0 }) {
				t.Fatalf("step %d: a resident backward wrote the caller's weight gradient %d", it, l)
			}
			if !slices.Equal(grads[3*l+1], wgrads[3*l+1]) || !slices.Equal(grads[3*l+2], wgrads[3*l+2]) {
				t.Fatalf("step %d: batch norm %d's gradients differ from part 1's", it, l)
			}
			hsq += floats.Dot(wgrads[3*l], wgrads[3*l])
		}
		if !slices.Equal(grads[3*L], wgrads[3*L]) || !slices.Equal(grads[3*L+1], wgrads[3*L+1]) {
			t.Fatalf("step %d: the linear layer's gradients differ from part 1's", it)
		}
		if math.Abs(sq-hsq) > 1e-12*hsq {
			t.Fatalf("step %d: device square norm %v, host %v", it, sq, hsq)
		}
		host := resResidentTensors(p)
		for l := range L {
			residentHostAdam(host[l], wgrads[3*l], m[l], v[l], steps[l])
		}
		got, gm, gv := resResidentZeros(spec), resResidentZeros(spec), resResidentZeros(spec)
		if err := c.Download(got, gm, gv); err != nil {
			t.Fatal(err)
		}
		if c.FP64() {
			residentCompare(t, "weights", true, got, host)
			residentCompare(t, "moments", true, gv, v)
		} else {
			for l := range L {
				copy(p.params[3*l], got[l])
			}
		}
	}

	// An evaluation kernel on the host's (downloaded) values, then on a
	// value changed on the host.
	rd := newResDevKernelOn(t, dev, spec)
	if err := c.attach(rd, true); err != nil {
		t.Fatal(err)
	}
	var xs []opencl.Transfers
	for _, what := range []string{"the downloaded weights", "a host write"} {
		if what == "a host write" {
			p.params[3][2] += 0.125
		}
		before := dev.Transfers()
		got := p.forward(t, rd, BNEpisode)
		xs = append(xs, xferDiff(before, dev.Transfers()))
		want := p.forward(t, ref, BNEpisode)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the evaluation's features differ from part 1's", what)
		}
		t.Logf("%s: the evaluation pass moved %+v", what, xs[len(xs)-1])
	}
	masters := int64(8 * c.n)
	if !c.FP64() {
		masters = int64(4 * c.n)
	}
	if d := xferDiff(xs[0], xs[1]); d != (opencl.Transfers{Writes: 1, WriteBytes: masters}) {
		t.Errorf("the pass after a host write moved %+v more than one on unchanged weights, want the masters' one write of %d bytes", d, masters)
	}
	if err := rd.Backward(p.r, resResidentZeros(spec), nil); err == nil {
		t.Error("an evaluation kernel took a gradient")
	}
}
