package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mkbench/mkbench/experiments/export"
	"github.com/mkbench/mkbench/internal/runfile"
)

const exportForm = "mkbench export DIR --tensorboard [--force] [--data DIR2] | mkbench export DIR --format csv|json [--out FILE [--force]]"

// cmdExport writes the logs of a run, or of every run of a sweep or an
// experiment, in a format other tools read: TensorBoard event files in
// each run's directory (--tensorboard), or one tidy table of every
// metric (--format).
func cmdExport(args []string, stdout, stderr io.Writer) int {
	var dir string
	dir, args = leadingArg(dir, args)
	fs := newFlags("export")
	tb := fs.Bool("tensorboard", false, "write TensorBoard event files (events.out.tfevents.*) into each run's directory, from its metrics.jsonl and val.jsonl, with ω histograms from its checkpoints when its data can be read")
	force := fs.Bool("force", false, "with --tensorboard: replace the event files a run already has (else such a run is left as it is); with --out: replace the file there")
	data := fs.String("data", "", "with --tensorboard: the folder of the runs' data set, for the ω histograms (default: the folder each run recorded)")
	format := fs.String("format", "", "csv or json: every run's metrics as one table with the columns run, iter, metric, value")
	out := fs.String("out", "", "with --format: write the table to this file (default: standard output)")
	set, code, ok := parseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case dir == "":
		return fail(stderr, fmt.Errorf("export: name the directory first: %s", exportForm))
	case *tb && set["format"]:
		return fail(stderr, errors.New("export: give --tensorboard or --format, not both (run export twice for both)"))
	case !*tb && !set["format"]:
		return fail(stderr, errors.New("export: say what to write: --tensorboard (event files in each run's directory) or --format csv|json (one table)"))
	case set["format"] && *format != "csv" && *format != "json":
		return fail(stderr, fmt.Errorf("export: --format %q: want csv or json", *format))
	case set["out"] && !set["format"]:
		return fail(stderr, errors.New("export: --out goes with --format (event files are written into each run's own directory)"))
	case set["data"] && !*tb:
		return fail(stderr, errors.New("export: --data goes with --tensorboard"))
	case *force && !*tb && !set["out"]:
		return fail(stderr, errors.New("export: --force goes with --tensorboard or --out"))
	}
	if set["out"] {
		if err := export.CheckOut(*out, *force); err != nil {
			return fail(stderr, err)
		}
	}
	list, err := export.Runs(dir)
	if err != nil {
		return fail(stderr, err)
	}
	if *tb {
		return exportTensorBoard(list, *force, *data, set["data"], stdout, stderr)
	}
	note := func(n string) { say(stderr, "note: %s", n) }
	if *out == "" {
		w := bufio.NewWriter(stdout)
		if err := export.WriteTidy(w, list, *format, note); err != nil {
			return fail(stderr, err)
		}
		if err := w.Flush(); err != nil {
			return fail(stderr, fmt.Errorf("export: %w", err))
		}
		return 0
	}
	// Written whole, and without --force only where nothing is by then:
	// of two exports to one file, the second is refused, not interleaved.
	write := runfile.WriteNewFunc
	if *force {
		write = runfile.WriteAtomicFunc
	}
	if err := write(*out, runfile.Shared, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		if err := export.WriteTidy(bw, list, *format, note); err != nil {
			return err
		}
		return bw.Flush()
	}); errors.Is(err, os.ErrExist) {
		return fail(stderr, fmt.Errorf("export: %s was written meanwhile by another process; add --force to replace it", *out))
	} else if err != nil {
		return fail(stderr, fmt.Errorf("export: %w", err))
	}
	fmt.Fprintf(stdout, "%d runs → %s\n", len(list), *out)
	return 0
}

// exportTensorBoard writes an event file into each run of list from its
// logs and checkpoints, the ω histograms on the data --data names, else
// on the data each run recorded. A run that cannot be exported (in use,
// unreadable) is noted and the others go on; the exit status is then 1.
func exportTensorBoard(list []export.Run, force bool, data string, dataSet bool, stdout, stderr io.Writer) int {
	failed := 0
	for _, r := range list {
		d := data
		recordedData(r.Dir, map[string]bool{"data": dataSet}, &d)
		res, err := export.TensorBoard(r.Dir, force, d)
		for _, n := range res.Notes {
			say(stderr, "note: %s: %s", r.Dir, n)
		}
		if err != nil {
			say(stderr, "%v", err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "%s: %s\n", r.Dir, res.Msg)
	}
	if failed > 0 {
		if len(list) > 1 {
			say(stderr, "%d of %d runs not exported", failed, len(list))
		}
		return 1
	}
	return 0
}
