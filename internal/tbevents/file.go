package tbevents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tfrecord"
)

// Prefix starts the name of every event file this package writes.
const Prefix = "events.out.tfevents."

// Writer appends events to one event file. It buffers nothing: each Write
// is one write call of whole records, so that a reader tailing the file
// (TensorBoard does) or a kill sees whole events, and a killed process
// leaves a readable file. It is owned by one goroutine.
type Writer struct {
	f    *os.File
	path string
	buf  []byte
	err  error // sticky: after a failed write the file may end mid-record
}

// Create starts a new event file in dir named for now, this host and this
// process (events.out.tfevents.<unix seconds>.<host>.<pid>, with .1, .2, …
// after it should that name be taken) and writes its file_version event.
func Create(dir string, now time.Time, perm os.FileMode) (*Writer, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.ReplaceAll(host, string(filepath.Separator), "_")
	base := filepath.Join(dir, fmt.Sprintf("%s%010d.%s.%d", Prefix, now.Unix(), host, os.Getpid()))
	path := base
	var f *os.File
	for i := 1; ; i++ {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, perm)
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			break
		}
		path = fmt.Sprintf("%s.%d", base, i)
	}
	if err != nil {
		return nil, fmt.Errorf("tbevents: creating an event file: %w", err)
	}
	w := &Writer{f: f, path: path}
	if err := w.Write(Event{WallTime: WallTime(now), FileVersion: FileVersion}); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// WallTime is t as an Event's wall_time: seconds since the Unix epoch.
func WallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

// Write appends events, framed as TFRecords, in one write call. After an
// error every later call returns it.
func (w *Writer) Write(events ...Event) error {
	if w.err != nil {
		return w.err
	}
	w.buf = w.buf[:0]
	var rec []byte
	for i := range events {
		rec = events[i].Append(rec[:0])
		if len(rec) > tfrecord.MaxRecordLen {
			return fmt.Errorf("tbevents: an event of %d bytes exceeds the %d-byte record limit", len(rec), tfrecord.MaxRecordLen)
		}
		w.buf = tfrecord.AppendRecord(w.buf, rec)
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.err = fmt.Errorf("tbevents: writing %s: %w", w.path, err)
	}
	return w.err
}

// Close closes the file; a nil Writer is already closed.
func (w *Writer) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil && w.err == nil {
		return fmt.Errorf("tbevents: closing %s: %w", w.path, err)
	}
	return w.err
}

// Files lists the event files of dir in the order TensorBoard reads them
// (by name): those whose name contains "tfevents", as TensorBoard's rule
// is, less the temporary files of a rewrite in progress.
func Files(dir string) ([]string, error) {
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list {
		if n := e.Name(); strings.Contains(n, "tfevents") && !strings.Contains(n, ".tmp-") && e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read returns the events of the file at path. A damaged or truncated
// file (a process killed mid-write) gives the events before the damage
// and the error (a *tfrecord.Error).
func Read(path string) ([]Event, error) {
	var out []Event
	err := tfrecord.Scan(path, func(i int, rec []byte) error {
		e, err := Decode(rec)
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// CutBack drops from the event file at path the events past step
// keepThrough, and anything after a damaged or cut record, rewriting it
// atomically (mode perm) when there is something to drop; it returns
// how many records were dropped and whether the file was damaged. A
// process resuming a run at its checkpoint's step calls it on the files
// of the processes before it: their events past the checkpoint are
// orphans, computed again by the resumed run.
func CutBack(path string, keepThrough int64, perm os.FileMode) (dropped int, damaged bool, err error) {
	var keep []byte
	serr := tfrecord.Scan(path, func(_ int, rec []byte) error {
		// A record that does not decode is not ours to judge: kept.
		if e, err := Decode(rec); err == nil && e.Step > keepThrough {
			dropped++
			return nil
		}
		keep = tfrecord.AppendRecord(keep, rec)
		return nil
	})
	if serr != nil {
		if !errors.Is(serr, tfrecord.ErrCorrupt) && !errors.Is(serr, tfrecord.ErrTruncated) {
			return 0, false, serr
		}
		damaged = true
	}
	if dropped == 0 && !damaged {
		return 0, false, nil
	}
	return dropped, damaged, runfile.WriteAtomic(path, keep, perm)
}
