package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lstmGraph is one LSTMSeq (or a forward/reverse pair sharing x, with
// outputs concatenated) inside a gorgonia graph with loss Σ out⊙R.
type lstmGraph struct {
	g        *gorgonia.ExprGraph
	xin      *gorgonia.Node // graph input; x = xin, or tanh(xin) if squash
	params   []*gorgonia.Node
	paramVal [][]float64
	out      *gorgonia.Node
	loss     *gorgonia.Node
	ops      []*LSTMOp
	vm       gorgonia.VM
	wrt      gorgonia.Nodes
}

func lstmDense(data []float64, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// newLSTMGraph builds the graph for problems ps (one direction each) sharing
// x = ps[0].x. With sumLoss the loss is Σ out instead of Σ out⊙R.
func newLSTMGraph(t testing.TB, ps []*lstmProblem, squash, sumLoss bool) *lstmGraph {
	t.Helper()
	p0 := ps[0]
	lg := &lstmGraph{g: gorgonia.NewGraph()}
	g := lg.g
	lg.xin = gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(p0.T, p0.in), gorgonia.WithName("x"),
		gorgonia.WithValue(lstmDense(p0.x, p0.T, p0.in)))
	lg.params = append(lg.params, lg.xin)
	lg.paramVal = append(lg.paramVal, p0.x)
	x := lg.xin
	if squash {
		x = gorgonia.Must(gorgonia.Tanh(lg.xin))
	}
	var outs gorgonia.Nodes
	var rs []float64
	for i, p := range ps {
		w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(p.in+p.hid, 4*p.hid), gorgonia.WithName(fmt.Sprintf("w%d", i)),
			gorgonia.WithValue(lstmDense(p.w, p.in+p.hid, 4*p.hid)))
		b := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(4*p.hid), gorgonia.WithName(fmt.Sprintf("b%d", i)),
			gorgonia.WithValue(lstmDense(p.b, 4*p.hid)))
		h0 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(p.hid), gorgonia.WithName(fmt.Sprintf("h0_%d", i)),
			gorgonia.WithValue(lstmDense(p.h0, p.hid)))
		c0 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(p.hid), gorgonia.WithName(fmt.Sprintf("c0_%d", i)),
			gorgonia.WithValue(lstmDense(p.c0, p.hid)))
		out, op, err := LSTMSeq(x, w, b, h0, c0, p.reverse)
		if err != nil {
			t.Fatal(err)
		}
		lg.ops = append(lg.ops, op)
		outs = append(outs, out)
		lg.params = append(lg.params, w, b)
		lg.paramVal = append(lg.paramVal, p.w, p.b)
		rs = append(rs, p.r...)
	}
	lg.out = outs[0]
	if len(outs) > 1 {
		lg.out = gorgonia.Must(gorgonia.Concat(1, outs...))
		// R for the concatenation: row t is [r_0 row t, r_1 row t, ...].
		rs = rs[:0]
		for tt := 0; tt < p0.T; tt++ {
			for _, p := range ps {
				rs = append(rs, p.r[tt*p.hid:(tt+1)*p.hid]...)
			}
		}
	}
	if sumLoss {
		lg.loss = gorgonia.Must(gorgonia.Sum(lg.out))
	} else {
		r := gorgonia.NewConstant(lstmDense(rs, lg.out.Shape()...), gorgonia.WithName("R"))
		lg.loss = gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(lg.out, r))))
	}
	lg.wrt = lg.params
	if _, err := gorgonia.Grad(lg.loss, lg.wrt...); err != nil {
		t.Fatal(err)
	}
	lg.vm = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(lg.wrt...))
	return lg
}

func (lg *lstmGraph) run(t testing.TB) float64 {
	t.Helper()
	lg.vm.Reset()
	if err := lg.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return lg.loss.Value().Data().(float64)
}

