package session

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/presets"
)

// tiny shrinks a run so tests take milliseconds per iteration.
func tiny(iters int) presets.Overrides {
	return presets.Overrides{
		"iters": iters, "embed_hidden": []int{8, 8},
		"infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
		"meta_batch": 4, "query": 5,
		"snapshot_every": 5, "log_every": 5, "checkpoint_sec": 0,
		"eval_tasks": 8, "eval_query": 10, "eval_samples": 1,
	}
}

func newTestSession(t *testing.T, iters int) *Session {
	t.Helper()
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	s := New(p, t.TempDir())
	s.Overrides = tiny(iters)
	s.Interval = 10 * time.Millisecond
	t.Cleanup(func() {
		s.Close()
		if !s.Wait(30 * time.Second) {
			t.Error("runs did not end")
		}
	})
	return s
}

// until collects batches until done says so (or fails after a minute).
func until(t *testing.T, s *Session, done func(Update) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ups, ok := s.Next()
		if !ok {
			t.Fatal("session closed")
		}
		for _, u := range ups {
			if done(u) {
				return
			}
		}
	}
	t.Fatal("timed out")
}

// A run reports curve points in order, its display and its final
// evaluation, and leaves a complete run directory.
func TestRunReportsAndFinishes(t *testing.T) {
	s := newTestSession(t, 30)
	r, err := s.Start("metakernel", 0)
	if err != nil {
		t.Fatal(err)
	}
	var pts []Point
	var disp *engine.Display
	var final *engine.EvalResult
	until(t, s, func(u Update) bool {
		pts = append(pts, u.Points...)
		if u.Display != nil {
			disp = u.Display
		}
		if u.Final {
			final = u.Eval
		}
		if u.Ended && u.Err != nil {
			t.Fatal(u.Err)
		}
		return u.Ended
	})
	if len(pts) == 0 || pts[len(pts)-1].Iter != 30 {
		t.Fatalf("points %v", pts)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Iter < pts[i-1].Iter {
			t.Fatalf("points out of order: %v", pts)
		}
	}
	if disp == nil || len(disp.OmegaSteps) != 5 {
		t.Fatalf("display %+v", disp)
	}
	if final == nil || final.Tasks != 8 {
		t.Fatalf("final eval %+v", final)
	}
	for _, f := range []string{engine.FileConfig, engine.FileMetrics, engine.FileCheckpoint, engine.FileSummary} {
		if _, err := os.Stat(filepath.Join(r.Dir, f)); err != nil {
			t.Error(err)
		}
	}
	if r.Alive() {
		t.Fatal("run still alive after Ended")
	}
}

