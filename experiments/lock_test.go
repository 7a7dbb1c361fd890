package experiments

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// treeState lists every file and directory under dir with its size, mode
// and modification time: two equal states mean nothing was written,
// created or removed in between.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	st := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st[path] = fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func diffStates(a, b map[string]string) []string {
	var d []string
	for p, s := range a {
		if b[p] != s {
			d = append(d, fmt.Sprintf("%s: %q → %q", p, s, b[p]))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p+": created")
		}
	}
	return d
}

// wantInUse checks that err is the lock's InUseError naming dir and the
// process pid.
func wantInUse(t *testing.T, what string, err error, dir string, pid int) {
	t.Helper()
	var e *runfile.InUseError
	if !errors.Is(err, runfile.ErrInUse) || !errors.As(err, &e) {
		t.Fatalf("%s: want an InUseError, got %v", what, err)
	}
	if e.Dir != dir || e.Owner.PID != pid || !strings.Contains(err.Error(), fmt.Sprintf("%s is in use by pid %d on ", dir, pid)) {
		t.Fatalf("%s: error %q (owner %+v), want it to name %s and pid %d", what, err, e.Owner, dir, pid)
	}
}

// Two experiments on one directory (issue "Reliability", fault 1): while
// a Runner works — here in the middle of training its second run, after
// the first run's results were written — a second Runner (same or other
// settings) and a Report fail at once with the lock's InUseError and
// change nothing in the directory; the first Runner then finishes
// unharmed, and once it has returned the directory can be run (reusing
// every run) and reported again.
func TestSecondRunnerOnSameDirFailsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp")
	o := Options{Experiment: Ablation, Preset: "sine-3shot", Variants: []string{"rff", "vrf"}}
	inside, proceed := make(chan struct{}), make(chan struct{})
	r1 := &Runner{Dir: dir, Options: o, Overrides: tiny(20), ReportEvery: time.Nanosecond}
	held := false // touched by r1's goroutine only
	r1.Progress = func(pr Progress) {
		if pr.Phase == PhaseStep && pr.Job == 2 && !held {
			held = true
			close(inside)
			<-proceed
		}
	}
	type outcome struct {
		res *Results
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r1.Run(context.Background())
		done <- outcome{res, err}
	}()
	select {
	case <-inside:
	case out := <-done:
		t.Fatalf("the first runner returned before training its second run: %v", out.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the first runner never reached its second run")
	}
	before := treeState(t, dir)
	for _, r := range []*Runner{
		{Dir: dir, Options: o, Overrides: tiny(20)},
		{Dir: dir, Options: Options{Experiment: Ablation, Preset: "sine-3shot", Variants: []string{"rbf"}}, Overrides: tiny(20)},
		{Dir: dir, Options: Options{Experiment: Shots, Preset: "sine-5shot", Variants: []string{"vrf"}}, Overrides: tiny(20)},
	} {
		start := time.Now()
		res, err := r.Run(context.Background())
		wantInUse(t, "second runner", err, dir, os.Getpid())
		if res != nil {
			t.Errorf("second runner: results %+v", res)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("second runner took %v to fail", el)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileResults)); err != nil {
		t.Fatalf("the first run's results are not written yet: %v", err)
	}
	_, err := Report(dir)
	wantInUse(t, "report", err, dir, os.Getpid())
	if d := diffStates(before, treeState(t, dir)); len(d) > 0 {
		t.Errorf("the refused runners changed the directory:\n%s", strings.Join(d, "\n"))
	}
	close(proceed)
	out := <-done
	if out.err != nil {
		t.Fatalf("first runner: %v", out.err)
	}
	if !out.res.Complete || len(out.res.Points) != 2 {
		t.Fatalf("first runner: complete %v, %d points", out.res.Complete, len(out.res.Points))
	}
	// Released: the same experiment runs again (reusing both runs) and
	// reports.
	var phases []string
	r3 := &Runner{Dir: dir, Options: o, Overrides: tiny(20), Progress: func(pr Progress) {
		if pr.Phase != PhaseStep {
			phases = append(phases, pr.Phase)
		}
	}}
	if _, err := r3.Run(context.Background()); err != nil {
		t.Fatalf("after the first runner: %v", err)
	}
	if strings.Join(phases, " ") != "reuse done reuse done figures" {
		t.Errorf("rerun phases %v, want both runs reused", phases)
	}
	if _, err := Report(dir); err != nil {
		t.Fatalf("report after the runner: %v", err)
	}
}

// A Report of a folder that is no experiment does not create a lock file
// (nor the folder).
func TestReportOfNoExperimentLeavesNoLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if _, err := Report(dir); err == nil {
		t.Fatal("report of a missing folder succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("report created %s: %v", dir, err)
	}
}

// An experiment whose process was killed (SIGKILL, in the middle of
// training, holding the lock) is taken over by the next Runner, which
// finishes it.
func TestKilledExperimentIsTakenOver(t *testing.T) {
	o := Options{Experiment: Ablation, Preset: "sine-3shot", Variants: []string{"rff"}}
	if dir := os.Getenv("MKBENCH_EXP_LOCK_CHILD"); dir != "" {
		r := &Runner{Dir: dir, Options: o, Overrides: tiny(40), ReportEvery: time.Nanosecond, Progress: func(pr Progress) {
			if pr.Phase == PhaseStep {
				fmt.Println("training")
				time.Sleep(time.Minute)
			}
		}}
		_, err := r.Run(context.Background())
		fmt.Println("child:", err)
		os.Exit(1)
	}
	dir := filepath.Join(t.TempDir(), "exp")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledExperimentIsTakenOver$")
	cmd.Env = append(os.Environ(), "MKBENCH_EXP_LOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "training") {
		t.Fatalf("child said %q", buf[:n])
	}
	_, err = (&Runner{Dir: dir, Options: o, Overrides: tiny(40)}).Run(context.Background())
	wantInUse(t, "while the child runs", err, dir, cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	res, err := (&Runner{Dir: dir, Options: o, Overrides: tiny(40)}).Run(context.Background())
	if err != nil {
		t.Fatalf("after the owner was killed: %v", err)
	}
	if !res.Complete || len(res.Points) != 1 || res.Points[0].Seeds[0].Iters != 40 {
		t.Fatalf("after the owner was killed: complete %v, points %+v", res.Complete, res.Points)
	}
}