// grads runs once on a fresh machine (gradients accumulate across runs) and
// returns copies of the parameter gradients.
func (lg *lstmGraph) grads(t testing.TB) [][]float64 {
	t.Helper()
	lg.vm.Close()
	lg.vm = gorgonia.NewTapeMachine(lg.g, gorgonia.BindDualValues(lg.wrt...))
	lg.run(t)
	var gs [][]float64
	for _, n := range lg.params {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, append([]float64{}, gv.Data().([]float64)...))
	}
	return gs
}

func TestLSTMSeqGraphGradFD(t *testing.T) {
	for i, sz := range lstmSizes {
		for _, rev := range []bool{false, true} {
			for _, sumLoss := range []bool{false, true} {
				name := fmt.Sprintf("T%d_in%d_hid%d_rev%t_sum%t", sz.T, sz.in, sz.hid, rev, sumLoss)
				t.Run(name, func(t *testing.T) {
					p := newLSTMProblem(uint64(40+i), sz.T, sz.in, sz.hid, rev)
					if sumLoss {
						for j := range p.r {
							p.r[j] = 1
						}
					}
					lg := newLSTMGraph(t, []*lstmProblem{p}, false, sumLoss)
					defer lg.vm.Close()
					gs := lg.grads(t)

					// The graph must reproduce the kernel exactly.
					dx, dw, db := p.grads()
					if p.loss() != lg.loss.Value().Data().(float64) {
						t.Errorf("graph loss %v, kernel loss %v", lg.loss.Value().Data(), p.loss())
					}
					if lstmMaxDiff(p.hbuf, lg.out.Value().Data().([]float64)) != 0 {
						t.Errorf("graph output differs from kernel")
					}
					for k, want := range [][]float64{dx, dw, db} {
						if d := lstmMaxDiff(gs[k], want); d != 0 {
							t.Errorf("graph gradient of %v differs from kernel by %g", lg.params[k].Name(), d)
						}
					}
					for k, n := range lg.params {
						lstmCheckGrad(t, n.Name(), gs[k], fdGrad(lg.paramVal[k], func() float64 { return lg.run(t) }))
					}
				})
			}
		}
	}
}

// TestLSTMSeqBidirectionalGraph checks the bidirectional arrangement: two
// LSTMSeq nodes (forward and reverse) over the same x = tanh(xin), outputs
// concatenated along axis 1.
func TestLSTMSeqBidirectionalGraph(t *testing.T) {
	const T, in, hid = 5, 3, 4
	pf := newLSTMProblem(51, T, in, hid, false)
	pb := newLSTMProblem(52, T, in, hid, true)
	pb.x = pf.x
	lg := newLSTMGraph(t, []*lstmProblem{pf, pb}, true, false)
	defer lg.vm.Close()
	gs := lg.grads(t)
	if got := lg.out.Shape(); !got.Eq(tensor.Shape{T, 2 * hid}) {
		t.Fatalf("output shape %v", got)
	}

	// Kernel reference: both directions on tanh(xin), dx summed.
	xin := append([]float64{}, pf.x...)
	sq := make([]float64, len(xin))
	for i, v := range xin {
		sq[i] = math.Tanh(v)
	}
	pf.x, pb.x = sq, sq
	fdx, fdw, fdb := pf.grads()
	bdx, bdw, bdb := pb.grads()
	pf.x, pb.x = xin, xin
	dxin := make([]float64, len(xin))
	for i := range dxin {
		dxin[i] = (fdx[i] + bdx[i]) * (1 - sq[i]*sq[i])
	}
	for k, want := range [][]float64{dxin, fdw, fdb, bdw, bdb} {
		if d := lstmMaxDiff(gs[k], want); d > 1e-13 {
			t.Errorf("gradient of %v differs from kernel reference by %g", lg.params[k].Name(), d)
		}
	}
	for k, n := range lg.params {
		lstmCheckGrad(t, n.Name(), gs[k], fdGrad(lg.paramVal[k], func() float64 { return lg.run(t) }))
	}
}

