package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mkbench/mkbench/internal/runfile"

	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/presets"
)

// cmdRuns prints the runs under a runs root (mkbench runs): the table of
// the workbench's runs screen, headless.
func cmdRuns(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("runs")
	asJSON := fs.Bool("json", false, "print the runs as JSON (with each run's config)")
	sortKey := fs.String("sort", "run", "sort by this column within each group: "+strings.Join(runs.SortKeys, ", ")+"; -KEY sorts descending")
	filter := fs.String("filter", "", "keep the runs whose directory, group, preset, variant, state or seed contain every word of TEXT")
	root := presets.RunsRoot()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		root, args = args[0], args[1:]
	}
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	key, desc := strings.CutPrefix(*sortKey, "-")
	rs, err := runs.Scan(root)
	if err != nil {
		return fail(stderr, err)
	}
	if err := runs.Sort(rs, key, desc); err != nil {
		return fail(stderr, fmt.Errorf("--sort: %w", err))
	}
	rs = runs.Filter(rs, *filter)
	if *asJSON {
		if rs == nil {
			rs = []runs.Run{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rs); err != nil {
			return fail(stderr, err)
		}
		return 0
	}
	if len(rs) == 0 {
		what := "no runs under " + root
		if *filter != "" {
			what += fmt.Sprintf(" match %q", *filter)
		}
		fmt.Fprintln(stdout, what)
		return 0
	}
	printRuns(stdout, rs, time.Now())
	return 0
}

// printRuns writes the runs table, a heading before each group. The
// columns are as wide across groups as within one.
func printRuns(out io.Writer, rs []runs.Run, now time.Time) {
	rows := [][]string{{"RUN", "PRESET", "VARIANT", "SEED", "ITERS", "STATE", "METRIC", "TIME", "DEVICE", "AGE"}}
	for _, r := range rs {
		row := []string{runs.InGroup(r), r.Preset, r.Variant, fmt.Sprint(r.Seed), fmt.Sprintf("%d/%d", r.Iter, r.Iters),
			state(r), runs.MetricText(r), runs.Duration(r.TrainSeconds), runs.DeviceText(r.Device), runs.Age(now.Sub(r.Modified))}
		for c := range row {
			row[c] = runfile.Printable(row[c]) // folders and files handed over name runs as they like
		}
		rows = append(rows, row)
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for c, cell := range row {
			width[c] = max(width[c], utf8.RuneCountInString(cell))
		}
	}
	line := func(row []string) {
		var b strings.Builder
		for c, cell := range row {
			b.WriteString(cell)
			if c < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[c]-utf8.RuneCountInString(cell)+2))
			}
		}
		fmt.Fprintln(out, b.String())
	}
	line(rows[0])
	group := ""
	for i, r := range rs {
		if i == 0 && r.Group != "" || r.Group != group {
			group = r.Group
			n := 0
			for _, s := range rs {
				if s.Group == group {
					n++
				}
			}
			word := "runs"
			if n == 1 {
				word = "run"
			}
			fmt.Fprintf(out, "\n%s %s: %d %s\n", r.Kind, runfile.Printable(group), n, word)
		}
		line(rows[i+1])
	}
}

// state is a run's state column: a run that could not be read says why.
func state(r runs.Run) string {
	if r.State == "" {
		return "unreadable: " + r.Error
	}
	return r.State
}
