package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/internal/tfrecord"
)

// runEvents reads the events of every event file of dir, in the order
// TensorBoard reads them, and says which file each came from.
func runEvents(t *testing.T, dir string) (evs []tbevents.Event, file []int) {
	t.Helper()
	files, err := tbevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		e, err := tbevents.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for range e {
			file = append(file, i)
		}
		evs = append(evs, e...)
	}
	return evs, file
}

// split sorts events into scalar rows (as "step tag=value …" lines, the
// values as TensorBoard keeps them), ω histograms by step, and the rest.
func split(evs []tbevents.Event) (scalars []string, omega map[int64][]tbevents.Value, other []tbevents.Event) {
	omega = map[int64][]tbevents.Value{}
	for _, e := range evs {
		switch {
		case len(e.Values) > 0 && e.Values[0].Histo != nil:
			omega[e.Step] = e.Values
		case len(e.Values) > 0:
			var b strings.Builder
			fmt.Fprintf(&b, "%d", e.Step)
			for _, v := range e.Values {
				fmt.Fprintf(&b, " %s=%v", v.Tag, v.Simple)
			}
			scalars = append(scalars, b.String())
		default:
			other = append(other, e)
		}
	}
	return scalars, omega, other
}

// rowScalars is what split makes of the logs' rows.
func rowScalars(t *testing.T, dir string) []string {
	t.Helper()
	rows, err := runfile.Read[MetricsRow](filepath.Join(dir, FileMetrics))
	if err != nil || len(rows) == 0 {
		t.Fatalf("metrics.jsonl: %d rows, %v", len(rows), err)
	}
	var evs []tbevents.Event
	for _, r := range rows {
		evs = append(evs, MetricsEvent(r, time.Time{}))
	}
	vals, _ := runfile.Read[ValRow](filepath.Join(dir, FileVal))
	for _, r := range vals {
		evs = append(evs, ValEvent(r, time.Time{}))
	}
	s, _, _ := split(evs)
	return s
}

// A run writes one event file: the file version, then the scalars of
// every metrics.jsonl row, then ω histograms after q0 and each of the 4
// flow steps every SnapshotEvery iterations and at the end — the same
// with an observer (whose displays they are then taken from) as without.
func TestRunWritesEvents(t *testing.T) {
	cfg := tinyConfig("metakernel", 12) // rows at 5, 10, 12; snapshots at 7, 12
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	runTo(t, cfg, sineLike{}, a, nil)
	shown := 0
	runTo(t, cfg, sineLike{}, b, ObserverFunc(func(s Snapshot) error {
		if s.Display != nil {
			shown++
		}
		return nil
	}))
	if shown == 0 {
		t.Fatal("the observer saw no display")
	}
	evs, file := runEvents(t, a)
	if file[len(file)-1] != 0 || evs[0].FileVersion != tbevents.FileVersion {
		t.Fatalf("want one file starting with its version, got %d files, first event %+v", file[len(file)-1]+1, evs[0])
	}
	scalars, omega, other := split(evs)
	if want := rowScalars(t, a); !reflect.DeepEqual(scalars, want) {
		t.Errorf("scalars:\n%s\nwant the rows of metrics.jsonl:\n%s", strings.Join(scalars, "\n"), strings.Join(want, "\n"))
	}
	if len(other) != 1 {
		t.Errorf("other events: %+v", other)
	}
	if len(omega) != 2 || len(omega[7]) != 5 || len(omega[12]) != 5 {
		t.Fatalf("ω histograms at %v", omega)
	}
	for k, v := range omega[12] {
		if v.Tag != fmt.Sprintf("omega/step%d", k) || v.Histo.Num != float64(cfg.Bases*cfg.FeatureDim()) {
			t.Errorf("histogram %d: %s of %v values", k, v.Tag, v.Histo.Num)
		}
	}
	evsB, _ := runEvents(t, b)
	scalarsB, omegaB, _ := split(evsB)
	if !reflect.DeepEqual(scalarsB, scalars) || !reflect.DeepEqual(omegaB, omega) {
		t.Error("the events of a run with an observer differ from those without")
	}
	// The RBF kernel has no bases: scalars only.
	c := filepath.Join(root, "rbf")
	runTo(t, tinyConfig("rbf", 8), sineLike{}, c, nil)
	evsC, _ := runEvents(t, c)
	if s, o, _ := split(evsC); len(o) != 0 || !reflect.DeepEqual(s, rowScalars(t, c)) {
		t.Errorf("rbf: %d histograms, scalars %v", len(o), s)
	}
}

