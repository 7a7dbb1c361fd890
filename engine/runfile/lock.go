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
	return fmt.Sprintf("%s is in use by pid %d on %s since %s; wait for it to end or choose another directory",
		e.Dir, e.Owner.PID, e.Owner.Host, e.Owner.Since.Local().Format("2006-01-02 15:04:05"))
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
	data, _ := json.Marshal(Owner{Host: host, PID: os.Getpid(), Since: time.Now().UTC().Truncate(time.Second)})
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
