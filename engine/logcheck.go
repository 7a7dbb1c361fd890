package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// The logs of a resumed run (metrics.jsonl, val.jsonl) are checked against
// its checkpoint before anything is written: up to the checkpoint's
// iteration the rows must be whole and consecutive (one every LogEvery,
// resp. ValEvery, iterations, and metrics' row of the last iteration of a
// finished run). Rows past the checkpoint, and a last line cut by a kill,
// are dropped: the resumed run writes them again, byte for byte. Anything
// else — a line that does not parse, a row out of order or twice, a row
// missing, a missing file — is damage: the resume is refused with
// ErrDamagedLog, naming the rows, unless RunOptions.Repair is set, which
// keeps the good rows, drops the damaged lines and appends a GapRecord to
// gaps.jsonl. No row is ever dropped without saying so.

// ErrDamagedLog is matched by the error of a resume whose logs do not
// match its checkpoint.
var ErrDamagedLog = errors.New("engine: run log does not match its checkpoint")

// GapRecord is one line of gaps.jsonl: what a resume with Repair dropped
// from, or found missing in, one log. The log lacks the rows of Missing
// and of the damaged lines for good; the damaged lines' text is kept here.
type GapRecord struct {
	File           string        `json:"file"`            // metrics.jsonl or val.jsonl
	CheckpointIter int           `json:"checkpoint_iter"` // the iteration the run resumed from
	Missing        []int         `json:"missing_iters,omitempty"`
	Damaged        []DamagedLine `json:"damaged_lines,omitempty"`
	Kept           int           `json:"kept_rows"` // rows kept, up to CheckpointIter
	Repaired       time.Time     `json:"repaired"`
}

// DamagedLine is a line of a log that was dropped as damaged: its 1-based
// line number in the file as it was, and its text (at most 1000 bytes).
type DamagedLine struct {
	Line int    `json:"line"`
	Text string `json:"text"`
}

// logPlan is the result of checking one log: what to keep and what is
// wrong.
type logPlan struct {
	name, path string
	perm       os.FileMode
	keep       []byte // the lines to keep, each with its newline
	kept       int
	changed    bool // keep differs from the file
	missing    []int
	damaged    []DamagedLine
}

func (p *logPlan) bad() bool { return len(p.missing) > 0 || len(p.damaged) > 0 }

// decodeStrict decodes a log line as T, refusing unknown fields, and
// returns its "iter".
func decodeStrict[T any](line []byte, iter func(*T) int) (int, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return 0, err
	}
	if dec.More() {
		return 0, errors.New("trailing data")
	}
	var probe struct {
		Iter *int `json:"iter"`
	}
	if json.Unmarshal(line, &probe) != nil || probe.Iter == nil {
		return 0, errors.New(`no "iter"`)
	}
	return iter(&v), nil
}

func decodeMetricsRow(line []byte) (int, error) {
	return decodeStrict(line, func(r *MetricsRow) int { return r.Iter })
}

func decodeValRow(line []byte) (int, error) {
	return decodeStrict(line, func(r *ValRow) int { return r.Iter })
}

// checkLog checks the log at path against a checkpoint of iteration upTo:
// a row is required at every multiple of every up to upTo, and at last
// when last > 0; rows past upTo, or at drop (> 0), are dropped as the
// resumed run writes them again.
func checkLog(path string, perm os.FileMode, upTo, every, last, drop int, decode func([]byte) (int, error)) (*logPlan, error) {
	p := &logPlan{name: filepath.Base(path), path: path, perm: perm}
	data, err := runfile.ReadBounded(path, runfile.MaxLog)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("engine: reading %s: %w", path, err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lastLine := len(lines) - 1
	for lastLine >= 0 && len(bytes.TrimSpace(lines[lastLine])) == 0 {
		lastLine--
	}
	have := map[int]bool{}
	prev := 0
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		iter, err := decode(bytes.TrimRight(line, "\n"))
		switch {
		case err != nil && i == lastLine:
			continue // a row cut by a kill; a required one is reported missing below
		case err != nil:
			p.damaged = append(p.damaged, damagedLine(i+1, line))
			continue
		case iter > upTo || iter == drop && drop > 0:
			continue // the resumed run writes it again
		case iter <= prev:
			p.damaged = append(p.damaged, damagedLine(i+1, line)) // out of order or twice
			continue
		}
		prev = iter
		have[iter] = true
		p.keep = append(p.keep, bytes.TrimRight(line, "\n")...)
		p.keep = append(p.keep, '\n')
		p.kept++
	}
	for it := every; it <= upTo; it += every {
		if !have[it] {
			p.missing = append(p.missing, it)
		}
	}
	if last > 0 && last%every != 0 && !have[last] {
		p.missing = append(p.missing, last)
	}
	p.changed = !bytes.Equal(p.keep, data)
	return p, nil
}