// A resumed run starts a second file with a SessionLog START after its
// checkpoint's iteration, after cutting the first back to it: the files
// together hold every row and histogram of an uninterrupted run once.
func TestResumedRunEvents(t *testing.T) {
	cfg := tinyConfig("vrf+cnf", 16) // rows at 5, 10, 15, 16; snapshots at 7, 14, 16
	root := t.TempDir()
	full, part := filepath.Join(root, "full"), filepath.Join(root, "part")
	runTo(t, cfg, sineLike{}, full, nil)
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: part},
		ObserverFunc(func(s Snapshot) error {
			if s.Iter >= 8 {
				return ErrStopped
			}
			return nil
		}))
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("want a stopped run, got %v", err)
	}
	// A process killed after its checkpoint may have written events past it.
	files, _ := tbevents.Files(part)
	w, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	orphan := tbevents.Event{Step: 15, Values: []tbevents.Value{tbevents.Scalar("loss", 99)}}
	w.Write(tfrecordOf(orphan))
	w.Close()
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: part, Resume: true}, nil); err != nil {
		t.Fatal(err)
	}
	evs, file := runEvents(t, part)
	want, _ := runEvents(t, full)
	scalars, omega, other := split(evs)
	wantScalars, wantOmega, _ := split(want)
	if !reflect.DeepEqual(scalars, wantScalars) {
		t.Errorf("scalars of the resumed run:\n%s\nwant:\n%s", strings.Join(scalars, "\n"), strings.Join(wantScalars, "\n"))
	}
	if !reflect.DeepEqual(omega, wantOmega) {
		t.Errorf("ω histograms at %d steps, want %d, or their values differ", len(omega), len(wantOmega))
	}
	// Two file versions and the restart marker, in the second file.
	if len(other) != 3 || other[2].Session != tbevents.SessionStart || other[2].Step != int64(res.Iters)+1 {
		t.Errorf("other events %+v; want two file versions and START at %d", other, res.Iters+1)
	}
	for i, e := range evs {
		if file[i] == 0 && e.Step > int64(res.Iters) {
			t.Errorf("the first file still holds step %d, past the checkpoint (%d)", e.Step, res.Iters)
		}
	}
}

func tfrecordOf(e tbevents.Event) []byte { return tfrecord.AppendRecord(nil, e.Append(nil)) }

