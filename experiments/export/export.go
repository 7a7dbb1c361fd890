package export

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Run is a run directory to export: its path and its name in the table
// (relative to the directory given, "." for that directory itself).
type Run struct{ Dir, Rel string }

// Runs finds the runs of dir: dir itself when it is a run, else every run
// below it (the units of a sweep, the runs of an experiment, or any
// folder of runs), as runs.Find finds them.
func Runs(dir string) ([]Run, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("export: %s is not a directory; give a run, sweep or experiment directory", dir)
		}
		return nil, fmt.Errorf("export: %w", err)
	}
	for _, f := range []string{engine.FileConfig, engine.FileCheckpoint} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return []Run{{dir, "."}}, nil
		}
	}
	found, err := runs.Find(dir)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("export: %s holds no run (no %s or %s in it or below it); give a run, sweep or experiment directory", dir, engine.FileConfig, engine.FileCheckpoint)
	}
	out := make([]Run, len(found))
	for i, e := range found {
		out[i] = Run{e.Dir, filepath.ToSlash(e.Rel)}
	}
	return out, nil
}

// Row is one row of the tidy table.
type Row struct {
	Run    string  `json:"run"`
	Iter   int     `json:"iter"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
}

// Rows are run r's rows: each metrics.jsonl field by its name, each
// validation as val_<metric> and val_<metric>_ci95, by iteration (at an
// iteration, the metrics first). Damaged lines left out are told to note.
func Rows(r Run, note func(string)) ([]Row, error) {
	metrics, vals, err := readLogs(r.Dir, note)
	if err != nil {
		return nil, err
	}
	var out []Row
	add := func(iter int, vs []engine.NamedValue) {
		for _, v := range vs {
			out = append(out, Row{r.Rel, iter, strings.ReplaceAll(v.Name, "/", "_"), v.Value})
		}
	}
	for _, m := range metrics {
		add(m.Iter, m.Values())
	}
	for _, v := range vals {
		add(v.Iter, v.Values())
	}
	slices.SortStableFunc(out, func(a, b Row) int { return cmp.Compare(a.Iter, b.Iter) })
	return out, nil
}

// readLogs reads run dir's metrics.jsonl and val.jsonl, telling note of
// the damaged lines it leaves out (a last row cut by a kill is no loss
// and not told).
func readLogs(dir string, note func(string)) ([]engine.MetricsRow, []engine.ValRow, error) {
	mpath, vpath := filepath.Join(dir, engine.FileMetrics), filepath.Join(dir, engine.FileVal)
	metrics, mskip, err := runfile.ReadRows[engine.MetricsRow](mpath)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	vals, vskip, err := runfile.ReadRows[engine.ValRow](vpath)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	for _, n := range []string{runfile.SkippedNote(mpath, mskip), runfile.SkippedNote(vpath, vskip)} {
		if n != "" {
			note(n)
		}
	}
	return metrics, vals, nil
}

// WriteTidy writes every run's rows as CSV or as a JSON array (format
// "csv" or "json"), a run at a time, so that a large sweep is never held
// whole. Damaged log lines left out are told to note.
func WriteTidy(w io.Writer, list []Run, format string, note func(string)) error {
	var cw *csv.Writer
	switch format {
	case "csv":
		cw = csv.NewWriter(w)
		cw.Write([]string{"run", "iter", "metric", "value"})
	case "json":
		io.WriteString(w, "[")
	default:
		return fmt.Errorf("export: format %q: want csv or json", format)
	}
	n := 0
	for _, r := range list {
		rows, err := Rows(r, note)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if cw != nil {
				cw.Write([]string{row.Run, strconv.Itoa(row.Iter), row.Metric, strconv.FormatFloat(row.Value, 'g', -1, 64)})
				continue
			}
			b, err := json.Marshal(row)
			if err != nil {
				return fmt.Errorf("export: %s, iteration %d, %s: %w", r.Dir, row.Iter, row.Metric, err)
			}
			if n > 0 {
				io.WriteString(w, ",")
			}
			io.WriteString(w, "\n")
			w.Write(b)
			n++
		}
	}
	if cw != nil {
		cw.Flush()
		return cw.Error()
	}
	if n > 0 {
		io.WriteString(w, "\n")
	}
	_, err := io.WriteString(w, "]\n")
	return err
}

// CheckOut refuses a table's destination out that would land on a run's
// own file — any file a run directory holds under a name the engine
// writes, however the path reaches it (symlinks, ..) — and one that
// exists, unless force.
func CheckOut(out string, force bool) error {
	for _, p := range []string{out, resolved(out)} {
		if dir, base := filepath.Dir(p), filepath.Base(p); engine.OwnFile(base) && engine.IsRunDir(dir) {
			return fmt.Errorf("export: --out %s is %s of the run in %s, which export never writes over; write the table elsewhere", out, base, dir)
		}
	}
	st, err := os.Stat(out)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("export: --out %s is a folder; give a file name, e.g. %s", out, filepath.Join(out, "metrics.csv"))
	case err == nil && !force:
		return fmt.Errorf("export: --out %s exists; add --force to replace it, or choose another file", out)
	}
	return nil
}

// resolved is path p with every symlink of it, and of the folders above
// it, followed, as far as they exist.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}