// Pause, checkpoint, evaluate and resume each come back as a reply; Stop
// checkpoints, and Resume continues the same directory where it stopped.
func TestCommandsStopAndResume(t *testing.T) {
	s := newTestSession(t, 100000)
	r, err := s.Start("vrf", 0)
	if err != nil {
		t.Fatal(err)
	}
	until(t, s, func(u Update) bool { return u.Last != nil && u.Last.Iter >= 3 })
	if !r.Send(engine.Command{Kind: engine.CmdPause}) {
		t.Fatal("send refused")
	}
	var pausedAt int
	until(t, s, func(u Update) bool {
		for _, rep := range u.Replies {
			if rep.Kind == engine.CmdPause {
				pausedAt = rep.Iter
				return true
			}
		}
		return false
	})
	r.Send(engine.Command{Kind: engine.CmdCheckpoint})
	r.Send(engine.Command{Kind: engine.CmdEvaluate, Tasks: 4})
	var ck, ev bool
	until(t, s, func(u Update) bool {
		for _, rep := range u.Replies {
			ck = ck || rep.Kind == engine.CmdCheckpoint && rep.Iter == pausedAt && rep.Err == nil
		}
		if u.Eval != nil && !u.Final && u.Eval.Tasks == 4 {
			ev = true
		}
		return ck && ev
	})
	r.Send(engine.Command{Kind: engine.CmdResume})
	until(t, s, func(u Update) bool { return u.Last != nil && u.Last.Iter > pausedAt+2 })
	r.Stop()
	var stoppedAt int
	until(t, s, func(u Update) bool {
		if u.Ended {
			if !u.Result.Interrupted {
				t.Fatalf("stop: %+v %v", u.Result, u.Err)
			}
			stoppedAt = u.Result.Iters
		}
		return u.Ended
	})
	r2, err := s.Resume(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Dir != r.Dir || !r2.Resumed {
		t.Fatalf("resumed into %s", r2.Dir)
	}
	until(t, s, func(u Update) bool {
		if u.Run != r2 || len(u.Points) == 0 {
			return false
		}
		if u.Points[0].Iter <= stoppedAt {
			t.Fatalf("resumed run starts at %d, stopped at %d", u.Points[0].Iter, stoppedAt)
		}
		return true
	})
	if r.Send(engine.Command{Kind: engine.CmdCheckpoint}) {
		t.Fatal("an ended run accepted a command")
	}
}

type panicky struct{ task.Source }

func (panicky) Sample(*rand.Rand, *task.Batch) { panic("task source exploded") }

// A panic inside a worker ends that run with an error, nothing more.
func TestWorkerPanicIsAnError(t *testing.T) {
	s := newTestSession(t, 10)
	s.NewSources = func(family string, cfg engine.Config) (presets.Sources, error) {
		srcs, err := presets.NewSources(family, cfg, "")
		srcs.Train = panicky{srcs.Train}
		return srcs, err
	}
	if _, err := s.Start("rff", 0); err != nil {
		t.Fatal(err)
	}
	until(t, s, func(u Update) bool {
		if u.Ended && (u.Err == nil || !strings.Contains(u.Err.Error(), "task source exploded")) {
			t.Fatalf("want the panic as the run's error, got %v", u.Err)
		}
		return u.Ended
	})
}

// Two runs report through one rate-limited stream of batches.
//
// The second run starts once the first has built its graphs: gorgonia
// v0.9.18 numbers node groups from an unsynchronized package-level
// counter (internal/encoding.NewGroup), so two graph builds at the same
// moment are a data race until the engine serializes them.
func TestNextBatchesRuns(t *testing.T) {
	s := newTestSession(t, 100000)
	s.Interval = 50 * time.Millisecond
	if _, err := s.Start("rbf", 0); err != nil {
		t.Fatal(err)
	}
	until(t, s, func(u Update) bool { return u.Display != nil })
	if _, err := s.Start("rff", 0); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	points := map[int]int{}
	for points[1] < 5 || points[2] < 5 {
		ups, ok := s.Next()
		if !ok {
			t.Fatal("closed")
		}
		now := time.Now()
		if !last.IsZero() && now.Sub(last) < 45*time.Millisecond {
			t.Fatalf("batches %v apart", now.Sub(last))
		}
		last = now
		seen := map[int]bool{}
		for _, u := range ups {
			if seen[u.Run.ID] {
				t.Fatal("a run twice in one batch")
			}
			seen[u.Run.ID] = true
			if u.Ended {
				t.Fatalf("%s ended: %v", u.Run.Variant, u.Err)
			}
			points[u.Run.ID] += len(u.Points)
		}
	}
}

func TestCloseEndsNext(t *testing.T) {
	s := newTestSession(t, 100000)
	if _, err := s.Start("rbf", 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !s.Wait(30 * time.Second) {
		t.Fatal("runs did not stop")
	}
	for {
		ups, ok := s.Next()
		if !ok {
			break
		}
		if len(ups) == 0 {
			t.Fatal("ok with nothing")
		}
	}
	if _, err := s.Start("rbf", 0); err == nil {
		t.Fatal("a closed session started a run")
	}
	if _, err := s.Start("nonsense", 0); err == nil {
		t.Fatal("unknown variant accepted")
	}
}

// Two workbenches started in the same second name their runs alike; the
// second takes the next free name instead of training into the first's
// directory (where the engine's lock failed it). The first is held before
// its engine creates anything, as a slow data set holds it.
func TestSameSecondRunsGetTheirOwnDirectories(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hold := make(chan struct{})
	var sessions []*Session
	for i := range 2 {
		s := newTestSession(t, 1_000_000)
		s.Root, s.now = root, func() time.Time { return at }
		if i == 0 {
			s.NewSources = func(family string, cfg engine.Config) (presets.Sources, error) {
				<-hold
				return presets.NewSources(family, cfg, "")
			}
		}
		sessions = append(sessions, s)
	}
	var runs []*Run
	for _, s := range sessions {
		r, err := s.Start("metakernel", 0)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	close(hold)
	if runs[0].Dir == runs[1].Dir {
		t.Fatalf("both runs train in %s", runs[0].Dir)
	}
	if want := runs[0].Dir + "-2"; runs[1].Dir != want {
		t.Errorf("second run in %s, want %s", runs[1].Dir, want)
	}
	for i, s := range sessions {
		until(t, s, func(u Update) bool {
			if u.Ended {
				t.Fatalf("run %d ended: %v", i, u.Err)
			}
			return u.Last != nil && u.Last.Iter >= 5
		})
		s.StopAll()
		if !s.Wait(30 * time.Second) {
			t.Fatal("run did not stop")
		}
		if o, _ := runs[i].Outcome(); !o.Result.Interrupted {
			t.Errorf("run %d: %+v", i, o)
		}
		if _, err := os.Stat(filepath.Join(runs[i].Dir, engine.FileCheckpoint)); err != nil {
			t.Error(err)
		}
	}
}

// A run picked in the workbench is checked against the machine's memory
// as `mkbench run` is: one that cannot fit is refused before anything is
// allocated or made on disk.
func TestStartRefusesWhatCannotFit(t *testing.T) {
	s := newTestSession(t, 5)
	s.Overrides = s.Overrides.With("bases", 60_000).With("meta_batch", 60_000) // each within its ceiling, together far past the machine
	_, err := s.Start("metakernel", 0)
	if err == nil || !strings.Contains(err.Error(), "needs about") || !strings.Contains(err.Error(), "bases") {
		t.Fatalf("want a memory refusal naming bases, got %v", err)
	}
	if ents, _ := os.ReadDir(s.Root); len(ents) != 0 {
		t.Fatalf("a refused run left %d entries in the runs root", len(ents))
	}
}

// Data reaches presets.NewSources: a folder preset's run reads the folder
// the session names (here a missing one, so the run says which), and
// without one it says to give one.
func TestDataReachesSources(t *testing.T) {
	p, err := presets.Get("folder-5w1s")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-folder")
	for data, want := range map[string]string{missing: missing, "": "give --data DIR"} {
		s := New(p, t.TempDir())
		s.Data, s.Interval = data, time.Millisecond
		if _, err := s.Start("metakernel", 0); err != nil {
			t.Fatal(err)
		}
		until(t, s, func(u Update) bool {
			if u.Ended && (u.Err == nil || !strings.Contains(u.Err.Error(), want)) {
				t.Errorf("data %q: run ended with %v, want an error naming %q", data, u.Err, want)
			}
			return u.Ended
		})
		s.Close()
	}
}

// An evaluation's progress reaches the batch with its rate, measured from
// its first report; a new evaluation (the count going back) measures
// afresh, and a batch without news carries none.
func TestEvalProgressRate(t *testing.T) {
	var b mailbox
	t0 := time.Unix(1000, 0)
	b.evalProgress(8, 200, t0)
	u, _ := b.take()
	if p := u.EvalProgress; p == nil || p.Done != 8 || p.Rate != 0 || p.Remaining() >= 0 {
		t.Fatalf("first report: %+v", p)
	}
	b.evalProgress(48, 200, t0.Add(2*time.Second))
	u, _ = b.take()
	if p := u.EvalProgress; p == nil || p.Rate != 20 || p.Remaining() != 7600*time.Millisecond {
		t.Fatalf("second report: %+v", p)
	}
	b.evalProgress(4, 200, t0.Add(10*time.Second))
	if u, _ = b.take(); u.EvalProgress.Rate != 0 {
		t.Fatalf("a new evaluation kept the old rate: %+v", u.EvalProgress)
	}
	b.reply(engine.Reply{})
	if u, _ = b.take(); u.EvalProgress != nil {
		t.Fatalf("progress repeated: %+v", u.EvalProgress)
	}
}
