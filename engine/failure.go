package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// FileFailed is a run directory's failed.json: why its training failed.
// Run writes it when training ends in an error that is not a stop, and
// removes it when the run is taken up again; a sweep worker writes it
// for a unit that cannot start (experiments/sweep). The runs browser
// reads it for the failed state.
const FileFailed = "failed.json"

// Failure is failed.json.
type Failure struct {
	Error string `json:"error"`
	// Permanent failures (a diverged loss, bad data or settings, no
	// progress across restarts) are not retried by a sweep's requeue;
	// sweep resume clears them and tries again.
	Permanent bool      `json:"permanent"`
	Host      string    `json:"host"`
	Job       string    `json:"slurm_job,omitempty"`
	Iter      int       `json:"iter,omitempty"` // the iteration reached, when training had started
	Time      time.Time `json:"time"`
}

// ReadFailure reads run directory dir's failed.json; ok is false when
// there is none.
func ReadFailure(dir string) (f Failure, ok bool) {
	data, err := runfile.ReadBounded(filepath.Join(dir, FileFailed), runfile.MaxSmallJSON)
	if errors.Is(err, fs.ErrNotExist) {
		return f, false
	}
	if err != nil {
		return Failure{Error: fmt.Sprintf("failed.json is unreadable: %v", err), Permanent: true}, true
	}
	if json.Unmarshal(data, &f) != nil {
		f = Failure{Error: "failed.json is unreadable", Permanent: true}
	}
	return f, true
}

// WriteFailure writes dir's failed.json for err, iteration iter.
func WriteFailure(dir string, err error, iter int, permanent bool) error {
	host, _ := os.Hostname()
	f := Failure{Error: err.Error(), Permanent: permanent, Host: host, Job: runfile.SlurmJob(), Iter: iter, Time: time.Now().UTC()}
	return runfile.WriteJSON(filepath.Join(dir, FileFailed), f, runfile.Shared)
}

// Permanent reports whether a run's error is one a retry cannot fix.
// Everything the engine refuses on its own is (settings, data, a diverged
// loss, damaged logs); an I/O error writing a file is not.
func Permanent(err error) bool {
	var pe *os.PathError
	return !errors.As(err, &pe) || errors.Is(err, os.ErrNotExist)
}
