package ui

import "testing"

func BenchmarkPanes(b *testing.B) {
	t := testTheme()
	cd := fakeCurves()
	disp := fakeDisplay(5)
	b.Run("curves", func(b *testing.B) {
		for range b.N {
			curvesPane(t, cd, 78, 19)
		}
	})
	b.Run("fit", func(b *testing.B) {
		for range b.N {
			fitPane(t, fitData{Variant: "metakernel", Display: disp}, 78, 19)
		}
	})
	b.Run("omega", func(b *testing.B) {
		for range b.N {
			omegaPane(t, omegaData{Variant: "metakernel", Display: disp, PairY: 1}, 78, 19)
		}
	})
	b.Run("runs", func(b *testing.B) {
		for range b.N {
			runsPane(t, fakeRows(), 78, 19)
		}
	})
	b.Run("status", func(b *testing.B) {
		for range b.N {
			statusBar(t, statusData{Preset: "sine-5shot", Variants: []string{"metakernel"}, Variant: "metakernel", Iter: 100, Iters: 1000, ItPerSec: 30, Dir: "runs/x"}, 160)
		}
	})
}

// BenchmarkBatchRender is the work of one batch of new points at 160×48:
// the curves and the table re-rendered, the frame composed.
func BenchmarkBatchRender(b *testing.B) {
	d := fakeDashboard(testTheme(), 160, 48)
	b.ReportAllocs()
	for range b.N {
		d.dirty[paneCurves], d.dirty[paneRuns] = true, true
		d.render()
	}
}
