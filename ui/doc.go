// Package ui is the terminal workbench that `mkbench` opens (bubbletea v1,
// lipgloss v1, bubbles v1, ntcharts v0.5). It only draws and routes keys:
// training runs in the engine, each run in its own goroutine managed by
// the subpackage session, which knows nothing of the terminal, and each
// experiment in an experiments.Runner.
//
// # Structure
//
// Model (model.go, its key routing in model_keys.go) is the root: it owns the session and the experiments
// and shows one of five screens, the preset picker (picker.go, a
// filterable bubbles list), the folder prompt of a folder preset
// (folder_prompt.go), the dashboard (dashboard.go and dash_*.go, with its
// panes in pane_*.go), the experiments screen (exp_*.go) and the sweep
// screen (sweep_*.go), with the help overlay (help.go) above
// whichever shows. The sweep screen watches a sweep directory wherever
// its units run: it reads the units' files every second off the UI
// goroutine (and squeue, when the sweep was submitted to Slurm, in a
// loop of its own every 5 s, so a slow squeue never holds the files up),
// overlays the loss curves of the units marked, and fills in the results
// over seeds as units finish. Each of the six is a component (component.go): a bubbletea model with a SetSize
// and a help.KeyMap. Window sizes and run data go to every component,
// keys only to the one showing; the root itself answers quit and help.
// A screen never switches to another: its keys that lead elsewhere (esc
// back, X, R, w) become navigation messages (backMsg, openRunsMsg, …;
// navigate.go) that the root alone handles, knowing where each screen was
// opened from. Letters typed faster than the
// terminal is read arrive from bubbletea as one event ("jj"); the root
// splits them into one key each, except into a text field with focus and
// for a bracketed paste. The help overlay scrolls where its
// page is taller than the terminal.
//
// Run (app.go) runs the program. Quitting stops every run with a
// checkpoint and ends on an empty frame, so the terminal keeps nothing of
// the workbench but the summary Run prints; SIGHUP, SIGTERM and SIGINT
// quit the same way. Run's error makes the command exit 1 when a run or
// an experiment failed.
//
// Each screen keeps its key bindings beside it (pickerKeys, dashKeys,
// expKeys; the keys every screen shares are in keys.go) and matches keys
// against them; its footer, its header's reminder and its page of the
// help overlay are generated from the same bindings.
// Every list (the picker, the runs and sweep tables, the sweeps found,
// the help's lines) moves with one cursor, listCursor (listcursor.go),
// and the same keys, listKeys.
//
// The picker trains the chosen preset on the dashboard (enter), opens
// the experiments screen with it (X, as on the dashboard), or asks for a sweep directory to
// watch (w; `mkbench tui --sweep DIR` opens that screen directly); d
// cycles the device the runs train on through Options.Devices (a
// DeviceChooser; picker_device.go), refused while anything trains since
// the device is the process's. A
// folder preset (your own images) picked without --data first asks for
// its folder (folder_prompt.go): enter checks it with
// datasets.FolderChannels, an error stays in the prompt, and a folder
// that passes becomes the session's Data, with the channels of its first
// image as the runs' channels override. The dashboard has four panes and a
// status bar:
//
//   - Curves: ELBO, the data term (MSE) and KL over iterations for every
//     run, overlaid in the variant's colour; latest, best and smoothed
//     numbers of the selected run; m toggles EMA smoothing, l a log y axis
//     (the ELBO is then drawn as −ELBO).
//   - Sine fit: the display task's truth, support points, predicted mean
//     and a ±2 sd band over several ω draws (none for RBF, which draws no
//     ω), with the task's MSE; n draws
//     a new display task (engine.CmdDisplayTask). Classification presets
//     show every run's validation accuracy here instead.
//   - ω after each flow step: a histogram of one dimension after every
//     flow step side by side (q₀, f1 … fK) and a density of a pair of
//     dimensions after the last step; d/D, x and y pick the dimensions.
//   - Ablation toggles: 1–6 start or stop rbf, rff, vrf, vrf+ctx, vrf+cnf
//     and metakernel, each its own run on the same seed and task stream; a
//     stopped run resumes in its directory when toggled on again. A table
//     of every run and bars of their smoothed losses.
//
// On 140×39 or more the panes form a 2×2 grid; smaller terminals show the
// focused pane alone (tab cycles, z zooms one pane in the grid). The
// status bar's ETA is the training-time budget's when that ends the run
// first (Options.Minutes), and an evaluation's own while one runs. esc
// goes back to the picker and the runs train on: the picker says so,
// enter on their preset returns to them, and another preset trains once
// they have ended. A run opened from its files whose data set is missing
// says so in its fit and ω panes, with how to get it.
//
// The experiments screen (X from the picker or the dashboard) sets up an ablation,
// efficiency, shots or versatility experiment in a form, then shows its
// live results: a table of its points, a way × shot heatmap for
// versatility, and the current run's dashboard (read-only) one key away.
// It writes the same directory as `mkbench experiment`.
//
// # Data flow
//
// The engine calls each run's observer from the training goroutine. The
// observer copies the snapshot into a mutex-guarded mailbox (every curve
// point kept, the newest display and evaluation replacing older ones) and
// wakes the UI through a one-slot channel; it never blocks on the UI. A
// tea.Cmd waits on that channel, takes everything pending from all runs
// as one batchMsg at most 15 times a second, and is re-armed by the
// dashboard after each. Update applies the batch, re-renders only the
// panes whose data or size changed, and composes the frame; View returns
// that frame and nothing else, and the program is capped at 20 frames a
// second. Commands (pause, checkpoint, evaluate, display task) travel the
// other way on engine.RunOptions.Control and are served between
// iterations. An experiment's progress reaches the experiments screen the
// same way (expWorker, exp_worker.go), at most 20 batches a second.
//
// # Views are pure functions
//
// curvesPane, fitPane, accuracyPane, omegaPane, runsPane, statusBar,
// helpView, expTable, expHeatmap and expProgress take data, a Theme and
// a size and return exactly that many lines of that width, so they are
// golden-tested with escapes stripped (testdata/, rewritten with go test
// ./ui -update). ntcharts' line charts keep no data: the series live in
// the dashboard, NaN and ±Inf are dropped before anything is scaled
// (chart.go), and cells are rendered in runs of equal style
// (renderCanvas, canvas.go) because styling every cell separately cost
// more than the rest of a redraw. For the same reason frames are put
// together from exact blocks without measuring them again (block, joinH,
// box in layout.go).
//
// NO_COLOR is honoured through lipgloss's colour profile; without colour
// the overlaid curves are told apart by marker runes.
package ui
