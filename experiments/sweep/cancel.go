package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// CancelAll stops a sweep wherever its units run. It first writes the
// sweep's cancelled mark, so no worker starts a unit or requeues itself
// from then on; then it cancels the Slurm jobs the sweep submitted
// (scancel: running tasks get SIGTERM and save a checkpoint, pending ones
// never start) and sends SIGTERM to the workers on this machine (the local
// engine's). It returns the jobs cancelled and the units stopped here.
// sweep resume continues every unit from its checkpoint.
func CancelAll(ctx context.Context, dir string) (jobs, stopped []string, err error) {
	st, err := ReadStatus(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := runfile.WriteAtomic(filepath.Join(dir, FileCancelled), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), runfile.Shared); err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, s := range st.Jobs {
		jobs = append(jobs, s.Job)
	}
	if len(jobs) > 0 {
		if _, err := slurmCmd(ctx, "scancel", strings.Join(jobs, ",")); err != nil {
			errs = append(errs, err)
		}
	}
	host, _ := os.Hostname()
	for _, u := range st.Units {
		if u.State != StateRunning || u.Owner == nil || u.Owner.Host != host || u.Owner.Job != "" || u.Owner.PID <= 0 {
			continue
		}
		if p, err := os.FindProcess(u.Owner.PID); err == nil {
			stop(p)
			stopped = append(stopped, fmt.Sprintf("%s (pid %d)", u.Name, u.Owner.PID))
		}
	}
	return jobs, stopped, errors.Join(errs...)
}

// Uncancel removes the sweep's cancelled mark, before its units are run
// again.
func Uncancel(dir string) error {
	err := os.Remove(filepath.Join(dir, FileCancelled))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
