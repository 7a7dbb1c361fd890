package runfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FileLock is the lock file of a run or experiment directory.
const FileLock = ".lock"

// Owner is who holds a directory's lock, as its lock file records it.
type Owner struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
	// Job is the Slurm job the owner runs in ("1234_5" for task 5 of
	// array job 1234), from the environment Slurm gives it; "" outside
	// Slurm.
	Job string `json:"slurm_job,omitempty"`
}

// SlurmJob is the Slurm job this process runs in, as Owner.Job writes it:
// "ARRAY_TASK" for a task of a job array, the job id otherwise, "" when
// the process does not run under Slurm.
func SlurmJob() string {
	if a, t := os.Getenv("SLURM_ARRAY_JOB_ID"), os.Getenv("SLURM_ARRAY_TASK_ID"); a != "" && t != "" {
		return a + "_" + t
	}
	return os.Getenv("SLURM_JOB_ID")
}

// InUseError is the error for a directory another process holds.
type InUseError struct {
	Dir   string
	Owner Owner // zero when the lock file could not be read
}

func (e *InUseError) Error() string {
	if e.Owner.PID == 0 {
		return fmt.Sprintf("%s is in use by another process (its lock %s is held); wait for it to end or choose another directory", e.Dir, filepath.Join(e.Dir, FileLock))
	}
	job := ""
	if e.Owner.Job != "" {
		job = " (Slurm job " + e.Owner.Job + ")"
	}
	return fmt.Sprintf("%s is in use by pid %d on %s%s since %s; wait for it to end or choose another directory",
		e.Dir, e.Owner.PID, e.Owner.Host, job, e.Owner.Since.Local().Format("2006-01-02 15:04:05"))
}

// ErrInUse is what an InUseError matches with errors.Is.
var ErrInUse = errors.New("directory in use")

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// DirLock is the exclusive lock of one directory, held from Lock until
// Release. The lock is the operating system's (flock on the lock file), so
// it ends with its process however that ends — a kill -9 or a crashed
// node included — and the next Lock takes it over. The lock file is left
// in place; its content only names the latest owner.
type DirLock struct {
	dir string
	f   *os.File
}

// Lock takes the exclusive lock of dir, creating dir if needed, without
// waiting: if another process holds it, the error is an *InUseError naming
// that process. Hold it while training, evaluating or resuming in dir.
func Lock(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock of %s: %w", dir, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", dir, err)
	}
	if !held {
		e := &InUseError{Dir: dir}
		if data, err := os.ReadFile(path); err == nil {
			json.Unmarshal(data, &e.Owner)
		}
		f.Close()
		return nil, e
	}
	host, _ := os.Hostname()
	data, _ := json.Marshal(Owner{Host: host, PID: os.Getpid(), Since: time.Now().UTC().Truncate(time.Second), Job: SlurmJob()})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
	}
	return &DirLock{dir: dir, f: f}, nil
}

// Dir is the locked directory.
func (l *DirLock) Dir() string { return l.dir }

// Release gives the lock up. A nil DirLock holds nothing.
func (l *DirLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Held reports whether another process holds dir's lock, and the owner
// its lock file names (zero when it cannot be read). It takes the lock
// shared for an instant and gives it back, so it never blocks and never
// changes the lock file; a Lock at that very instant fails as if the
// directory were in use (sweep workers retry). A directory without a lock
// file is not held.
func Held(dir string) (bool, Owner, error) {
	path := filepath.Join(dir, FileLock)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, Owner{}, nil
	}
	if err != nil {
		return false, Owner{}, err
	}
	defer f.Close()
	var o Owner
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &o)
	}
	free, err := tryShared(f)
	if err != nil {
		return false, o, err
	}
	if free {
		unlock(f)
	}
	return !free, o, nil
}
