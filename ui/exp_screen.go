package ui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The experiments screen: a setup form (exp_form.go), then the
// experiment's live results (exp_progress.go, exp_results.go,
// exp_heatmap.go), with the current run's dashboard one key away. The
// experiment runs in an expWorker (exp_worker.go); what the screen knows
// of it is an expState (exp_state.go). Its keys are in exp_keys.go.

// Stages of the experiments screen.
const (
	expSetup = iota
	expResults
	expDash
)

// expScreen is the experiments screen.
type expScreen struct {
	theme    Theme
	keys     expKeys
	dashKeys dashKeys // of the runs' dashboards
	opts     Options
	root     string
	reg      *expRegistry
	form     expForm
	stage    int
	run      *expState // the experiment started last; nil before the first
	w, h     int
}

func newExpScreen(t Theme, opts Options, reg *expRegistry) *expScreen {
	root := opts.Root
	if root == "" {
		root = presets.RunsRoot()
	}
	k := newExpKeys()
	lib, shipped, _ := opts.models()
	return &expScreen{theme: t, keys: k, dashKeys: newDashKeys(), opts: opts, root: root, reg: reg,
		form: newExpForm(t, k, presets.All(), root, lib, shipped)}
}

// open shows the setup form with preset selected (unless an experiment
// is under way: then its results).
func (s *expScreen) open(preset string) {
	if s.running() {
		s.stage = expResults
		return
	}
	s.stage = expSetup
	if preset != "" {
		s.form.selectPreset(preset)
		s.form.refresh()
	}
}

// openOn shows the setup form of the versatility experiment on the model
// of run directory dir (a run or shipped model opened in the workbench),
// named name (unless an experiment is under way: then its results).
func (s *expScreen) openOn(name, preset, dir string) {
	s.open("")
	if s.stage == expSetup {
		s.form.chooseRun(name, preset, dir)
	}
}

// running reports whether an experiment is under way.
func (s *expScreen) running() bool {
	return s.run != nil && (s.run.state == runstate.Running || s.run.state == runstate.Stopping)
}

// capturing reports whether keys go to a text field of the form.
func (s *expScreen) capturing() bool { return s.stage == expSetup && s.form.capturing() }

// stop cancels the experiment; the current run checkpoints.
func (s *expScreen) stop() bool {
	if !s.running() {
		return false
	}
	if s.run.state == runstate.Running {
		s.run.worker.Stop()
		s.run.state = runstate.Stopping
		s.run.note.set("stopping: the current run saves a checkpoint… (q again quits at once)")
	}
	return true
}

// start launches the experiment of the form.
func (s *expScreen) start() tea.Cmd {
	o, err := s.form.options()
	if err == nil && s.form.err != "" {
		err = errors.New(s.form.err)
	}
	if err != nil {
		s.form.err = firstLine(err.Error())
		return nil
	}
	o.Data = s.opts.Data
	if o.FromRun == "" {
		o.Minutes = s.opts.Minutes // a model evaluated is not trained: no budget
	}
	r := &experiments.Runner{Dir: strings.TrimSpace(s.form.inputs[ffOut].Value()), Options: o, Overrides: s.opts.Overrides, Baselines: experiments.DefaultBaselines()}
	plan, err := r.Plan()
	if err == nil && r.Dir == "" {
		// Named (and made) only once the plan holds, so a form error
		// leaves no empty directory behind.
		r.Dir, err = presets.NewExperimentDir(s.root, o.Experiment, o.Preset, time.Now())
	}
	if err != nil {
		s.form.err = firstLine(err.Error())
		return nil
	}
	dir := r.Dir
	norm := s.form.opts
	norm.Minutes = o.Minutes
	p := s.form.presetOf()
	st := &expState{opts: norm, preset: p, metric: "mse", rows: planRows(norm), jobs: len(plan), job: 1,
		started: time.Now(), state: runstate.Running, dashJob: -1}
	if p.Config.Classify() {
		st.metric = "accuracy"
	}
	st.note.set("started → " + dir)
	st.worker = startExperiment(r)
	s.reg.add(st.worker)
	s.run = st
	s.stage = expResults
	return waitExp(st.worker)
}

