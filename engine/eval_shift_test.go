package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// shiftedBlobs draws blobs episodes of shot/9 support images a class and
// joins each support image with its eight one-pixel shifts, written out
// here independently of shiftSupport: a 9·k-shot source whose evaluation
// must equal the k-shot one with eval_support_shift 1.
type shiftedBlobs struct{ blobs }

func (s shiftedBlobs) Sample(rng *rand.Rand, b *task.Batch) {
	in, out := s.InDim(), s.OutDim()
	var small task.Batch
	small.Resize(b.T, b.NS/9, b.NQ, in, out)
	s.blobs.Sample(rng, &small)
	copy(b.XQ, small.XQ)
	copy(b.YQ, small.YQ)
	j := 0
	for i := range small.T * small.NS {
		for _, d := range [][2]int{{0, 0}, {-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}} {
			img := b.XS[j*in : (j+1)*in]
			for y := range s.side {
				for x := range s.side {
					sy, sx := y-d[0], x-d[1]
					img[y*s.side+x] = 0
					if sy >= 0 && sy < s.side && sx >= 0 && sx < s.side {
						img[y*s.side+x] = small.XS[i*in+sy*s.side+sx]
					}
				}
			}
			copy(b.YS[j*out:(j+1)*out], small.YS[i*out:(i+1)*out])
			j++
		}
	}
}

// An evaluation with eval_support_shift r scores each k-shot episode as
// the k·(2r+1)²-shot episode of its support images and their shifts: the
// same accuracies, task by task, as evaluating those episodes directly;
// and they are not the unshifted evaluation's.
func TestEvalSupportShift(t *testing.T) {
	cfg := classConfig("metakernel", 0.8)
	src := blobs{way: 3, side: 7}
	m, err := NewModel(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	trainSteps(t, m, 20)
	eval := func(src task.Source, shot, shift int) EvalResult {
		t.Helper()
		m.Cfg.Shot, m.Cfg.EvalSupportShift = shot, shift
		ev, err := m.EvaluateOn(src, 40, 3, 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	plain := eval(src, cfg.Shot, 0)
	shifted := eval(src, cfg.Shot, 1)
	direct := eval(shiftedBlobs{src}, 9*cfg.Shot, 0)
	if !slices.Equal(shifted.PerTask, direct.PerTask) {
		t.Errorf("eval_support_shift 1: %v\n9-shot episodes of the shifted images: %v", shifted.PerTask, direct.PerTask)
	}
	if slices.Equal(shifted.PerTask, plain.PerTask) {
		t.Errorf("eval_support_shift 1 scored every task as without it: %v", plain.PerTask)
	}
}

// shiftSupport puts each support image first, then its shifts in row-major
// order of (dy, dx), every copy with its image's target; the queries stay.
func TestShiftSupportLayout(t *testing.T) {
	const h, w, way = 4, 5, 2
	var src, dst task.Batch
	src.Resize(2, 2, 3, h*w, way)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, xs := range [][]float64{src.XS, src.XQ, src.YS, src.YQ} {
		for i := range xs {
			xs[i] = rng.Float64()
		}
	}
	shiftSupport(&dst, &src, h, w, 1, 2)
	if dst.T != 2 || dst.NS != 2*25 || dst.NQ != 3 || !slices.Equal(dst.XQ, src.XQ) || !slices.Equal(dst.YQ, src.YQ) {
		t.Fatalf("shape %d×(%d, %d), or the queries changed", dst.T, dst.NS, dst.NQ)
	}
	in := h * w
	tmp := make([]float64, in)
	for i := range src.T * src.NS {
		x := src.XS[i*in : (i+1)*in]
		k := 0
		for dy := -2; dy <= 2; dy++ {
			for dx := -2; dx <= 2; dx++ {
				want := slices.Clone(x)
				task.ShiftImage(want, tmp, h, w, 1, dy, dx)
				j := i * 25
				if dy != 0 || dx != 0 {
					k++
					j += k
				}
				if !slices.Equal(dst.XS[j*in:(j+1)*in], want) || !slices.Equal(dst.YS[j*way:(j+1)*way], src.YS[i*way:(i+1)*way]) {
					t.Fatalf("support image %d shifted (%d, %d): row %d differs", i, dy, dx, j)
				}
			}
		}
	}
}

// A run with eval_support_shift validates as the run without it (the same
// validations, so the same checkpoint) and tests with the shifted copies:
// its test is what its best checkpoint evaluates to with them.
func TestEvalSupportShiftIsTheTests(t *testing.T) {
	cfg := classConfig("vrf", 0.9)
	cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 40, 20, 12, 10
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 12, 3, 1
	run := func(shift int) (string, Result) {
		t.Helper()
		c := cfg
		c.EvalSupportShift = shift
		dir, res := blobsRun(t, c)
		data, err := os.ReadFile(filepath.Join(dir, FileVal))
		if err != nil {
			t.Fatal(err)
		}
		// The validations without their timings.
		var val string
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var row struct {
				Iter       int
				Mean, CI95 float64
				Best       bool
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatal(err)
			}
			val += fmt.Sprintf("%+v\n", row)
		}
		return val, res
	}
	val0, plain := run(0)
	val1, shifted := run(1)
	if val0 != val1 {
		t.Errorf("validations differ with eval_support_shift 1:\n%s\nwithout:\n%s", val1, val0)
	}
	if shifted.Eval.Mean == plain.Eval.Mean {
		t.Errorf("the test with eval_support_shift 1 is the test without it: %v", plain.Eval)
	}
}
