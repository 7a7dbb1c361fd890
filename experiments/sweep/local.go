package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Local is the local engine: it runs units K at a time on this machine,
// each as its own `mkbench sweep work` process — the command a Slurm array
// task runs — so a unit that crashes takes nothing else down, and each has
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
				err := l.unit(ctx, i, share, log)
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

// unit runs one worker process for unit i with GOMAXPROCS share, its
// output appended to log.
func (l *Local) unit(ctx context.Context, i, share int, log string) error {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(l.Binary, "sweep", "work", l.Dir, "--index", strconv.Itoa(i))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(share))
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a Ctrl-C at the terminal reaches the unit
	// once, through ctx, rather than twice.
	cmd.SysProcAttr = ownGroup()
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
	if errors.As(err, &ee) {
		return fmt.Errorf("exit status %d (see %s)", ee.ExitCode(), log)
	}
	return err
}
