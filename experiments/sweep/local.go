package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Local is the local engine: it runs units K at a time on this machine,
// each as its own `mkbench sweep work` process — the command a Slurm array
// task runs — so a unit that crashes takes nothing else down (its
// failed.json says how it died), and the workers end with the engine's
// process however it ends (workerAttr, WithParent), and each has
// a share of the cores (GOMAXPROCS = cores / K, at least 1) so that K
// units do not oversubscribe them. A unit's numbers do not depend on its
// share: the engine's sums are the same at any GOMAXPROCS.
type Local struct {
	Dir    string
	Binary string // the mkbench executable
	Jobs   int    // units at a time; default: the number of cores
	Cores  int    // default runtime.NumCPU()
	// Event, if set, is called (from several goroutines, one at a time)
	// when a unit starts and ends.
	Event func(LocalEvent)
}

// LocalEvent is a unit starting (Err nil, Done false) or ending.
type LocalEvent struct {
	Unit    Unit
	Done    bool
	Err     error // why it did not finish; nil when it did
	Elapsed time.Duration
	Log     string // its output file
}

// Run runs the units at indices and returns the indices of those that
// did not finish. Cancelling ctx sends each running unit SIGTERM, so it
// saves a checkpoint, and waits for them all.
func (l *Local) Run(ctx context.Context, indices []int) ([]int, error) {
	m, err := Load(l.Dir)
	if err != nil {
		return nil, err
	}
	cores := l.Cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	jobs := l.Jobs
	if jobs <= 0 {
		jobs = cores
	}
	jobs = min(jobs, max(len(indices), 1))
	share := max(cores/jobs, 1)
	if err := os.MkdirAll(filepath.Join(l.Dir, DirLogs), 0o755); err != nil {
		return nil, err
	}
	if err := notLinked(filepath.Join(l.Dir, DirLogs)); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var unfinished []int
	todo := make(chan int)
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range todo {
				u := m.Units[i]
				if exists(filepath.Join(l.Dir, FileCancelled)) {
					mu.Lock()
					unfinished = append(unfinished, i)
					mu.Unlock()
					continue
				}
				log := filepath.Join(l.Dir, DirLogs, fmt.Sprintf("local-%d.out", i))
				l.event(&mu, LocalEvent{Unit: u, Log: log})
				start := time.Now()
				err := l.unit(ctx, u, share, log)
				mu.Lock()
				if err != nil {
					unfinished = append(unfinished, i)
				}
				mu.Unlock()
				l.event(&mu, LocalEvent{Unit: u, Done: true, Err: err, Elapsed: time.Since(start), Log: log})
			}
		}()
	}
feed:
	for _, i := range indices {
		select {
		case todo <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	if ctx.Err() != nil {
		return unfinished, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
	}
	return unfinished, nil
}

func (l *Local) event(mu *sync.Mutex, e LocalEvent) {
	if l.Event == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	l.Event(e)
}

// EnvParent names, to a worker the local engine starts, the pid of its
// coordinator, which it watches (WithParent).
const EnvParent = "MKBENCH_SWEEP_PARENT"

// unit runs one worker process for unit i with GOMAXPROCS share, its
// output appended to log. A worker that dies (a signal, a Go crash) is
// recorded in the unit's failed.json with what killed it.
func (l *Local) unit(ctx context.Context, u Unit, share int, log string) error {
	out, err := runfile.OpenOwn(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(l.Binary, "sweep", "work", l.Dir, "--index", strconv.Itoa(u.Index))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(share), EnvParent+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = workerAttr()
	// Linux sends the parent-death signal when the starting thread ends,
	// not the process: this goroutine keeps its thread until the worker
	// has ended.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", l.Binary, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		stop(cmd.Process)
		err = <-done
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if how := death(ee, log); how != "" {
		if reason := l.recordDeath(u, cmd.Process.Pid, how); reason != "" {
			return fmt.Errorf("%s (see %s)", reason, log)
		}
		return fmt.Errorf("worker pid %d died (%s) (see %s)", cmd.Process.Pid, how, log)
	}
	switch ee.ExitCode() {
	case 130: // sweep work's status for a stop (ErrInterrupted)
		return fmt.Errorf("stopped; its checkpoint is saved (see %s)", log)
	case 3: // ErrCancelled
		return fmt.Errorf("not started: the sweep was cancelled (see %s)", log)
	}
	return fmt.Errorf("exit status %d (see %s)", ee.ExitCode(), log)
}

// death says how a worker that exited with ee died — "signal: killed",
// or Go's crash, "exit status 2: panic: …" with the panic's line from its
// log — and "" for a worker that ended by itself (a failure it recorded,
// a stop, a cancel).
func death(ee *exec.ExitError, log string) string {
	if ee.ExitCode() == -1 {
		return ee.Error() // "signal: killed"
	}
	if ee.ExitCode() != 2 { // the Go runtime's status for a panic or a fatal error
		return ""
	}
	how := ee.Error()
	if line := crashLine(log); line != "" {
		how += ": " + line
	}
	return how
}

// crashLine is the last line of log's tail that begins as the Go runtime
// writes a crash ("panic: …", "fatal error: …"), "" if none.
func crashLine(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		f.Seek(st.Size()-tail, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, tail))
	found := ""
	for _, ln := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(ln, "panic: ") || strings.HasPrefix(ln, "fatal error: ") {
			found = ln
		}
	}
	if len(found) > 200 {
		found = found[:200] + "…"
	}
	// It goes into failed.json and onto terminals.
	return runfile.Printable(found)
}

// recordDeath writes unit u's failed.json for its worker pid, which died
// as how says, and returns the reason written; "" when the unit's files
// say otherwise (the worker ended its unit in order, or never started it),
// or another worker holds the unit now.
func (l *Local) recordDeath(u Unit, pid int, how string) string {
	dir := filepath.Join(l.Dir, u.Dir)
	if !exists(dir) {
		return ""
	}
	lock, err := runfile.Lock(dir)
	if err != nil {
		return ""
	}
	defer lock.Release()
	h := readHistory(dir)
	if h.died == nil || h.died.PID != pid || exists(filepath.Join(dir, engine.FileSummary)) {
		return ""
	}
	iter := h.died.Iter
	var row engine.MetricsRow
	if runfile.LastRow(filepath.Join(dir, engine.FileMetrics), &row) {
		iter = row.Iter
	}
	reason := diedReason(*h.died, iter, how)
	if err := engine.WriteFailure(dir, errors.New(reason), iter, false); err != nil {
		return ""
	}
	return reason
}

// WithParent returns ctx, cancelled when the coordinator that started
// this worker (EnvParent) is gone: the worker is then its orphan, and it
// saves a checkpoint and ends as on a cancel. Linux signals the worker
// at once (workerAttr); this is the check everywhere else, once a second.
// Without EnvParent, ctx is as it was.
func WithParent(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	want, err := strconv.Atoi(os.Getenv(EnvParent))
	if err != nil || want <= 1 {
		return ctx, cancel
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != want {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}
