package main

import (
	"io"
	"strings"
)

// command is one row of the command table: everything its help page and
// docs/cli.md say about it besides its flags, which the command defines
// where it parses them (its help page asks it for them: run --help).
type command struct {
	name     string   // as typed after mkbench: "run", "models export"
	synopsis string   // one line, for mkbench help's list
	usage    []string // its forms, after "mkbench "
	// long is what it does and writes: a few short paragraphs, separated
	// by a blank line ("\n\n"), each wrapped on its own.
	long     string
	examples []string // whole command lines
	// resumes names what --resume DIR continues ("run", "experiment");
	// resumeTakes are the only flags besides --resume a resume takes:
	// every other flag set is refused, the thing resumed keeping its own
	// settings.
	resumes     string
	resumeTakes []string
	run         func(args []string, stdout, stderr io.Writer) int
	// hidden rows run but are listed nowhere: __complete, which the
	// completion scripts call.
	hidden bool
}

// commands is the command table, in the order mkbench help lists them.
// Subcommands ("models export", "sweep run") have rows of their own; their
// parent dispatches to them.
var commands []command

func init() {
	commands = []command{
		{name: "tui", synopsis: "the workbench (terminal UI): pick a preset or a shipped model, watch it train",
			usage: []string{"tui [--preset NAME] [--iters N] [--seed S] [--set KEY=VALUE ...] [--data DIR]", "tui --sweep DIR", "tui --runs [DIR]"},
			long: "Opens the workbench, which mkbench without arguments opens too. With --preset it starts training that preset at once; " +
				"with --sweep it watches a sweep's units, here or on a cluster (also w in the picker); with --runs it opens the runs screen on every run under DIR " +
				"(default: the runs root; also R in the picker and the dashboard). " +
				"It needs a terminal on stdin and stdout and refuses to open under CI; train headless with mkbench run.",
			examples: []string{"mkbench tui --preset sine-5shot --iters 2000", "mkbench tui --runs runs/", "mkbench tui --sweep runs/sweep-grid-20260101-1200"},
			run:      cmdTUI},
		{name: "run", synopsis: "train a preset headless, then evaluate it; --resume continues a stopped run",
			usage: []string{"run --preset NAME [--variant V] [--iters N] [--minutes M] [--seed S] [--out DIR] [--set KEY=VALUE ...] [flags]",
				"run --resume DIR [--iters N] [--minutes M] [--data DIR] [--repair] [--start-over] [--device D]"},
			long: "Trains a preset (mkbench presets lists them) and evaluates it on fresh test tasks, printing a progress line every two seconds. " +
				"The run directory (--out, default a new folder under ./runs or $MKBENCH_RUNS) gets config.json, metrics.jsonl, checkpoints, " +
				"TensorBoard event files and summary.json (docs/run-directory.md). --minutes stops training after that much training time, then evaluates as usual. " +
				"--set changes any setting of the preset (mkbench help settings lists every key); --iters, --seed and the other shorthands set the same keys. " +
				"config.json records them all, and the --data folder (absolute), which --resume and eval --run read from unless given another." +
				"\n\n" +
				"--resume DIR continues an interrupted run exactly where its checkpoint left it, and it ends with the bytes of an uninterrupted one; a finished run is left as it is. " +
				"A run stopped before its first checkpoint starts over, its files moved into DIR/stopped-TIME/. A run whose checkpoint.gob is lost although it validated or " +
				"finished is refused: evaluate it with mkbench eval --run DIR, or train it again from iteration 0 with --start-over (its files moved aside the same way). " +
				"--repair goes on past damaged metrics.jsonl or val.jsonl rows, recording the gap in gaps.jsonl." +
				"\n\n" +
				"--device (default $MKBENCH_DEVICE, else cpu) runs the image backbones on an OpenCL device: opencl (the first GPU, else the first device), opencl:N " +
				"(mkbench devices), or auto (a GPU when there is one, else the CPU, saying why). It is not a setting: config.json is the same on either, and summary.json " +
				"records the device. Results agree with the CPU's within tolerances, not in bytes, so a run resumed on another device than its checkpoint's says so. " +
				"An opencl device that cannot open (no loader, platform or CLBlast) is refused before anything is written (docs/gpu.md)." +
				"\n\n" +
				"Ctrl-C, SIGTERM and SIGHUP (a closed terminal, a dropped ssh; not under nohup) save a checkpoint first and print the --resume command (exit status 130). " +
				"A run too large for this machine's memory is refused before anything is allocated, with its estimate, the memory available and the largest size that fits. " +
				"A new run never writes into a directory that already holds a run, a sweep or an experiment; a run whose loss becomes non-finite stops at that iteration, " +
				"naming it, its last good checkpoint kept.",
			examples: []string{"mkbench run --preset sine-5shot", "mkbench run --preset omniglot-5w1s --variant vrf+ctx --minutes 30", "mkbench run --preset omniglot-5w1s --device auto",
				"mkbench run --preset sine-5shot --set lr=0.0005 --set clip_norm=1", "mkbench run --preset folder-5w1s --data ~/my-images --image-size 32 --set backbone=conv4",
				"mkbench run --resume runs/sine-5shot-metakernel-s1-20260101-1200"},
			resumes: "run", resumeTakes: []string{"iters", "minutes", "data", "repair", "start-over", "quiet", "device"},
			run: cmdRun},
		{name: "eval", synopsis: "evaluate a run or a trained model again, at its own or other settings",
			usage: []string{"eval --run DIR [--eval-tasks N] [--way W] [--shot K] [--query Q] [--samples S] [--json] [flags]",
				"eval --model NAME [--models-dir DIR] [flags]", "eval --run DIR --folder DIR2 [--split all|test]"},
			long: "Evaluates a run's best-validation parameters (or its last, where it never validated), or a trained model, on fresh test tasks. " +
				"With no other flag it reproduces the run's summary.json or the model's recorded result and says whether it matches. " +
				"--way, --shot, --query, --samples, --bases and --support-shift test the same parameters at other settings; --folder tests an image model on a folder of your own images." +
				"\n\n" +
				"--val evaluates on the run's validation classes instead, so that evaluation settings (--support-shift, --samples) are chosen without touching the test split; " +
				"it is refused for a model trained on them (train_split=trainval). A run is read from the --data folder it recorded unless given another. " +
				"An evaluation longer than five seconds prints evaluating: DONE/TOTAL tasks with an ETA on stderr every five seconds.",
			examples: []string{"mkbench eval --run runs/sine-5shot-metakernel-s1-20260101-1200", "mkbench eval --model omniglot-5w1s --eval-tasks 100",
				"mkbench eval --model omniglot-5w1s --way 20 --shot 5", "mkbench eval --run DIR --val --support-shift 1"},
			run: cmdEval},
		{name: "experiment", synopsis: "an experiment suite (ablation, versatility, efficiency, shots): its runs, tables and figures",
			usage: []string{"experiment NAME --preset P [--variants V,..] [--seeds S,..] [--iters N] [--minutes M] [--set KEY=VALUE ...] [flags]",
				"experiment --resume DIR", "experiment NAME ... --engine local|slurm [--jobs K] [--wait]"},
			long: "Runs one of the paper's experiments (NAME: ablation, versatility, efficiency, shots) on a preset: trains its runs, evaluates them and draws " +
				"results.json, results.csv, results.md and figures/ (PNG and SVG) in the experiment directory (--out, default ./runs/exp-NAME-PRESET-TIME). " +
				"Its training runs are the units of a sweep in that directory, so sweep status, cancel and resume work on it; --engine trains them with a sweep engine first. " +
				"Running the same command again on the same --out resumes it.",
			examples: []string{"mkbench experiment ablation --preset sine-5shot --iters 2000", "mkbench experiment versatility --model omniglot-5w1s",
				"mkbench experiment efficiency --preset sine-5shot --bases 16,64,256 --seeds 1,2,3", "mkbench experiment --resume runs/exp-ablation-sine-5shot-20260101-1200"},
			resumes: "experiment", resumeTakes: []string{"data", "quiet", "engine", "jobs", "wait", "slurm", "device"},
			run: cmdExperiment},
		{name: "devices", synopsis: "list the OpenCL platforms and devices --device can choose, with their memory and compute units",
			usage: []string{"devices [--json]"},
			long: "Lists every OpenCL device of every platform, in the order opencl:N counts them, with its type, platform, memory, largest buffer, compute units, " +
				"work-group size, OpenCL C version, double precision (FP64: yes keeps a backbone trained there in double-precision master weights and optimizer moments, " +
				"no in float32 ones) and driver. Without an OpenCL loader, platform or device it says which is missing and how to " +
				"install it, and exits 1 (--json prints an empty list first), so that a script can test for a device with its exit status; mkbench still runs on the CPU. " +
				"auto never picks a CPU device (PoCL): name it with opencl:N (docs/gpu.md).",
			examples: []string{"mkbench devices", "mkbench devices --json", "mkbench devices && mkbench run --preset omniglot-5w1s --device opencl"},
			run:      cmdDevices},
		{name: "report", synopsis: "redraw an experiment's or a sweep's tables and figures from its saved results",
			usage:    []string{"report DIR"},
			long:     "Reads an experiment's (or a sweep's) saved results and writes its tables and figures again, then prints the main table. Nothing is trained or evaluated.",
			examples: []string{"mkbench report runs/exp-ablation-sine-5shot-20260101-1200"},
			run:      cmdReport},
		{name: "sweep", synopsis: "grids of runs from a YAML sweep file, here or on Slurm: plan, run, status, resume, cancel",
			usage: []string{"sweep plan|run|status|resume|cancel|work ..."},
			long: "A sweep file (YAML) names presets, variants, seeds, iters or minutes, eval_tasks, a grid of settings (every combination), the device (cpu, opencl, opencl:N or auto) and Slurm options. " +
				"The local engine runs K units at a time here (default: one per core); the slurm engine submits a job array, and the mkbench binary, " +
				"the sweep directory and the data must then be on storage every node sees. mkbench help sweep run (and plan, status, …) describes each.",
			examples: []string{"mkbench sweep plan grid.yaml", "mkbench sweep run grid.yaml --out runs/grid --jobs 2", "mkbench sweep status runs/grid", "mkbench report runs/grid"},
			run:      cmdSweep},
		{name: "sweep plan", synopsis: "list a sweep file's units and their estimated cost; runs nothing",
			usage: []string{"sweep plan FILE [--json]"}, long: "Reads and checks a sweep file and lists its units with the training time each is estimated to take on the reference machine.",
			examples: []string{"mkbench sweep plan grid.yaml"}, run: subcommand(cmdSweep, "plan")},
		{name: "sweep run", synopsis: "start a sweep: make its directory and train its units with an engine",
			usage: []string{"sweep run FILE [--out DIR] [--engine local|slurm] [--jobs K] [--wait] [--dry-run] [--data DIR] [--device D]"},
			long: "Makes the sweep directory (sweep.json, units/) and trains the units: here K at a time (local), or as a Slurm job array. " +
				"Running it again on the same --out continues it. When every unit is through, the results are drawn as mkbench report does. " +
				"The units run on --device if given, else the sweep file's device:, else $MKBENCH_DEVICE, else the CPU; on Slurm a unit on a device asks for a GPU (--gres=gpu:1, or the file's slurm.gres).",
			examples: []string{"mkbench sweep run grid.yaml --out runs/grid", "mkbench sweep run grid.yaml --engine slurm --dry-run"},
			run:      subcommand(cmdSweep, "run")},
		{name: "sweep status", synopsis: "a sweep's units: finished, running, pending, failed, with Slurm's states",
			usage: []string{"sweep status DIR [--json]"}, long: "Prints each unit's state, its progress and, for a failed unit, why.",
			examples: []string{"mkbench sweep status runs/grid"}, run: subcommand(cmdSweep, "status")},
		{name: "sweep resume", synopsis: "continue a sweep's stopped units (--retry-failed: the failed ones too)",
			usage:    []string{"sweep resume DIR [--engine local|slurm] [--jobs K] [--wait] [--retry-failed] [--device D]"},
			long:     "Trains the units that stopped (cancelled, killed, out of time) from their checkpoints; units that failed for good wait for --retry-failed. They keep the sweep's device unless --device names another.",
			examples: []string{"mkbench sweep resume runs/grid", "mkbench sweep resume runs/grid --retry-failed"},
			run:      subcommand(cmdSweep, "resume")},
		{name: "sweep cancel", synopsis: "stop every unit of a sweep (each saves a checkpoint first)",
			usage: []string{"sweep cancel DIR"}, long: "Stops the sweep's running units, which save a checkpoint first, and its pending ones; mkbench sweep resume continues them.",
			examples: []string{"mkbench sweep cancel runs/grid"}, run: subcommand(cmdSweep, "cancel")},
		{name: "sweep work", synopsis: "run one unit of a sweep (what each Slurm array task runs)",
			usage: []string{"sweep work DIR --index I [--device D]"}, long: "Trains unit I of the sweep in DIR, on the unit's device (sweep.json) unless --device names another. The engines start it; you need it only to run one unit by hand.",
			examples: []string{"mkbench sweep work runs/grid --index 3"}, run: subcommand(cmdSweep, "work")},
		{name: "runs", synopsis: "the runs under a folder, grouped by experiment and sweep",
			usage: []string{"runs [DIR] [--json] [--sort KEY] [--filter TEXT]"},
			long: "Lists every run under DIR (default: the runs root, ./runs or $MKBENCH_RUNS), inside experiment and sweep directories too, under a heading per " +
				"experiment or sweep: the workbench's runs screen, headless. Each run has its directory, preset, variant, seed, iterations done of its total, state, " +
				"final metric ± its 95% interval (before the end, the latest validation, marked val), training time and age; --sort keeps the runs in their groups." +
				"\n\n" +
				"A run is finished; running (its lock is live, or, for a run last locked on another host such as a Slurm node, its checkpoint is younger than two " +
				"checkpoint intervals and a minute); failed (it holds failed.json); or stopped (before its end: mkbench run --resume continues it).",
			examples: []string{"mkbench runs", "mkbench runs runs/ --sort -metric --filter omniglot", "mkbench runs --json"},
			run:      cmdRuns},
		{name: "presets", synopsis: "list the presets, each with its data set and size",
			usage: []string{"presets"}, long: "Lists every preset mkbench run, tui and experiment take, with what it trains.",
			examples: []string{"mkbench presets"}, run: cmdPresets},
		{name: "models", synopsis: "the trained models shipped in mkbench (or in a folder of models)",
			usage: []string{"models [--models-dir DIR] [--json]", "models export RUN [--name NAME] [--models-dir DIR]"},
			long: "Lists the trained models shipped in mkbench, or those in the folder --models-dir names, with each one's test result, training and the settings it departs from its preset in. " +
				"mkbench eval --model and the workbench's picker open them. A damaged model is listed as damaged, its reason on stderr, and the others as usual.",
			examples: []string{"mkbench models", "mkbench models --models-dir my-models --json"},
			run:      cmdModels},
		{name: "models export", synopsis: "a run's best model, in float32, into a folder of models",
			usage: []string{"models export RUN [--name NAME] [--models-dir DIR] [--force] [--support-shift R]"},
			long: "Writes the run's evaluated parameters (its best validation's, or its last) as a float32 model folder, tests the model it wrote with the run's " +
				"evaluation settings and records the result beside it. The run is read under its lock." +
				"\n\n" +
				"A model is written whole or not at all: a hidden .NAME.tmp-DIGITS folder, renamed into place under the lock of the folder of models. It holds model.mkbm " +
				"(float32 parameters with the config, SHA-256 checked, at most 8 MB: the paper's 3.2 M-parameter Omniglot model is refused, its 1.7 M-parameter " +
				"infer_hidden=128 variant fits), model.json with the test result of the model as written, and the run's curves. A name the folder holds is refused " +
				"without --force; a replaced model is kept until the new one is in place. The default folder, presets/models/shipped, is built into the binary.",
			examples: []string{"mkbench models export runs/omniglot-5w1s-metakernel-s1-20260101-1200 --name my-omniglot --models-dir my-models"},
			run:      subcommand(cmdModels, "export")},
		{name: "export", synopsis: "logs as TensorBoard event files, or every metric as one CSV or JSON table",
			usage: []string{"export DIR --tensorboard [--force] [--data DIR2]", "export DIR --format csv|json [--out FILE [--force]]"},
			long: "Exports the logs of a run, or of every run below DIR (a sweep's, an experiment's). --tensorboard writes an event file into each run that has none, " +
				"from its metrics.jsonl, val.jsonl and checkpoints (runs write their own as they train, so most need nothing); without a run's data its ω histograms " +
				"are left out, with a note." +
				"\n\n" +
				"--format writes one tidy table to stdout, or to --out FILE, with the columns run (the run directory relative to DIR, . for DIR itself), iter, " +
				"metric (every metrics.jsonl field, val_METRIC and val_METRIC_ci95) and value. Log rows that do not parse are left out, with a note giving their " +
				"line numbers. --out never lands on a run's own file (links and .. followed) and replaces a file only with --force.",
			examples: []string{"mkbench export runs/grid --format csv --out grid.csv", "mkbench export runs/old-run --tensorboard"},
			run:      cmdExport},
		dataCommand, dataGetCommand, // data_cli.go
		completionCommand, completeCommand, // completion_cli.go
		{name: "help", synopsis: "this list; help CMD, help settings (every --set key), help environment",
			usage: []string{"help [CMD [SUB]]", "help settings", "help environment", "help --markdown cli|settings"},
			long: "Prints the help page of a command (as mkbench CMD --help does), every setting --set takes with its help, kind and default, or the environment variables mkbench reads. " +
				"--markdown writes the pages docs/cli.md and docs/settings.md are made of.",
			examples: []string{"mkbench help run", "mkbench help models export", "mkbench help settings"},
			run:      cmdHelp},
		{name: "version", synopsis: "print mkbench's version (also --version)",
			usage: []string{"--version"}, long: "Prints the version mkbench was built as.", examples: []string{"mkbench --version"},
			run: cmdVersion},
	}
}

// subcommand runs parent with sub put back in front of args, so a
// subcommand's row runs it as mkbench PARENT SUB … does.
func subcommand(parent func([]string, io.Writer, io.Writer) int, sub string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return parent(append([]string{sub}, args...), stdout, stderr)
	}
}

// lookupCommand is the row named name ("sweep run"), or nil.
func lookupCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// topCommands are the names mkbench takes first, hidden ones left out.
func topCommands() []string {
	var out []string
	for _, c := range commands {
		if !strings.Contains(c.name, " ") && !c.hidden {
			out = append(out, c.name)
		}
	}
	return out
}

// subcommands are the rows under parent ("sweep" → plan, run, …).
func subcommands(parent string) []string {
	var out []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, parent+" "); ok {
			out = append(out, sub)
		}
	}
	return out
}
