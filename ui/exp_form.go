package ui

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// The experiments screen's setup form: which experiment, on which preset,
// with which variants, seeds and sizes; checked against the Runner's own
// plan as it changes.

// expKinds are the experiments in the order the form cycles through them.
var expKinds = []string{experiments.Ablation, experiments.Efficiency, experiments.Shots, experiments.Versatility}

// expAbout says in a line what each experiment runs.
var expAbout = map[string]string{
	experiments.Ablation:    "one run per variant, same seed and task stream (the ablation table)",
	experiments.Efficiency:  "one model per number of bases D (the efficiency figure)",
	experiments.Shots:       "one run per variant and shot count (the regression comparison)",
	experiments.Versatility: "one trained model evaluated at other ways × shots (the versatility figure)",
}

const (
	ffExperiment = iota
	ffPreset
	ffModel // versatility: a trained model instead of training one
	ffVariants
	ffSeeds
	ffIters
	ffBases
	ffShots
	ffWays
	ffEvalTasks
	ffOut
	numFields
)

var fieldLabels = [numFields]string{"Experiment", "Preset", "Model", "Variants", "Seeds", "Iterations", "Bases D", "Shots", "Ways", "Eval tasks", "Directory"}

// fieldHints explain the text fields; an empty field is the default shown
// in it.
var fieldHints = [numFields]string{
	ffVariants:  "comma-separated; all = every engine variant",
	ffSeeds:     "several give the mean and a 95% interval over seeds",
	ffIters:     "training iterations per run",
	ffEvalTasks: "per run, and per versatility cell",
	ffOut:       "resume later with: mkbench experiment --resume DIR",
}

// expForm is the setup: two cycling values and text fields, checked
// after every key against the Runner's own plan.
type expForm struct {
	theme   Theme
	keys    expKeys
	presets []presets.Preset
	kind    int // index into expKinds
	preset  int // index into presets
	inputs  [numFields]textinput.Model
	// trained are the models the versatility experiment can evaluate
	// instead of training one: trained[0] is none (train), then a run
	// opened in the workbench, then the shipped models.
	trained []trainedModel
	model   int // index into trained
	lib     models.Library
	focus   int
	root    string // runs root, for the default directory
	// Checked from the fields by refresh.
	runs  int
	opts  experiments.Options
	err   string
	stamp string // the time part of the default directory as shown
}

// trainedModel is a choice of the form's Model field.
type trainedModel struct {
	Name, Preset string
	// Dir is the run directory holding it; a shipped model (Shipped) is
	// written there (models.Materialize) when chosen.
	Dir     string
	Shipped bool
}

func newExpForm(t Theme, k expKeys, all []presets.Preset, root string, lib models.Library, shipped []models.Info) expForm {
	f := expForm{theme: t, keys: k, presets: all, root: root, stamp: "YYYYMMDD-HHMMSS", lib: lib, trained: []trainedModel{{}}}
	for _, m := range shipped {
		f.trained = append(f.trained, trainedModel{Name: m.Name, Preset: m.Preset, Dir: models.RunDir(root, m.Name), Shipped: true})
	}
	for i := range f.inputs {
		in := textinput.New()
		in.Prompt = ""
		in.CharLimit = 256
		in.Width = 40
		in.PlaceholderStyle = t.Dim
		in.Cursor.SetMode(cursor.CursorStatic)
		f.inputs[i] = in
	}
	f.selectPreset("sine-5shot")
	f.refresh()
	return f
}

func (f *expForm) selectPreset(name string) {
	for i, p := range f.presets {
		if p.Name == name {
			f.preset = i
		}
	}
}

func (f *expForm) kindName() string { return expKinds[f.kind] }

// chosenModel is the trained model the versatility experiment evaluates,
// if one is chosen.
func (f *expForm) chosenModel() (trainedModel, bool) {
	if f.kindName() != experiments.Versatility || f.model == 0 {
		return trainedModel{}, false
	}
	return f.trained[f.model], true
}

// chooseRun offers run directory dir (opened in the workbench) as the
// model and chooses it, with the versatility experiment; name is how the
// field shows it.
func (f *expForm) chooseRun(name, preset, dir string) {
	f.kind = slices.Index(expKinds, experiments.Versatility)
	i := slices.IndexFunc(f.trained, func(m trainedModel) bool { return m.Dir == dir })
	if i < 0 {
		f.trained = slices.Insert(f.trained, 1, trainedModel{Name: name, Preset: preset, Dir: dir})
		i = 1
	}
	f.model = i
	f.selectPreset(preset)
	f.refresh()
}

func (f *expForm) presetOf() presets.Preset {
	if len(f.presets) == 0 {
		return presets.Preset{}
	}
	return f.presets[f.preset]
}

