// Package ui is the terminal workbench that `mkbench` opens (bubbletea v1,
// lipgloss v1, bubbles v1, ntcharts v0.5). It only draws and routes keys:
// training runs in the engine, each run in its own goroutine managed by
// the subpackage session, which knows nothing of the terminal.
//
// # Structure
//
// Model is the root: a state enum with two screens, the preset picker
// (picker.go, a filterable bubbles list) and the dashboard
// (dashboard.go). Window sizes and run data go to the screens that need
// them, keys only to the one showing; the help overlay (?) sits above
// both and is generated from the one KeyMap (keys.go) that the screens
// match keys against.
//
// The dashboard has four panes and a status bar:
//
//   - Curves: ELBO, the data term (MSE) and KL over iterations for every
//     run, overlaid in the variant's colour; latest, best and smoothed
//     numbers of the selected run; m toggles EMA smoothing, l a log y axis
//     (the ELBO is then drawn as −ELBO).
//   - Sine fit: the display task's truth, support points, predicted mean
//     and a ±2 sd band over several ω draws, with the task's MSE; n draws
//     a new display task (engine.CmdDisplayTask).
//   - ω after each flow step: a histogram of one dimension after every
//     flow step side by side (q₀, f1 … fK) and a density of a pair of
//     dimensions after the last step; d/D, x and y pick the dimensions.
//   - Ablation toggles: 1–6 start or stop rbf, rff, vrf, vrf+ctx, vrf+cnf
//     and metakernel, each its own run on the same seed and task stream; a
//     stopped run resumes in its directory when toggled on again. A table
//     of every run and bars of their smoothed losses.
//
// On 140×39 or more the panes form a 2×2 grid; smaller terminals show the
// focused pane alone (tab cycles, z zooms one pane in the grid).
//
// # Data flow
//
// The engine calls each run's observer from the training goroutine. The
// observer copies the snapshot into a mutex-guarded mailbox (every curve
// point kept, the newest display and evaluation replacing older ones) and
// wakes the UI through a one-slot channel; it never blocks on the UI. A
// tea.Cmd waits on that channel, takes everything pending from all runs
// as one batchMsg at most 15 times a second, and is re-armed after each.
// Update applies the batch, re-renders only the panes whose data or size
// changed, and composes the frame; View returns that frame and nothing
// else, and the program is capped at 20 frames a second. Commands (pause,
// checkpoint, evaluate, display task) travel the other way on
// engine.RunOptions.Control and are served between iterations.
//
// # Views are pure functions
//
// curvesPane, fitPane, omegaPane, runsPane, statusBar and helpView take
// data, a Theme and a size and return exactly that many lines of that
// width, so they are golden-tested with escapes stripped (testdata/,
// rewritten with go test ./ui -update). ntcharts' line charts keep no
// data: the series live in the dashboard, NaN and ±Inf are dropped before
// anything is scaled, and cells are rendered in runs of equal style
// (renderCanvas) because styling every cell separately cost more than
// the rest of a redraw. For the same reason frames are put together from
// exact blocks without measuring them again (joinH, box).
//
// NO_COLOR is honoured through lipgloss's colour profile; without colour
// the overlaid curves are told apart by marker runes.
package ui