// TestLSTMSeqCarriedState runs two batches through one graph, feeding the
// FinalState of the first as (h0, c0) of the second, and compares with one
// kernel run over both batches.
func TestLSTMSeqCarriedState(t *testing.T) {
	for _, rev := range []bool{false, true} {
		t.Run(fmt.Sprintf("rev%t", rev), func(t *testing.T) {
			const T, in, hid = 4, 3, 5
			whole := newLSTMProblem(61, 2*T, in, hid, rev)
			p := newLSTMProblem(61, T, in, hid, rev)
			p.w, p.b, p.h0, p.c0 = whole.w, whole.b, whole.h0, whole.c0
			first, second := whole.x[:T*in], whole.x[T*in:]
			if rev {
				first, second = second, first
			}
			copy(p.x, first)
			lg := newLSTMGraph(t, []*lstmProblem{p}, false, false)
			defer lg.vm.Close()
			op := lg.ops[0]
			lg.run(t)
			h1 := append([]float64{}, lg.out.Value().Data().([]float64)...)
			hc, cc := op.FinalState()

			if err := gorgonia.Let(lg.g.ByName("h0_0")[0], lstmDense(hc, hid)); err != nil {
				t.Fatal(err)
			}
			if err := gorgonia.Let(lg.g.ByName("c0_0")[0], lstmDense(cc, hid)); err != nil {
				t.Fatal(err)
			}
			if err := gorgonia.Let(lg.xin, lstmDense(append([]float64{}, second...), T, in)); err != nil {
				t.Fatal(err)
			}
			lg.run(t)
			h2 := lg.out.Value().Data().([]float64)
			got := append(append([]float64{}, h1...), h2...)
			if rev {
				got = append(append([]float64{}, h2...), h1...)
			}
			whole.loss()
			if d := lstmMaxDiff(got, whole.hbuf); d > 1e-14 {
				t.Errorf("carried-state outputs differ from a single run by %g", d)
			}
			gh, gc := op.FinalState()
			wh, wc := whole.cache.FinalState()
			if lstmMaxDiff(gh, wh) > 1e-14 || lstmMaxDiff(gc, wc) > 1e-14 {
				t.Errorf("final state differs from a single run")
			}
		})
	}
}

// TestLSTMSeqGOMAXPROCS checks that outputs and gradients are bit-identical
// with one and two procs, at a size where gonum's GEMM goes parallel.
func TestLSTMSeqGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var ref [][]float64
	for _, procs := range []int{1, 2, 1} {
		runtime.GOMAXPROCS(procs)
		pf := newLSTMProblem(71, 6, 256, 256, false)
		pb := newLSTMProblem(72, 6, 256, 256, true)
		pb.x = pf.x
		lg := newLSTMGraph(t, []*lstmProblem{pf, pb}, true, false)
		gs := lg.grads(t)
		gs = append(gs, append([]float64{}, lg.out.Value().Data().([]float64)...))
		lg.vm.Close()
		if ref == nil {
			ref = gs
			continue
		}
		for k := range gs {
			for i := range gs[k] {
				if gs[k][i] != ref[k][i] {
					t.Fatalf("GOMAXPROCS=%d: result %d differs at %d: %v vs %v", procs, k, i, gs[k][i], ref[k][i])
				}
			}
		}
	}
}

func TestLSTMSeqErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	m := func(dt tensor.Dtype, r, c int) *gorgonia.Node {
		return gorgonia.NewMatrix(g, dt, gorgonia.WithShape(r, c))
	}
	v := func(dt tensor.Dtype, n int) *gorgonia.Node {
		return gorgonia.NewVector(g, dt, gorgonia.WithShape(n))
	}
	f64 := tensor.Float64
	const T, in, hid = 3, 2, 4
	x, w, b, h0, c0 := m(f64, T, in), m(f64, in+hid, 4*hid), v(f64, 4*hid), v(f64, hid), v(f64, hid)
	if _, _, err := LSTMSeq(x, w, b, h0, c0, false); err != nil {
		t.Fatalf("valid inputs: %v", err)
	}
	cases := []struct {
		name            string
		x, w, b, h0, c0 *gorgonia.Node
		want            string
	}{
		{"float32 x", m(tensor.Float32, T, in), w, b, h0, c0, "dtype"},
		{"nil w", x, nil, b, h0, c0, "nil"},
		{"vector x", v(f64, in), w, b, h0, c0, "x has shape"},
		{"w rows", x, m(f64, in+hid+1, 4*hid), b, h0, c0, "w has shape"},
		{"w cols", x, m(f64, in+hid, 3*hid), b, h0, c0, "w has shape"},
		{"b size", x, w, v(f64, hid), h0, c0, "b has shape"},
		{"b matrix", x, w, m(f64, 1, 4*hid), h0, c0, "b has shape"},
		{"c0 size", x, w, b, h0, v(f64, hid+1), "c0 has shape"},
		{"h0 matrix", x, w, b, m(f64, 1, hid), c0, "h0 has shape"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := LSTMSeq(c.x, c.w, c.b, c.h0, c.c0, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func BenchmarkLSTMSeq(b *testing.B) {
	for _, sz := range []struct{ T, in, hid int }{{25, 40, 40}, {6, 256, 256}} {
		name := fmt.Sprintf("T%d_in%d_hid%d", sz.T, sz.in, sz.hid)
		b.Run("kernel/"+name, func(b *testing.B) {
			p := newLSTMProblem(1, sz.T, sz.in, sz.hid, false)
			dx, dw, db := make([]float64, len(p.x)), make([]float64, len(p.w)), make([]float64, len(p.b))
			var cache LSTMCache
			b.ReportAllocs()
			for b.Loop() {
				LSTMForward(&cache, p.x, p.w, p.b, p.h0, p.c0, p.T, p.in, p.hid, false, p.hbuf)
				LSTMBackward(&cache, p.x, p.w, p.r, dx, dw, db)
			}
		})
		b.Run("graph/"+name, func(b *testing.B) {
			p := newLSTMProblem(1, sz.T, sz.in, sz.hid, false)
			lg := newLSTMGraph(b, []*lstmProblem{p}, false, false)
			defer lg.vm.Close()
			b.ReportAllocs()
			for b.Loop() {
				lg.run(b)
			}
		})
	}
}

// TestLSTMInputLayouts checks that values reach the kernels in row-major
// order whatever their layout: contiguous, column-slice view, transposed
// view, or a gorgonia scalar standing for a constant gradient.
func TestLSTMInputLayouts(t *testing.T) {
	base := make([]float64, 12)
	for i := range base {
		base[i] = float64(i)
	}
	full := lstmDense(append([]float64{}, base...), 3, 4)

	colView, err := full.Slice(nil, tensor.S(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	trans := lstmDense(append([]float64{}, base...), 3, 4)
	if err := trans.T(); err != nil {
		t.Fatal(err)
	}
	scalar := gorgonia.F64(2.5)

	cases := []struct {
		name string
		v    gorgonia.Value
		want []float64
	}{
		{"contiguous", full, base},
		{"column view", colView.(*tensor.Dense), []float64{1, 2, 5, 6, 9, 10}},
		{"transposed", trans, []float64{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"scalar", &scalar, []float64{2.5, 2.5, 2.5}},
		{"scalar tensor", tensor.New(tensor.FromScalar(1.5)), []float64{1.5, 1.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var scratch []float64
			got, err := lstmInput(c.v, len(c.want), &scratch)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	var scratch []float64
	if _, err := lstmInput(full, 11, &scratch); err == nil {
		t.Errorf("wrong size accepted")
	}
	if _, err := lstmInput(tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2})), 2, &scratch); err == nil {
		t.Errorf("float32 accepted")
	}
}

// TestLSTMSeqSlicedInput feeds LSTMSeq a column slice of a larger input and
// checks output and gradients (which flow back through the slice) against
// the kernel on the sliced data.
func TestLSTMSeqSlicedInput(t *testing.T) {
	const T, in, hid, extra = 4, 3, 2, 2
	p := newLSTMProblem(81, T, in, hid, false)
	rng := rand.New(rand.NewPCG(82, 0))
	wide := lstmRandSlice(rng, T*(in+extra), 1)
	for r := 0; r < T; r++ {
		copy(p.x[r*in:(r+1)*in], wide[r*(in+extra)+1:r*(in+extra)+1+in])
	}
	g := gorgonia.NewGraph()
	xw := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(T, in+extra), gorgonia.WithName("xw"),
		gorgonia.WithValue(lstmDense(wide, T, in+extra)))
	x := gorgonia.Must(gorgonia.Slice(xw, nil, gorgonia.S(1, 1+in)))
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(in+hid, 4*hid), gorgonia.WithName("w"),
		gorgonia.WithValue(lstmDense(p.w, in+hid, 4*hid)))
	b := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(4*hid), gorgonia.WithName("b"),
		gorgonia.WithValue(lstmDense(p.b, 4*hid)))
	// Unnamed input nodes of equal type and shape would be merged into one.
	h0 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(hid), gorgonia.WithName("h0"),
		gorgonia.WithValue(lstmDense(p.h0, hid)))
	c0 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(hid), gorgonia.WithName("c0"),
		gorgonia.WithValue(lstmDense(p.c0, hid)))
	out, _, err := LSTMSeq(x, w, b, h0, c0, false)
	if err != nil {
		t.Fatal(err)
	}
	r := gorgonia.NewConstant(lstmDense(p.r, T, hid))
	loss := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, r))))
	if _, err := gorgonia.Grad(loss, xw, w, b); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(xw, w, b))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	p.loss()
	if d := lstmMaxDiff(out.Value().Data().([]float64)[:T*hid], p.hbuf); d != 0 {
		t.Errorf("output differs from kernel by %g", d)
	}
	dx, dw, _ := p.grads()
	gv, err := xw.Grad()
	if err != nil {
		t.Fatal(err)
	}
	dwide := gv.Data().([]float64)
	for rr := 0; rr < T; rr++ {
		for j := 0; j < in+extra; j++ {
			want := 0.0
			if j >= 1 && j < 1+in {
				want = dx[rr*in+j-1]
			}
			if got := dwide[rr*(in+extra)+j]; got != want {
				t.Errorf("d xw[%d,%d] = %g, want %g", rr, j, got, want)
			}
		}
	}
	gw, err := w.Grad()
	if err != nil {
		t.Fatal(err)
	}
	if d := lstmMaxDiff(gw.Data().([]float64), dw); d != 0 {
		t.Errorf("dw differs from kernel by %g", d)
	}
}

