package ops

import (
	"math"
	"slices"
	"testing"
)

// TestConvMemo: with the memo on, an evaluation run whose images and
// parameters are the last run's returns that run's features without a
// pass; a change of one bit of the images or of a parameter, a training
// run, or the memo turned off, runs the kernel, and every output is the
// direct kernel's.
func TestConvMemo(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 12, Width: 12, Blocks: 3, Filters: 6, Keep: 0.8}
	p := newConvProblem(spec, 4, 21)
	cg := newConvGraph(t, p)
	vm := cg.machine()
	defer vm.Close()
	run := func() []float64 {
		t.Helper()
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		cg.grads(t)
		return slices.Clone(cg.out.Value().Data().([]float64))
	}
	// want is the direct kernel's output on the graph's current inputs.
	want := func(seed uint64, train bool) []float64 {
		t.Helper()
		q := &convProblem{spec: spec, N: p.N, x: slices.Clone(cg.tx.Float64s()), r: p.r}
		for l := range spec.Blocks {
			q.ws = append(q.ws, slices.Clone(cg.tws[l].Float64s()))
			q.bs = append(q.bs, slices.Clone(cg.tbs[l].Float64s()))
		}
		return q.forward(t, newConvKernelPrec(t, spec, false), seed, train)
	}
	check := func(step string, hits int, seed uint64, train bool) {
		t.Helper()
		out := run()
		if cg.op.memo.hits != hits {
			t.Errorf("%s: %d passes skipped, want %d", step, cg.op.memo.hits, hits)
		}
		if !slices.Equal(out, want(seed, train)) {
			t.Errorf("%s: features differ from the kernel's", step)
		}
	}
	cg.net.SetMemo(true)
	cg.net.SetStep(0, false)
	check("first evaluation", 0, 0, false)
	check("the same inputs", 1, 0, false)
	check("the same inputs again", 2, 0, false)
	w := cg.tws[1].Float64s()
	w[3] = math.Nextafter(w[3], math.Inf(1))
	check("one weight one ulp up", 2, 0, false)
	check("then the same inputs", 3, 0, false)
	cg.tx.Float64s()[7] = -cg.tx.Float64s()[7]
	check("one pixel negated", 3, 0, false)
	cg.tbs[0].Float64s()[0] = 0
	check("a bias set to +0", 3, 0, false)
	// −0 and +0 compare equal but are other bits: no hit.
	cg.tbs[0].Float64s()[0] = math.Copysign(0, -1)
	check("the bias set to −0", 3, 0, false)
	cg.net.SetStep(9, true)
	check("training", 3, 9, true)
	check("training again", 3, 9, true)
	cg.net.SetStep(0, false)
	check("evaluation after training", 3, 0, false)
	check("and again", 4, 0, false)
	cg.net.SetMemo(false)
	check("memo off", 4, 0, false)
	if cg.op.memo.ok || cg.op.memo.out != nil {
		t.Error("the memo still holds features after SetMemo(false)")
	}
	cg.net.SetMemo(true)
	check("memo on again", 4, 0, false)
	check("and the same inputs", 5, 0, false)
}

// TestResNetMemo: the ResNet op skips a pass outside BNTrain when its
// images, parameters, mode and (in BNRunning) running statistics are the
// last pass's, never in BNTrain, and always yields the kernel's features.
func TestResNetMemo(t *testing.T) {
	s := ResNetSpec{Channels: 3, Height: 16, Width: 16, Widths: [4]int{4, 4, 8, 8}, Out: 5}
	lay := BNLayout{Episodes: 2, Support: 3, Query: 2}
	p := newResProblem(s, lay, 8)
	rg := newResGraph(t, p)
	defer rg.vm.Close()
	rg.net.SetMemo(true)
	check := func(step string, mode BNMode, hits int) {
		t.Helper()
		rg.net.SetMode(mode)
		out, _ := rg.step(t)
		if rg.op.memo.hits != hits {
			t.Errorf("%s: %d passes skipped, want %d", step, rg.op.memo.hits, hits)
		}
		q := &resProblem{spec: s, lay: lay, x: p.x, params: p.params, stats: cloneStats(p.stats), r: p.r}
		if !slices.Equal(out, q.forward(t, newResKernel(t, s, false), mode)) {
			t.Errorf("%s: features differ from the kernel's", step)
		}
	}
	check("episode", BNEpisode, 0)
	check("episode again", BNEpisode, 1)
	check("running", BNRunning, 1)
	check("running again", BNRunning, 2)
	p.stats[0].Var[1] *= 2
	check("running, one variance changed", BNRunning, 2)
	check("running again", BNRunning, 3)
	p.params[2][0] += 0.5
	check("running, a parameter changed", BNRunning, 3)
	check("train", BNTrain, 3)
	check("train again", BNTrain, 3)
	check("episode after training", BNEpisode, 3)
	check("episode again", BNEpisode, 4)
}
