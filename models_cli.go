package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// shippedDir is where `mkbench models export` writes by default: the
// folder built into the binary, in a checkout of mkbench.
const shippedDir = "presets/models/shipped"

// library is the shipped models, or the folder --models-dir names.
func library(dir string) models.Library {
	if dir != "" {
		return models.Dir(dir)
	}
	return models.Shipped()
}

// cmdModels lists the trained models (mkbench models), or exports a run's
// model into a folder of them (mkbench models export).
func cmdModels(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "export" {
		return cmdModelsExport(args[1:], stdout, stderr)
	}
	fs := newFlags("models")
	dir := fs.String("models-dir", "", "list the models in this folder instead of those shipped in mkbench")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	fs.alias("dir", "models-dir") // its name before --models-dir was the one name everywhere
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	// A damaged model is listed as such, and the others all the same.
	list, err := library(*dir).List()
	var damaged *models.DamagedError
	if err != nil && !errors.As(err, &damaged) {
		return fail(stderr, err)
	}
	if damaged != nil {
		for _, d := range damaged.Damaged {
			say(stderr, "note: %v", d.Err)
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(list, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if len(list) == 0 && damaged == nil {
		fmt.Fprintln(stdout, "no models (mkbench models export RUN --name NAME adds one)")
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MODEL\tPRESET\tVARIANT\tTEST\tTRAINED\tITERATIONS\tPARAMETERS\tSETTINGS")
	for _, m := range list {
		at := fmt.Sprintf("best %d", m.BestIter)
		if m.Last {
			at = "last"
		}
		// A models folder handed over names its models as it likes.
		settings := "the preset's"
		if len(m.Settings) > 0 {
			settings = strings.Join(m.Settings, " ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.1f min\t%d (%s)\t%d\t%s\n", runfile.Printable(m.Name), runfile.Printable(m.Preset), runfile.Printable(m.Variant), m.Test,
			m.TrainSeconds/60, m.Iters, at, m.Params, runfile.Printable(settings))
	}
	if damaged != nil {
		for _, d := range damaged.Damaged {
			fmt.Fprintf(w, "%s\tdamaged (see the note above)\t\t\t\t\t\t\n", runfile.Printable(d.Name))
		}
	}
	w.Flush()
	return 0
}

// cmdModelsExport writes a run's evaluated model (its best validation's
// parameters) as a model folder, testing the float32 model it writes with
// the run's evaluation settings.
func cmdModelsExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("models export")
	name := fs.String("name", "", "the model's name (default: the run's preset)")
	dir := fs.String("models-dir", shippedDir, "the folder of models to write into")
	data := fs.String("data", "", dataHelp)
	force := fs.Bool("force", false, "replace a model of that name the folder already holds (it is kept until the new one is in place)")
	shift := fs.Int("support-shift", 0, "image classification: sets the model's eval_support_shift: it evaluates with each support image joined by its copies shifted by up to this many pixels (chosen after training with mkbench eval --val --support-shift; default: the run's)")
	fs.alias("dir", "models-dir") // its name before --models-dir was the one name everywhere
	var run string
	run, args = leadingArg(run, args)
	set, code, ok := parseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if run == "" {
		return fail(stderr, errors.New("models export: give the run directory first: mkbench models export RUN [--name NAME] [--models-dir DIR] [--force] [--support-shift R]"))
	}
	// Read under the run's lock, so that no run writes it meanwhile; a run
	// on read-only media is read without.
	lock, note, err := engine.LockRunToRead(run)
	if err != nil {
		return fail(stderr, fmt.Errorf("models export: %w", err))
	}
	defer lock.Release()
	if note != "" {
		say(stderr, "note: %s", note)
	}
	recordedData(run, set, data)
	rc, err := engine.ReadRunConfig(run)
	if err != nil {
		return fail(stderr, err)
	}
	if *name == "" {
		*name = rc.Preset
	}
	var adjust func(*engine.Config)
	if set["support-shift"] {
		adjust = func(c *engine.Config) { c.EvalSupportShift = *shift }
		adjust(&rc.Config) // the settings name it
	}
	var settings []string
	if p, err := presets.Get(rc.Preset); err == nil {
		base := p.Config
		if err := base.ApplyVariant(rc.Config.Variant(), rc.Config.FlowLayers); err == nil {
			settings = presets.ConfigDiff(base, rc.Config)
		}
	}
	info, note, err := models.Export(run, *dir, *name, *force, settings, adjust, func(ck *engine.Checkpoint) (engine.EvalResult, error) {
		c := ck.Config
		srcs, err := presets.NewSources(ck.Source, c, *data)
		if err != nil {
			return engine.EvalResult{}, err
		}
		ev, _, err := presets.EvaluateModel(ck, srcs, c.EvalTasks, evalProgress(stderr, ""))
		return ev, err
	})
	if err != nil {
		return fail(stderr, err)
	}
	if note != "" {
		say(stderr, "note: %s: %s", filepath.Join(*dir, info.Name), note)
	}
	fmt.Fprintf(stdout, "exported %s → %s: %s, %d parameters (float32)\n", run, filepath.Join(*dir, info.Name), info.Test, info.Params)
	return 0
}

// nearestModel adds to err, when it is a model name lib does not hold,
// the nearest name it does hold.
func nearestModel(lib models.Library, name string, err error) error {
	if !errors.Is(err, models.ErrNoModel) {
		return err
	}
	list, _ := lib.List() // a damaged model is no suggestion
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	if s := suggest(name, names); s != "" {
		return fmt.Errorf("%w; did you mean %s?", err, runfile.Printable(s))
	}
	return err
}