// An error writing events is noted once, and the run goes on.
func TestEventErrorsAreNotedOnce(t *testing.T) {
	dir := t.TempDir()
	res := &Result{}
	ev := eventsLog{dir: dir, cfg: tinyConfig("vrf", 20), res: res}
	l := NewLoop(0, 20, 0, nil)
	if err := ev.open(l); err != nil || ev.w == nil {
		t.Fatalf("open: %v", err)
	}
	ev.omega = false // no model here
	ev.w.Close()     // every write fails from now on
	var rows strings.Builder
	for l.Iter = 5; l.Iter <= 15; l.Iter += 5 {
		fmt.Fprintf(&rows, `{"iter":%d,"loss":1}`+"\n", l.Iter)
		if err := os.WriteFile(filepath.Join(dir, FileMetrics), []byte(rows.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := ev.step(l, StepStats{}); err != nil {
			t.Fatalf("the hook failed the run: %v", err)
		}
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "TensorBoard events:") || !strings.Contains(res.Notes[0], "mkbench export "+dir+" --tensorboard") {
		t.Errorf("notes %q", res.Notes)
	}
}

// BenchmarkRunHooks times whole runs (every hook attached, a run directory
// written, no final evaluation) and reports the loop's training time per
// iteration (Result.MsPerIter): what the hooks add to a step shows here,
// not in BenchmarkSineStep, which times the step alone.
func BenchmarkRunHooks(b *testing.B) {
	b.Run("sine-metakernel", func(b *testing.B) {
		c := sineConfig("metakernel")
		c.Iters, c.LogEvery, c.SnapshotEvery = 300, 10, 100
		benchRun(b, c, sineLike{})
	})
	b.Run("omniglot-like", func(b *testing.B) {
		c := omniglotLikeConfig()
		c.Iters, c.LogEvery, c.SnapshotEvery = 40, 10, 20
		benchRun(b, c, blobs{way: 5, side: 28})
	})
}

func benchRun(b *testing.B, c Config, src task.Source) {
	root := b.TempDir()
	var ms float64
	for i := 0; i < b.N; i++ {
		opts := RunOptions{Preset: "bench", Dir: filepath.Join(root, strconv.Itoa(i)), SkipEval: true}
		res, err := Run(context.Background(), c, src, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		ms += res.MsPerIter
	}
	b.ReportMetric(ms/float64(b.N), "ms/iter")
}

// BenchmarkEventsHook times the events hook's own work, to set against
// a step (BenchmarkSineStep, BenchmarkOmniglotLikeStep): a metrics row's
// scalars (the row read back from metrics.jsonl, encoded, one write),
// done every LogEvery iterations, and a snapshot's ω histograms (a
// display with one draw of ω, a histogram per flow step, one write),
// done every SnapshotEvery iterations.
func BenchmarkEventsHook(b *testing.B) {
	b.Run("metrics-row", func(b *testing.B) {
		dir := b.TempDir()
		ev, l := benchEvents(b, dir, sineConfig("metakernel"), nil)
		defer ev.close()
		f, err := os.OpenFile(filepath.Join(dir, FileMetrics), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l.Iter = 10 * (i + 1)
			fmt.Fprintf(f, `{"iter":%d,"loss":1.2345678901234567,"data":1.2,"kl":3.4,"elbo":-1.2345678901234567,"lambda":0.1,"lr":0.001,"grad_norm":20.5}`+"\n", l.Iter)
			ev.rows()
		}
	})
	for _, c := range []struct {
		name string
		cfg  Config
		src  task.Source
	}{
		{"omega-sine-metakernel", sineConfig("metakernel"), sineLike{}},
		{"omega-omniglot-like", omniglotLikeConfig(), blobs{way: 5, side: 28}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m, err := NewModel(c.cfg, c.src)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ev, l := benchEvents(b, b.TempDir(), c.cfg, m)
			defer ev.close()
			l.Iter = c.cfg.SnapshotEvery
			ev.histograms(l) // builds the display's graph
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Iter = c.cfg.SnapshotEvery * (i + 2)
				ev.histograms(l)
			}
			b.StopTimer()
			if !ev.omega || ev.w == nil {
				b.Fatalf("no histograms written: %v", ev.res.Notes)
			}
		})
	}
}

func benchEvents(b *testing.B, dir string, cfg Config, m *Model) (*eventsLog, *Loop) {
	b.Helper()
	ev := &eventsLog{dir: dir, cfg: cfg, m: m, rep: &reporter{}, res: &Result{}}
	l := NewLoop(0, 1<<30, 0, nil)
	l.ctx = context.Background()
	if err := ev.open(l); err != nil || ev.w == nil {
		b.Fatalf("open: %v %v", err, ev.res.Notes)
	}
	return ev, l
}

// A directory whose run stopped before its first checkpoint is started
// over without its event files, which hold no resumable state.
func TestNewRunDropsStaleEventFiles(t *testing.T) {
	dir := t.TempDir()
	w, err := tbevents.Create(dir, time.Now(), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Its config.json, written first, says the folder is a run's.
	if err := runfile.WriteJSON(filepath.Join(dir, FileConfig), RunConfig{Preset: "p", Source: "blobs", Config: tinyConfig("rff", 2)}, runfile.Private); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := prepareRunDir(dir, &res, false); err != nil {
		t.Fatal(err)
	}
	if files, _ := tbevents.Files(dir); len(files) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], filepath.Base(w.Path())) {
		t.Errorf("event files left: %v; notes %q", files, res.Notes)
	}
}