// TestLSTMOpGuards covers the op's refusals: a second SymDiff, and output
// buffers of the wrong shape (which the tape machine answers by calling Do).
func TestLSTMOpGuards(t *testing.T) {
	p := newLSTMProblem(91, 3, 2, 4, false)
	lg := newLSTMGraph(t, []*lstmProblem{p}, false, false)
	defer lg.vm.Close()
	op := lg.ops[0]
	var in gorgonia.Nodes
	for _, name := range []string{"x", "w0", "b0", "h0_0", "c0_0"} {
		in = append(in, lg.g.ByName(name)[0])
	}
	if _, err := op.SymDiff(in, lg.out, lg.out); err == nil || !strings.Contains(err.Error(), "already differentiated") {
		t.Errorf("second SymDiff: err = %v", err)
	}
	vals := make([]gorgonia.Value, len(in))
	for i, n := range in {
		vals[i] = n.Value()
	}
	wrong := tensor.New(tensor.WithShape(p.hid, p.T), tensor.Of(tensor.Float64))
	if _, err := op.UsePreallocDo(wrong, vals...); err == nil {
		t.Errorf("transposed output buffer accepted")
	}
	if _, err := op.UsePreallocDo(tensor.New(tensor.WithShape(p.T, p.hid), tensor.Of(tensor.Float32)), vals...); err == nil {
		t.Errorf("float32 output buffer accepted")
	}
	v, err := op.Do(vals...)
	if err != nil {
		t.Fatal(err)
	}
	p.loss()
	if d := lstmMaxDiff(v.Data().([]float64), p.hbuf); d != 0 {
		t.Errorf("Do differs from kernel by %g", d)
	}
}
