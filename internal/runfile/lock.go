package runfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
	return lockFile(dir)
}

// lockFile takes the lock of the existing directory dir.
func lockFile(dir string) (*DirLock, error) {
	path := filepath.Join(dir, FileLock)
	for {
		f, err := OpenOwn(path, os.O_RDWR|os.O_CREATE, 0o644)
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
			if data, err := ReadBounded(path, MaxSmallJSON); err == nil {
				json.Unmarshal(data, &e.Owner)
			}
			f.Close()
			return nil, e
		}
		// The lock file may have been removed (DirLock.Remove) between
		// the open and the flock: a lock on an unlinked file locks
		// nothing another process can see, so take the new file's.
		if sameFile(f, path) {
			return own(dir, f), nil
		}
		unlock(f)
		f.Close()
	}
}

// sameFile reports whether open file f is still the file at path.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// own records this process as the owner in the lock file f of dir.
func own(dir string, f *os.File) *DirLock {
	host, _ := os.Hostname()
	data, _ := json.Marshal(Owner{Host: host, PID: os.Getpid(), Since: time.Now().UTC().Truncate(time.Second), Job: SlurmJob()})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
	}
	return &DirLock{dir: dir, f: f}
}

// LockToRead takes the lock of the existing directory dir for reading it,
// as Lock does, but creates nothing when it cannot: on a read-only file
// system, or in a directory this user cannot write, the lock file cannot
// be made — and then no process can write there either, so reading
// without it is safe. readOnly says so (the lock is then nil); a held
// lock is an *InUseError as with Lock, and a missing dir an error
// matching fs.ErrNotExist.
func LockToRead(dir string) (l *DirLock, readOnly bool, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, false, err
	}
	if !st.IsDir() {
		return nil, false, &fs.PathError{Op: "lock", Path: dir, Err: errors.New("not a directory")}
	}
	l, err = lockFile(dir)
	if err != nil && cannotWrite(err) {
		// A lock file another process holds can still be read and
		// honoured where it exists: the run was copied with it, or
		// the mount became read-only under a live run.
		if held, owner, herr := Held(dir); herr == nil && held {
			return nil, false, &InUseError{Dir: dir, Owner: owner}
		}
		return nil, true, nil
	}
	return l, false, err
}

// cannotWrite reports whether err says the file system or the directory
// does not let this process write.
func cannotWrite(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)
}

// Remove gives the lock up and removes the lock file, for a directory the
// lock was taken in only to be refused: it leaves no trace of the attempt.
// A Lock racing with it takes the new lock file's lock (lockFile checks
// that the file it locked is still there).
func (l *DirLock) Remove() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(filepath.Join(l.dir, FileLock))
	if rerr := l.Release(); err == nil {
		err = rerr
	}
	return err
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
	f, err := OpenOwn(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, Owner{}, nil
	}
	if err != nil {
		return false, Owner{}, err
	}
	defer f.Close()
	var o Owner
	if data, err := ReadBounded(path, MaxSmallJSON); err == nil {
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
