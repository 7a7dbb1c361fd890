package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// recordedData sets *data to the data folder run directory dir recorded
// when it started, unless --data was given. A config.json that is missing
// or damaged (the checkpoint still holds the run) leaves the default.
func recordedData(dir string, set map[string]bool, data *string) {
	if set["data"] {
		return
	}
	if rc, err := engine.ReadRunConfig(dir); err == nil {
		*data = rc.Data
	}
}

// evalOpts are mkbench eval's flags, parsed and checked.
type evalOpts struct {
	run, model, modelsDir, data string
	folder, split               string
	testSources                 []string // --test-sources, parsed
	tasks, way, shot, query     int
	samples, bases, shift       int
	asJSON, onVal               bool
	device                      opencl.Selection // --device, or $MKBENCH_DEVICE
	set                         map[string]bool  // the flags given
}

func cmdEval(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseEval(args, stdout, stderr)
	if !ok {
		return code
	}
	return o.eval(stdout, stderr)
}

// parseEval parses eval's flags. ok is false when the command is done
// (--help, or a refusal already printed), code being its exit status.
func parseEval(args []string, stdout, stderr io.Writer) (o evalOpts, code int, ok bool) {
	fs := newFlags("eval")
	run := fs.String("run", "", "run directory to evaluate")
	model := fs.String("model", "", "evaluate this trained model instead of a run (mkbench models lists them)")
	modelsDir := fs.String("models-dir", "", "with --model: the folder of models to read it from (default: those shipped in mkbench)")
	tasks := fs.Int("eval-tasks", 0, "number of evaluation tasks (default: the run's)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	data := fs.String("data", "", dataHelp)
	way := fs.Int("way", 0, "classification: evaluate on tasks of this many classes (default: as trained)")
	shot := fs.Int("shot", 0, "classification: support examples per class (default: as trained)")
	query := fs.Int("query", 0, "query points per task (per class when classifying; default: the run's); shot + query must fit the images a class has (20 for Omniglot)")
	samples := fs.Int("samples", 0, "ω draws averaged per prediction (the posterior predictive; default: the run's eval_samples)")
	bases := fs.Int("bases", 0, "random Fourier bases D drawn per task at evaluation (default: the run's bases, as trained); no parameter depends on D, so more bases estimate the same kernel with less noise")
	shift := fs.Int("support-shift", 0, "image classification: sets eval_support_shift: join each support image with its copies shifted by up to this many pixels in each direction, (2r+1)² images of each (test-time augmentation of the support set; default: the run's eval_support_shift, 0 = none)")
	onVal := fs.Bool("val", false, "evaluate on the run's validation classes instead of its test classes (to choose evaluation settings without touching the test split)")
	folder := fs.String("folder", "", "image models: evaluate on this folder of your own images (DIR/<class>/*.png|jpg, or DIR/{train,val,test}/<class>/…) instead of the run's data: cross-domain, e.g. an Omniglot model on your own characters")
	split := fs.String("split", "all", "with --folder: all (every class of the folder) or test (its test classes)")
	testSources := fs.String("test-sources", "", "Meta-Dataset runs: test on these sources, a,b (default: the run's)")
	device := deviceFlag(fs)
	set, code, ok := parseArgs(fs, args, stdout, stderr)
	if !ok {
		return o, code, false
	}
	o = evalOpts{run: *run, model: *model, modelsDir: *modelsDir, data: *data, folder: *folder, split: *split, tasks: *tasks, way: *way, shot: *shot,
		query: *query, samples: *samples, bases: *bases, shift: *shift, asJSON: *asJSON, onVal: *onVal, set: set}
	refuse := func(err error) (evalOpts, int, bool) { return o, fail(stderr, err), false }
	if (o.run == "") == (o.model == "") {
		return refuse(errors.New("eval: give --run DIR (a run directory) or --model NAME (mkbench models lists them)"))
	}
	var err error
	if o.device, err = deviceSelection("eval", set, *device); err != nil {
		return refuse(err)
	}
	if set["models-dir"] && o.model == "" {
		return refuse(errors.New("eval: --models-dir applies to --model NAME"))
	}
	if err := checkPositive(fs, set, "eval-tasks", "way", "shot", "query", "samples", "bases"); err != nil {
		return refuse(err)
	}
	if set["test-sources"] {
		_, v, err := presets.ParseSet("test_sources=" + *testSources)
		if err != nil {
			return refuse(fmt.Errorf("eval: --test-sources: %w", err))
		}
		o.testSources = v.([]string)
	}
	if set["split"] && !set["folder"] {
		return refuse(errors.New("eval: --split applies to --folder DIR"))
	}
	if o.onVal && (o.folder != "" || set["test-sources"]) {
		return refuse(errors.New("eval: --val evaluates on the run's own validation classes: leave out --folder and --test-sources"))
	}
	return o, 0, true
}

// eval evaluates the run or model o names and prints the result, and
// whether it matches the one recorded when nothing was changed.
func (o evalOpts) eval(stdout, stderr io.Writer) int {
	set := o.set
	data := o.data
	var ck *engine.Checkpoint
	var which, note string
	var shipped *models.Info
	device, release, err := useDevice("eval", o.device, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer release()
	if o.model != "" {
		var info models.Info
		lib := library(o.modelsDir)
		if ck, info, err = lib.Open(o.model); err != nil {
			return fail(stderr, fmt.Errorf("eval: %w", nearestModel(lib, o.model, err)))
		}
		which, shipped = "model "+o.model+"'s", &info
	} else {
		// The run directory is locked while it is evaluated, so a run
		// resumed into it meanwhile is refused (and this refused while it
		// trains). A directory that does not exist is not created:
		// loading says so. A run on read-only media is read without the
		// lock, which it cannot hold and no writer can either.
		if st, err := os.Stat(o.run); err == nil && st.IsDir() {
			lock, roNote, err := engine.LockRunToRead(o.run)
			if err != nil {
				return fail(stderr, fmt.Errorf("eval: %w", err))
			}
			defer lock.Release()
			if roNote != "" {
				say(stderr, "note: %s", roNote)
			}
		}
		// A run that validated is tested with its best-validation
		// parameters, as its summary was; where best.gob is missing the
		// note says which checkpoint stands in.
		if ck, which, note, err = engine.LoadEvalCheckpoint(o.run); err != nil {
			return fail(stderr, err)
		}
		recordedData(o.run, set, &data)
	}
	if note != "" {
		say(stderr, "note: %s", note)
	}
	c := &ck.Config
	if (set["way"] || set["shot"]) && !c.Classify() {
		return fail(stderr, errors.New("eval: --way and --shot apply to classification runs only"))
	}
	// Evaluation draws no training episodes: a model trained at a higher
	// way or another shot (train_way, train_shot) is rebuilt at the way
	// and shot it is tested on.
	c.ClearTrainingShape()
	if set["way"] {
		c.Way = o.way
	}
	if set["shot"] {
		c.Shot = o.shot
	}
	if set["samples"] {
		c.EvalSamples = o.samples
	}
	if set["bases"] {
		c.Bases = o.bases
	}
	if set["support-shift"] {
		c.EvalSupportShift = o.shift
	}
	if set["query"] {
		// The training source is built too (the model is rebuilt on it),
		// so its queries follow.
		c.EvalQuery, c.Query = o.query, o.query
	}
	if set["eval-tasks"] {
		// Bounded and counted in the memory estimate as the run's own.
		c.EvalTasks = o.tasks
	}
	if err := c.Validate(); err != nil {
		return fail(stderr, fmt.Errorf("eval: %w", err))
	}
	if err := presets.CheckMemory(o.run, ck.Source, *c, engine.Config.EvalMemoryEstimate,
		map[string]string{"way": "--way", "shot": "--shot", "eval_query": "--query", "eval_support_shift": "--support-shift", "eval_tasks": "--eval-tasks"}); err != nil {
		return fail(stderr, fmt.Errorf("eval: %w", err))
	}
	if set["test-sources"] {
		c.TestSources = o.testSources
	}
	if o.onVal && c.TrainingSplit() != engine.SplitTrain {
		return fail(stderr, fmt.Errorf("eval: --val: this model trained on its validation classes (train_split %s), so they test nothing", c.TrainSplit))
	}
	var srcs presets.Sources
	if o.folder != "" {
		srcs, err = folderSources(o.folder, o.split, ck.Source, *c)
	} else {
		srcs, err = presets.NewSources(ck.Source, *c, data)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if o.onVal {
		if srcs.Val == nil {
			return fail(stderr, fmt.Errorf("eval: --val: %s runs have no validation split", ck.Source))
		}
		srcs.Test, srcs.TestBy = srcs.Val, nil
	}
	n := c.EvalTasks
	if o.folder != "" {
		srcs.TestBy = nil // the folder's classes, not the run's sources
	}
	shorter := ""
	if !set["eval-tasks"] {
		shorter = evalShorter(n)
	}
	res, bySource, err := presets.EvaluateModel(ck, srcs, n, evalProgress(stderr, shorter))
	if err != nil {
		return fail(stderr, err)
	}
	for _, s := range srcs.TestBy {
		if r := bySource[s.Name]; r != nil && !o.asJSON {
			fmt.Fprintf(stdout, "%-16s %s\n", s.Name, r)
		}
	}
	if o.asJSON && bySource != nil {
		b, _ := json.MarshalIndent(struct {
			Eval     engine.EvalResult             `json:"eval"`
			BySource map[string]*engine.EvalResult `json:"eval_by_source"`
		}{res, bySource}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if o.asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s (%s, %s, seed %d, iteration %d, %s checkpoint)%s\n", res, ck.Preset, c.Variant(), c.Seed, ck.Iter, which, onDevice(device))
	if set["bases"] {
		fmt.Fprintf(stdout, "with %d bases drawn per task\n", c.Bases)
	}
	if c.EvalSupportShift > 0 {
		fmt.Fprintf(stdout, "with each support image and its copies shifted by up to %d pixels (%d images each)\n", c.EvalSupportShift, c.EvalShifts())
	}
	if o.onVal {
		fmt.Fprintln(stdout, "on the validation classes")
	}
	if o.folder != "" {
		fmt.Fprintf(stdout, "on %s (%s classes), read as %s images\n", o.folder, o.split, ck.Source)
		return 0
	}
	same := !set["way"] && !set["shot"] && !set["query"] && !set["test-sources"] && !set["samples"] && !set["bases"] && !set["support-shift"] && !o.onVal
	if shipped != nil {
		if same && shipped.Test.Tasks == res.Tasks {
			if shipped.Test.Mean == res.Mean {
				fmt.Fprintln(stdout, "matches the model's recorded test result")
			} else {
				fmt.Fprintf(stdout, "differs from the model's recorded test result (%.6g)\n", shipped.Test.Mean)
			}
		}
		return 0
	}
	if sum, err := engine.ReadSummary(o.run); err == nil && sum != nil && same && sum.Eval != nil && sum.Eval.Tasks == res.Tasks {
		if sum.Eval.Mean == res.Mean {
			fmt.Fprintln(stdout, "matches summary.json")
		} else {
			fmt.Fprintf(stdout, "differs from summary.json (%.6g)\n", sum.Eval.Mean)
		}
	}
	return 0
}
