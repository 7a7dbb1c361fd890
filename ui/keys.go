package ui

import "github.com/charmbracelet/bubbles/key"

// KeyMap is every key the workbench answers to. The help overlay and the
// footers are generated from it, so they cannot drift from what works.
type KeyMap struct {
	// Picker.
	Start, Filter, Up, Down key.Binding
	// Training, applied to every active run.
	Pause, Stop, Checkpoint, Evaluate key.Binding
	// Ablation toggles, one variant each.
	Toggles [6]key.Binding
	// View.
	NextPane, PrevPane, Zoom, CycleRun, EMA, LogY, DimNext, DimPrev, PairX, PairY, NewTask key.Binding
	// Experiments: x opens the screen from the picker, X from the
	// dashboard (where x picks a heatmap dimension).
	Experiments, DashExperiments key.Binding
	// The experiments screen: the setup form, then the live results.
	FieldNext, FieldPrev, Cycle, Run, ShowRun, Back key.Binding
	// Anywhere.
	Help, Quit key.Binding
}

// toggleVariants are the variants behind Toggles, in order.
var toggleVariants = [6]string{"rbf", "rff", "vrf", "vrf+ctx", "vrf+cnf", "metakernel"}

// toggleNames are the ablation switches as the issue names them.
var toggleNames = [6]string{"RBF", "RFF", "VRF", "+context", "+CNF", "MetaKernel"}

// DefaultKeyMap returns the workbench's keys.
func DefaultKeyMap() KeyMap {
	k := KeyMap{
		Start:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "train the preset (metakernel)")),
		Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter presets")),
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),

		Pause:      key.NewBinding(key.WithKeys("p", " "), key.WithHelp("p/space", "pause / resume all runs")),
		Stop:       key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "stop all runs (checkpoint)")),
		Checkpoint: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "save checkpoints now")),
		Evaluate:   key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "evaluate now (200 tasks)")),

		NextPane: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next pane")),
		PrevPane: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous pane")),
		Zoom:     key.NewBinding(key.WithKeys("z"), key.WithHelp("z", "zoom the focused pane")),
		CycleRun: key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "variant for ω, fit, numbers")),
		EMA:      key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "EMA-smooth the curves")),
		LogY:     key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "log-scale y axis")),
		DimNext:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "histogram: next dimension")),
		DimPrev:  key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "histogram: previous dim.")),
		PairX:    key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "heatmap: next x dimension")),
		PairY:    key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "heatmap: next y dimension")),
		NewTask:  key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "new display task")),

		Experiments:     key.NewBinding(key.WithKeys("x", "X"), key.WithHelp("x", "experiments (ablation, shots, …)")),
		DashExperiments: key.NewBinding(key.WithKeys("X"), key.WithHelp("X", "experiments screen")),
		FieldNext:       key.NewBinding(key.WithKeys("down", "tab"), key.WithHelp("↓/tab", "next field")),
		FieldPrev:       key.NewBinding(key.WithKeys("up", "shift+tab"), key.WithHelp("↑/shift+tab", "previous field")),
		Cycle:           key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "change experiment / preset")),
		Run:             key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "start the experiment")),
		ShowRun:         key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "the current run's dashboard")),
		Back:            key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back: run → results, setup → previous")),

		Help: key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit: key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q/ctrl+c", "quit (checkpoints runs)")),
	}
	for i := range k.Toggles {
		d := string(rune('1' + i))
		k.Toggles[i] = key.NewBinding(key.WithKeys(d), key.WithHelp(d, toggleNames[i]+" → "+toggleVariants[i]))
	}
	return k
}

// helpGroup is one titled column of the help overlay.
type helpGroup struct {
	Title string
	Keys  []key.Binding
}

// Groups is the dashboard's full help.
func (k KeyMap) Groups() []helpGroup {
	return []helpGroup{
		{"Training", []key.Binding{k.Pause, k.Stop, k.Checkpoint, k.Evaluate, k.DashExperiments}},
		{"Ablation toggles", k.Toggles[:]},
		{"View", []key.Binding{k.NextPane, k.PrevPane, k.Zoom, k.CycleRun, k.EMA, k.LogY, k.DimNext, k.DimPrev, k.PairX, k.PairY, k.NewTask}},
		{"General", []key.Binding{k.Help, k.Quit}},
	}
}

// ExperimentGroups is the experiments screen's full help.
func (k KeyMap) ExperimentGroups() []helpGroup {
	return []helpGroup{
		{"Setup", []key.Binding{k.FieldNext, k.FieldPrev, k.Cycle, k.Run}},
		{"Running", []key.Binding{k.ShowRun, k.Back, short(k.Quit, "stop the experiment (checkpoint) and quit")}},
		{"General", []key.Binding{k.Help}},
	}
}

// ExperimentDashGroups is the help over an experiment run's dashboard:
// the view keys only, since the experiment drives the run.
func (k KeyMap) ExperimentDashGroups() []helpGroup {
	return []helpGroup{
		{"View", []key.Binding{k.NextPane, k.PrevPane, k.Zoom, k.EMA, k.LogY, k.DimNext, k.DimPrev, k.PairX, k.PairY}},
		{"General", []key.Binding{short(k.Back, "back to the experiment"), k.Help, short(k.Quit, "stop the experiment and quit")}},
	}
}

// PickerGroups is the picker's full help.
func (k KeyMap) PickerGroups() []helpGroup {
	return []helpGroup{{"Presets", []key.Binding{k.Start, k.Experiments, k.Filter, k.Up, k.Down, k.Help, k.Quit}}}
}

// HeaderHelp is the reminder in the dashboard's header.
func (k KeyMap) HeaderHelp() []key.Binding {
	return []key.Binding{k.Help, short(k.Quit, "quit")}
}

// short is b with a shorter description, for footers.
func short(b key.Binding, desc string) key.Binding {
	b.SetHelp(b.Help().Key, desc)
	return b
}

// PickerShortHelp is the picker footer.
func (k KeyMap) PickerShortHelp() []key.Binding {
	return []key.Binding{short(k.Start, "train"), short(k.Experiments, "experiments"), short(k.Filter, "filter"), k.Help, short(k.Quit, "quit")}
}