func (s *expScreen) Init() tea.Cmd { return nil }

func (s *expScreen) SetSize(w, h int) {
	s.w, s.h = w, h
	if s.run != nil && s.run.dash != nil {
		s.run.dash.SetSize(w, h)
	}
}

// Update starts the experiment of the form, takes in its progress
// (re-arming the wait for more until it has ended) and the keys.
func (s *expScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		s.SetSize(msg.Width, msg.Height)
	case expStartMsg:
		return s, s.start()
	case expBatchMsg:
		s.apply(msg)
		if !msg.ended {
			return s, waitExp(msg.w)
		}
	case tea.KeyMsg:
		return s, s.key(msg)
	}
	return s, nil
}

func (s *expScreen) key(msg tea.KeyMsg) tea.Cmd {
	switch s.stage {
	case expSetup:
		return s.form.update(msg)
	case expResults:
		switch {
		case key.Matches(msg, s.keys.ShowRun):
			if s.run != nil && s.run.dash != nil {
				s.stage = expDash
				s.run.dash.SetSize(s.w, s.h)
			} else if s.run != nil {
				s.run.note.set("no dashboard for this run (it is not trained here, or is a baseline)")
			}
		case key.Matches(msg, s.keys.Back):
			if s.running() {
				s.run.note.set("the experiment is running: q stops it (checkpointed), enter shows its run")
			} else {
				s.stage = expSetup
			}
		}
	case expDash:
		if key.Matches(msg, s.keys.Back) {
			s.stage = expResults
			return nil
		}
		if s.run.dash != nil {
			s.run.dash.Update(msg)
		}
	}
	return nil
}

// View draws the stage showing.
func (s *expScreen) View() string {
	w, h := s.w, s.h
	if f, small := tooSmall(w, h); small {
		return f
	}
	switch {
	case s.stage == expSetup || s.run == nil:
		return s.form.view(w, h)
	case s.stage == expDash && s.run.dash != nil:
		return s.run.dash.View()
	}
	return s.resultsView(time.Now())
}

// ShortHelp is the footer (header, over a run's dashboard) of the stage
// showing.
func (s *expScreen) ShortHelp() []key.Binding {
	switch {
	case s.stage == expSetup || s.run == nil:
		return s.keys.setupHelp()
	case s.stage == expDash && s.run.dash != nil:
		return s.run.dash.ShortHelp()
	}
	return s.keys.resultsHelp(s.running())
}

func (s *expScreen) FullHelp() [][]key.Binding { return fullHelp(s.HelpGroups()) }

func (s *expScreen) HelpGroups() []helpGroup {
	if s.stage == expDash {
		return s.keys.dashGroups(s.dashKeys)
	}
	return s.keys.groups()
}

// resultsView is the live results: header, progress, table (and the
// heatmap for versatility), message and keys.
func (s *expScreen) resultsView(now time.Time) string {
	t, e, w, h := s.theme, s.run, s.w, s.h
	what := fmt.Sprintf("experiment %s · %s · %s → %s", e.opts.Experiment, e.preset.Name, plural(len(e.opts.Seeds), "seed"), e.worker.Dir)
	head := screenHeader(t, s.keys.globalKeys, what, w)
	prog := expProgress(t, e.progressData(now), w)
	bodyH := h - 6
	body := expBody(t, expTableData{Kind: e.opts.Experiment, Metric: e.metric, Seeds: len(e.opts.Seeds), Rows: e.rows}, w, bodyH)
	msg := " " + e.note.render(t)
	foot := footer(t, s.keys.resultsHelp(s.running()))
	return head + "\n" + prog + "\n" + block("", w, 1) + "\n" + body + "\n" + block(msg, w, 1) + "\n" + block(foot, w, 1)
}

// screenHeader is the first line of the experiments screen's stages: the
// name, what it shows and how to get help.
func screenHeader(t Theme, k globalKeys, what string, w int) string {
	s := t.Title.Render(" mkbench ") + t.Dim.Render("│ ") + what
	return block(withRight(s, footer(t, k.headerHelp())+" ", w), w, 1)
}