// visible reports whether field i applies to the chosen experiment.
func (f *expForm) visible(i int) bool {
	switch i {
	case ffShots:
		return f.kindName() == experiments.Shots || f.kindName() == experiments.Versatility
	case ffWays:
		return f.kindName() == experiments.Versatility && f.presetOf().Config.Classify()
	case ffModel:
		return f.kindName() == experiments.Versatility && len(f.trained) > 1
	case ffVariants, ffSeeds, ffIters, ffBases:
		_, chosen := f.chosenModel() // they are the model's own
		return !chosen
	}
	return true
}

func (f *expForm) isText(i int) bool { return i != ffExperiment && i != ffPreset && i != ffModel }

// capturing reports whether keys go to a text field.
func (f *expForm) capturing() bool { return f.isText(f.focus) }

func (f *expForm) move(d int) {
	for n := 0; n < numFields; n++ {
		f.focus = (f.focus + d + numFields) % numFields
		if f.visible(f.focus) {
			break
		}
	}
	for i := range f.inputs {
		if i == f.focus {
			f.inputs[i].Focus()
		} else {
			f.inputs[i].Blur()
		}
	}
}

// options builds the experiment's options from the fields.
func (f *expForm) options() (experiments.Options, error) {
	o := experiments.Options{Experiment: f.kindName(), Preset: f.presetOf().Name}
	if m, ok := f.chosenModel(); ok {
		if m.Shipped {
			// Written once; a folder holding this model is kept as it is
			// (and one holding an earlier model moved aside: its path is
			// not needed here, the experiment reads the model's).
			if _, err := f.lib.Materialize(m.Name, m.Dir); err != nil {
				return o, err
			}
		}
		o.FromRun = m.Dir
	}
	val := func(i int) string {
		if !f.visible(i) {
			return ""
		}
		return strings.TrimSpace(f.inputs[i].Value())
	}
	var err error
	if s := val(ffVariants); s != "" {
		if o.Variants, err = experiments.ParseVariants(s); err != nil {
			return o, err
		}
	}
	if s := val(ffSeeds); s != "" {
		if o.Seeds, err = experiments.ParseSeeds(s); err != nil {
			return o, err
		}
	}
	for _, n := range []struct {
		i   int
		dst *int
	}{{ffIters, &o.Iters}, {ffEvalTasks, &o.EvalTasks}} {
		if s := val(n.i); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 {
				return o, fmt.Errorf("%s: %q is not a positive integer", strings.ToLower(fieldLabels[n.i]), s)
			}
			*n.dst = v
		}
	}
	for _, l := range []struct {
		i    int
		flag string
		dst  *[]int
	}{{ffBases, "bases", &o.Bases}, {ffShots, "shots", &o.Shots}, {ffWays, "ways", &o.Ways}} {
		if s := val(l.i); s != "" {
			if *l.dst, err = experiments.ParseInts(l.flag, s); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// refresh shows the defaults of the chosen experiment and preset in the
// empty fields and checks what is filled in against the Runner's plan.
func (f *expForm) refresh() {
	p := f.presetOf()
	name := f.kindName()
	bl := slices.Sorted(maps.Keys(experiments.DefaultBaselines()))
	def, _, derr := experiments.Options{Experiment: name, Preset: p.Name}.Normalize(bl)
	ph := [numFields]string{}
	if derr == nil {
		ph[ffVariants] = strings.Join(def.Variants, ",")
		ph[ffSeeds] = commaList(def.Seeds)
		ph[ffBases] = commaList(def.Bases)
		ph[ffShots] = commaList(def.Shots)
		ph[ffWays] = commaList(def.Ways)
	}
	ph[ffIters] = strconv.Itoa(p.Config.Iters)
	if ph[ffBases] == "" {
		ph[ffBases] = strconv.Itoa(p.Config.Bases)
	}
	ph[ffEvalTasks] = strconv.Itoa(p.Config.EvalTasks)
	ph[ffOut] = filepath.Join(f.root, fmt.Sprintf("exp-%s-%s-%s", name, p.Name, f.stamp))
	for i := range f.inputs {
		f.inputs[i].Placeholder = ph[i]
	}
	f.runs, f.err = 0, ""
	o, err := f.options()
	if err == nil {
		var plan []string
		r := &experiments.Runner{Options: o, Baselines: experiments.DefaultBaselines()}
		if plan, err = r.Plan(); err == nil {
			f.runs = len(plan)
			f.opts, _, _ = o.Normalize(bl)
		}
	}
	if err != nil {
		f.err = firstLine(err.Error())
	}
}

// expStartMsg asks the screen to start the experiment of the form.
type expStartMsg struct{}

// update takes the keys of the form.
func (f *expForm) update(msg tea.Msg) tea.Cmd {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	k := f.keys
	switch {
	case key.Matches(km, k.FieldNext):
		f.move(1)
		return nil
	case key.Matches(km, k.FieldPrev):
		f.move(-1)
		return nil
	case key.Matches(km, k.Run):
		return func() tea.Msg { return expStartMsg{} }
	case !f.isText(f.focus) && key.Matches(km, k.Cycle):
		d := 1
		if km.String() == "left" {
			d = -1
		}
		switch {
		case f.focus == ffExperiment:
			f.kind = (f.kind + d + len(expKinds)) % len(expKinds)
		case f.focus == ffModel:
			f.model = (f.model + d + len(f.trained)) % len(f.trained)
			if m, ok := f.chosenModel(); ok {
				f.selectPreset(m.Preset) // the model's own preset
			}
		case len(f.presets) > 0:
			f.preset = (f.preset + d + len(f.presets)) % len(f.presets)
			f.model = 0 // another preset: train one
		}
		f.refresh()
		return nil
	}
	if f.isText(f.focus) {
		var cmd tea.Cmd
		f.inputs[f.focus], cmd = f.inputs[f.focus].Update(km)
		f.refresh()
		return cmd
	}
	return nil
}

// view draws the form at w×h.
func (f *expForm) view(w, h int) string {
	t := f.theme
	var lines []string
	lines = append(lines, screenHeader(t, f.keys.globalKeys, "experiments · set up", w), "")
	lw := 12
	vcol := min(44, max(24, w-44)) // the value column, hints after it
	for i := range numFields {
		if !f.visible(i) {
			continue
		}
		mark := "  "
		if i == f.focus {
			mark = t.Key.Render("▸ ")
		}
		label := fmt.Sprintf("%-*s", lw, fieldLabels[i])
		if i == f.focus {
			label = t.Bold.Render(label)
		}
		var value, hint string
		switch i {
		case ffExperiment:
			value = "‹ " + t.Bold.Render(f.kindName()) + " ›"
			hint = expAbout[f.kindName()]
		case ffPreset:
			p := f.presetOf()
			value = "‹ " + t.Bold.Render(p.Name) + " ›"
			hint = p.Description
		case ffModel:
			value, hint = "‹ "+t.Bold.Render("none")+" ›", "train one; ←/→ evaluates a trained model instead"
			if m, ok := f.chosenModel(); ok {
				value, hint = "‹ "+t.Bold.Render(m.Name)+" ›", "evaluated as it is, no training"
				if !m.Shipped {
					hint = "the run opened: evaluated as it is"
				}
			}
		default:
			in := f.inputs[i]
			in.Width = vcol - 4
			if i == ffOut {
				in.Width = max(20, w-lw-6)
			}
			value = in.View()
			hint = fieldHints[i]
			if i == ffBases {
				hint = "one D replacing the preset's"
				if f.kindName() == experiments.Efficiency {
					hint = "the values of D to compare"
				}
			}
			if i == ffShots {
				hint = "the shots to evaluate at"
				if f.kindName() == experiments.Shots {
					hint = "the shots to train at"
				}
			}
		}
		line := mark + label + value
		if i != ffOut {
			line += strings.Repeat(" ", max(2, vcol-ansi.StringWidthWc(value))) + t.Dim.Render(hint)
		}
		lines = append(lines, line)
	}
	lines = append(lines, "")
	if f.err != "" {
		lines = append(lines, "  "+t.Err.Render(f.err))
	} else {
		iters := f.opts.Iters
		if iters == 0 {
			iters = f.presetOf().Config.Iters
		}
		s := fmt.Sprintf("  %s × %d iterations", plural(f.runs, "run"), iters)
		if m, ok := f.chosenModel(); ok {
			s = fmt.Sprintf("  the model %s, evaluated on %s", m.Name, plural(len(f.opts.Shots)*max(1, len(f.opts.Ways)), "cell"))
		} else if f.kindName() == experiments.Versatility {
			s += fmt.Sprintf(", each model evaluated on %s", plural(len(f.opts.Shots)*max(1, len(f.opts.Ways)), "cell"))
		}
		lines = append(lines, s+t.Dim.Render(" · the same directory as mkbench experiment "+f.kindName()))
	}
	lines = append(lines, t.Dim.Render("  an empty field is the default shown; "+fieldHints[ffOut]))
	body := strings.Join(lines, "\n")
	foot := footer(t, f.keys.setupHelp())
	return block(body, w, h-1) + "\n" + block(foot, w, 1)
}