func damagedLine(n int, line []byte) DamagedLine {
	text := string(bytes.TrimRight(line, "\n"))
	if len(text) > 1000 {
		text = text[:1000]
	}
	return DamagedLine{Line: n, Text: text}
}

// describe says what is wrong with the log, naming at most a few rows.
func (p *logPlan) describe() string {
	var parts []string
	if n := len(p.damaged); n > 0 {
		var ls []string
		for _, d := range p.damaged[:min(n, 8)] {
			ls = append(ls, strconv.Itoa(d.Line))
		}
		if n > 8 {
			ls = append(ls, fmt.Sprintf("… (%d in all)", n))
		}
		word := "line"
		if n > 1 {
			word = "lines"
		}
		parts = append(parts, fmt.Sprintf("%s %s damaged (unreadable, out of order or repeated)", word, strings.Join(ls, ", ")))
	}
	if n := len(p.missing); n > 0 {
		var is []string
		for _, it := range p.missing[:min(n, 8)] {
			is = append(is, strconv.Itoa(it))
		}
		if n > 8 {
			is = append(is, fmt.Sprintf("… (%d in all)", n))
		}
		what := "the rows of iterations " + strings.Join(is, ", ") + " are missing"
		if _, err := os.Stat(p.path); err != nil {
			what = "the file is missing (rows of iterations " + strings.Join(is, ", ") + ")"
		}
		parts = append(parts, what)
	}
	return p.name + ": " + strings.Join(parts, "; ")
}

// openLogs is the start hook that opens metrics.jsonl and val.jsonl: a
// run from iteration 0 starts them empty, a resumed one first checks them
// against its checkpoint (see above).
func (r *run) openLogs(l *Loop) error {
	var plans []*logPlan
	if ck := r.from; ck != nil {
		last := -1
		if ck.Iter == ck.Config.Iters {
			last = ck.Iter // a finished run's last row
		}
		p, err := checkLog(r.metrics.path, runfile.Shared, ck.Iter, r.cfg.LogEvery, last, -1, decodeMetricsRow)
		if err != nil {
			return err
		}
		plans = append(plans, p)
		if r.val != nil && r.val.path != "" {
			drop := -1
			if l.End == ck.Iter && ck.Iter%r.cfg.ValEvery != 0 {
				drop = ck.Iter // the final validation, which the resumed run does again
			}
			p, err := checkLog(r.val.path, runfile.Private, ck.Iter, r.cfg.ValEvery, -1, drop, decodeValRow)
			if err != nil {
				return err
			}
			plans = append(plans, p)
		}
		if err := r.repairLogs(plans); err != nil {
			return err
		}
	}
	keep := 0
	if r.from != nil {
		keep = -1 // checked and cut above
	}
	var err error
	if r.metrics.log, err = runfile.OpenLog(r.metrics.path, keep, runfile.Shared); err != nil {
		return err
	}
	if r.val != nil && r.val.path != "" {
		if r.val.log, err = runfile.OpenLog(r.val.path, keep, runfile.Private); err != nil {
			return err
		}
	}
	return nil
}

// repairLogs refuses damaged logs (changing nothing) or, with Repair,
// records their gaps in gaps.jsonl; then it writes every log cut back to
// its checkpoint.
func (r *run) repairLogs(plans []*logPlan) error {
	var bad []string
	for _, p := range plans {
		if p.bad() {
			bad = append(bad, p.describe())
		}
	}
	if len(bad) > 0 && !r.opts.Repair {
		return fmt.Errorf("%w: %s does not match %s (iteration %d): %s; nothing was changed. Resume with --repair to keep the good rows, drop the damaged ones and record the gap in %s",
			ErrDamagedLog, r.opts.Dir, FileCheckpoint, r.from.Iter, strings.Join(bad, "; "), FileGaps)
	}
	for _, p := range plans {
		if p.bad() {
			rec := GapRecord{File: p.name, CheckpointIter: r.from.Iter, Missing: p.missing, Damaged: p.damaged,
				Kept: p.kept, Repaired: time.Now().UTC().Truncate(time.Second)}
			if err := runfile.Append(filepath.Join(r.opts.Dir, FileGaps), rec, runfile.Shared); err != nil {
				return err
			}
			r.res.note("repaired %s: kept %d rows, dropped %d damaged lines, %d rows missing; the gap is recorded in %s",
				p.path, p.kept, len(p.damaged), len(p.missing), FileGaps)
		}
		if p.changed {
			if err := runfile.WriteAtomic(p.path, p.keep, p.perm); err != nil {
				return err
			}
		}
	}
	return nil
}
