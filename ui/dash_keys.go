package ui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
)

// toggleVariants are the variants behind the ablation toggles 1–6:
// engine.Variants, in the paper's table order. A variant's place here
// fixes its colour and marker in every pane (variantIndex).
var toggleVariants = [6]string(engine.Variants)

// toggleNames are the ablation switches as the table and the help name
// them.
var toggleNames = [6]string{"RBF", "RFF", "VRF", "+context", "+CNF", "MetaKernel"}

// dashKeys are the dashboard's keys.
type dashKeys struct {
	globalKeys
	// Training, applied to every active run.
	Pause, Stop, Checkpoint, Evaluate key.Binding
	// Ablation toggles, one variant each.
	Toggles [len(toggleVariants)]key.Binding
	// View.
	NextPane, PrevPane, Zoom, CycleRun, EMA, LogY, DimNext, DimPrev, PairX, PairY, NewTask key.Binding
	// Experiments opens the experiments screen: X, as on the picker (x
	// picks a heatmap dimension here).
	Experiments key.Binding
	// Back goes to the picker; the runs keep training.
	Back key.Binding
	// Runs opens the runs screen (every run directory under the root).
	Runs key.Binding
}

func newDashKeys() dashKeys {
	k := dashKeys{
		globalKeys: newGlobalKeys(),

		Pause:      bind("p/space", "pause / resume all runs", "p", " "),
		Stop:       bind("s", "stop all runs (checkpoint)", "s"),
		Checkpoint: bind("c", "save checkpoints now", "c"),
		Evaluate:   bind("e", "evaluate now (200 tasks)", "e"),

		NextPane: bind("tab", "next pane", "tab"),
		PrevPane: bind("shift+tab", "previous pane", "shift+tab"),
		Zoom:     bind("z", "zoom the focused pane", "z"),
		CycleRun: bind("v", "variant for ω, fit, numbers", "v"),
		EMA:      bind("m", "EMA-smooth the curves", "m"),
		LogY:     bind("l", "log-scale y axis", "l"),
		DimNext:  bind("d", "histogram: next dimension", "d"),
		DimPrev:  bind("D", "histogram: previous dim.", "D"),
		PairX:    bind("x", "heatmap: next x dimension", "x"),
		PairY:    bind("y", "heatmap: next y dimension", "y"),
		NewTask:  bind("n", "new display task", "n"),

		Experiments: bind("X", "experiments screen", "X"),
		Runs:        bind("R", "runs screen: every run under the runs root", "R"),
		Back:        bind("esc", "back to the picker (runs keep training)", "esc"),
	}
	for i := range k.Toggles {
		d := string(rune('1' + i))
		k.Toggles[i] = bind(d, toggleNames[i]+" → "+toggleVariants[i], d)
	}
	return k
}

// groups are the dashboard's page of the help overlay.
func (k dashKeys) groups() []helpGroup {
	return []helpGroup{
		{"Training", []key.Binding{k.Pause, k.Stop, k.Checkpoint, k.Evaluate, k.Experiments, k.Runs}},
		{"Ablation toggles", k.Toggles[:]},
		{"View", []key.Binding{k.NextPane, k.PrevPane, k.Zoom, k.CycleRun, k.EMA, k.LogY, k.DimNext, k.DimPrev, k.PairX, k.PairY, k.NewTask}},
		{"General", []key.Binding{k.Back, k.Help, k.Quit}},
	}
}

// viewOnly are the keys of a read-only dashboard (an experiment's run,
// which the experiment drives): they change what is drawn, nothing else.
func (k dashKeys) viewOnly() helpGroup {
	return helpGroup{"View", []key.Binding{k.NextPane, k.PrevPane, k.Zoom, k.EMA, k.LogY, k.DimNext, k.DimPrev, k.PairX, k.PairY}}
}

// navigate: esc goes back (to the picker, the runs training on; from a
// run opened from its files, to whatever opened it), X opens the
// experiments screen (on the opened run), R the runs screen.
func (d *dashboard) navigate(msg tea.KeyMsg) tea.Msg {
	k := d.keys
	switch {
	case key.Matches(msg, k.Back):
		return backMsg{}
	case key.Matches(msg, k.Experiments) && d.opened:
		return openExperimentsMsg{onOpened: true}
	case d.opened:
	case key.Matches(msg, k.Experiments):
		return openExperimentsMsg{preset: d.preset.Name}
	case key.Matches(msg, k.Runs):
		return openRunsMsg{}
	}
	return nil
}
