package engine

import (
	"math"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestELUValues(t *testing.T) {
	for _, tc := range []struct{ x, want, grad float64 }{
		{2.5, 2.5, 1},
		{1e-300, 1e-300, 1},
		{0, 0, 1},
		{-1e-20, -1e-20, 1}, // exp(x)−1 would give 0 here
		{-1, 1/math.E - 1, 1 / math.E},
		{-50, -1, math.Exp(-50)},
	} {
		y := []float64{0}
		eluForward(y, []float64{tc.x})
		if y[0] != tc.want && math.Abs(y[0]-tc.want) > 1e-16 {
			t.Errorf("ELU(%v) = %v, want %v", tc.x, y[0], tc.want)
		}
		dx := []float64{0}
		eluBackward(dx, y, []float64{1})
		if math.Abs(dx[0]-tc.grad) > 1e-15 {
			t.Errorf("ELU'(%v) = %v, want %v", tc.x, dx[0], tc.grad)
		}
	}
}

func TestELUKernelGradFD(t *testing.T) {
	rng := miscRNG(20)
	// Spans several chunks so that the chunk boundaries are exercised.
	x := miscNormals(rng, 3*eluChunk+17, 2)
	for i, v := range x {
		if math.Abs(v) < 1e-4 { // keep finite differences off the kink
			x[i] = 0.5
		}
	}
	r := miscNormals(rng, len(x), 1)
	y := make([]float64, len(x))
	eluForward(y, x)
	dx := make([]float64, len(x))
	eluBackward(dx, y, r)
	// ELU is elementwise: perturbing all elements at once and dividing by
	// r gives every partial derivative from two evaluations.
	h := 1e-6
	xp, xm := make([]float64, len(x)), make([]float64, len(x))
	for i, v := range x {
		xp[i], xm[i] = v+h, v-h
	}
	yp, ym := make([]float64, len(x)), make([]float64, len(x))
	eluForward(yp, xp)
	eluForward(ym, xm)
	fd := make([]float64, len(x))
	for i := range fd {
		fd[i] = r[i] * (yp[i] - ym[i]) / (2 * h)
	}
	miscCompare(t, "dx", dx, fd, 1e-8)
}

func eluGraph(t testing.TB, seed uint64, shape tensor.Shape) *miscGraph {
	rng := miscRNG(seed)
	x := miscNormals(rng, shape.TotalSize(), 1.5)
	for i, v := range x {
		if math.Abs(v) < 1e-4 {
			x[i] = -0.5
		}
	}
	return newMiscGraph(t, rng, []string{"x"}, []*tensor.Dense{miscDense(shape, x)}, 1,
		func(in []*gorgonia.Node) (*gorgonia.Node, error) { return ELU(in[0]) })
}

func TestELUGraphGradFD(t *testing.T) {
	for _, shape := range []tensor.Shape{{7}, {4, 5}, {2, 3, 4}} {
		m := eluGraph(t, 21, shape)
		if s := m.out.Shape(); !s.Eq(shape) {
			t.Fatalf("output shape %v, want %v", s, shape)
		}
		m.checkFD(t, 1e-8)
		m.vals[0].Float64s()[0] *= -1
		m.checkFD(t, 1e-8)
		m.vm.Close()
	}
}

func TestELUScalar(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithValue(-0.7), gorgonia.WithName("x"))
	y, err := ELU(x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(y, x); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(x))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	if got := y.Value().Data().(float64); math.Abs(got-math.Expm1(-0.7)) > 1e-16 {
		t.Fatalf("ELU(-0.7) = %v", got)
	}
	gv, err := x.Grad()
	if err != nil {
		t.Fatal(err)
	}
	if got := gv.Data().(float64); math.Abs(got-math.Exp(-0.7)) > 1e-15 {
		t.Fatalf("ELU'(-0.7) = %v, want %v", got, math.Exp(-0.7))
	}
}

func TestELUDeterministicAcrossProcs(t *testing.T) {
	miscBitIdentical(t, func() [][]float64 {
		// Large enough to pass parallelMinWork.
		m := eluGraph(t, 22, tensor.Shape{100, 1000})
		defer m.vm.Close()
		out, grads := m.gradsAndOutput(t)
		return append([][]float64{out}, grads...)
	})
}

func TestELUErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	if _, err := ELU(nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("nil input: %v", err)
	}
	x32 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 2))
	if _, err := ELU(x32); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Fatalf("float32 input: %v", err)
	}
}

// BenchmarkELU times forward plus backward at the size of the sine
// embedding's hidden layer (25 tasks × 15 points, width 40).
func BenchmarkELU(b *testing.B) {
	shape := tensor.Shape{375, 40}
	xv := miscDense(shape, miscNormals(miscRNG(23), shape.TotalSize(), 1))
	gv := miscDense(shape, miscNormals(miscRNG(24), shape.TotalSize(), 1))
	fwd, bwd := &eluOp{id: opSeq.Add(1)}, &eluGradOp{id: opSeq.Add(1)}
	y, err := fwd.Do(xv)
	if err != nil {
		b.Fatal(err)
	}
	dx, _ := bwd.Do(y, gv)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := fwd.UsePreallocDo(y, xv); err != nil {
			b.Fatal(err)
		}
		if _, err := bwd.UsePreallocDo(dx, y, gv); err != nil {
			b.Fatal(err)
		}
	}
}
