package runfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Log is a JSON-lines file open for appending, one value a line. Each
// Append is flushed at once, so `tail -f` follows a run and a killed
// process loses at most the row it was writing.
type Log struct {
	path string
	f    *os.File
	w    *bufio.Writer
}

// OpenLog opens the log at path for appending, creating it (mode perm) if
// needed. With keepThrough ≥ 0, rows whose "iter" is past keepThrough, and
// lines that do not parse (a row cut by a kill), are dropped first: a
// resumed run computes them again from its checkpoint.
func OpenLog(path string, keepThrough int, perm os.FileMode) (*Log, error) {
	if keepThrough >= 0 {
		if err := Truncate(path, keepThrough, perm); err != nil {
			return nil, err
		}
	}
	f, err := OpenOwn(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, perm)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	l := &Log{path: path, f: f, w: bufio.NewWriter(f)}
	// A last row cut by a kill has no newline: end it, so the next row
	// starts a line of its own instead of joining the fragment (Read then
	// skips the fragment alone).
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], st.Size()-1); err == nil && last[0] != '\n' {
			l.w.WriteByte('\n')
		}
	}
	return l, nil
}

// Append writes v as one line and flushes it.
func (l *Log) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("writing %s: %w", l.path, err)
	}
	l.w.Write(b)
	l.w.WriteByte('\n')
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", l.path, err)
	}
	return nil
}

// Close closes the file; a nil Log is already closed.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("closing %s: %w", l.path, err)
	}
	return nil
}

// Append adds v as one line to the log at path and closes it again, for
// logs written a row at a time far apart.
func Append(path string, v any, perm os.FileMode) error {
	l, err := OpenLog(path, -1, perm)
	if err != nil {
		return err
	}
	err = l.Append(v)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

// Truncate drops the rows of the log at path whose "iter" is past
// keepThrough and the lines that do not parse, atomically; a missing log
// is left missing.
func Truncate(path string, keepThrough int, perm os.FileMode) error {
	data, err := ReadBounded(path, MaxLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var keep []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		var row struct {
			Iter *int `json:"iter"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &row) != nil || row.Iter == nil || *row.Iter > keepThrough {
			continue
		}
		keep = append(keep, bytes.TrimRight(line, "\n")...)
		keep = append(keep, '\n')
	}
	if bytes.Equal(keep, data) {
		return nil
	}
	return WriteAtomic(path, keep, perm)
}

// Read returns the rows of the log at path, decoded as T, skipping lines
// that do not parse (a row cut by a kill). A missing log has no rows.
func Read[T any](path string) ([]T, error) {
	rows, _, err := ReadRows[T](path)
	return rows, err
}

// ReadRows is Read that also returns the 1-based numbers of the lines it
// skipped because they do not parse — except a last line without its
// newline, which is a row cut by a kill and no loss: whoever shows the
// rows says how many others were left out and where. A log over MaxLog is
// refused.
func ReadRows[T any](path string) (rows []T, skipped []int, err error) {
	data, err := ReadBounded(path, MaxLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if json.Unmarshal(line, &v) == nil {
			rows = append(rows, v)
		} else if i < len(lines)-1 {
			skipped = append(skipped, i+1)
		}
	}
	return rows, skipped, nil
}

// SkippedNote says which lines of the log at path ReadRows skipped, for
// whoever shows its rows: "" when none was.
func SkippedNote(path string, skipped []int) string {
	if len(skipped) == 0 {
		return ""
	}
	var ls []string
	for _, n := range skipped[:min(len(skipped), 8)] {
		ls = append(ls, strconv.Itoa(n))
	}
	if len(skipped) > 8 {
		ls = append(ls, "…")
	}
	word := "line"
	if len(skipped) > 1 {
		word = "lines"
	}
	return fmt.Sprintf("%s: %d damaged %s left out (%s %s do not parse)", path, len(skipped), word, word, strings.Join(ls, ", "))
}

// LastRow decodes the last complete line of a JSON-lines file into v,
// reading only its tail; false when there is none.
func LastRow(path string, v any) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	const tail = 4096
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return false
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if i == 0 && off > 0 {
			break // cut by the tail's start
		}
		if json.Unmarshal(lines[i], v) == nil {
			return true
		}
	}
	return false
}
