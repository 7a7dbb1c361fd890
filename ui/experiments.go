package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// The experiments screen: a setup form, then the experiment's live
// results (a table of its points, and for versatility a way × shot
// heatmap), with the current run's dashboard one key away. The experiment
// is an experiments.Runner in its own goroutine, writing the same
// directory as `mkbench experiment`; its progress reaches Update through
// an expWorker, drained at most 20 times a second.

// expKinds are the experiments in the order the form cycles through them.
var expKinds = []string{experiments.Ablation, experiments.Efficiency, experiments.Shots, experiments.Versatility}

// expAbout says in a line what each experiment runs.
var expAbout = map[string]string{
	experiments.Ablation:    "one run per variant, same seed and task stream (the ablation table)",
	experiments.Efficiency:  "one model per number of bases D (the efficiency figure)",
	experiments.Shots:       "one run per variant and shot count (the regression comparison)",
	experiments.Versatility: "one trained model evaluated at other ways × shots (the versatility figure)",
}

// ---------------------------------------------------------------------
// The worker: the Runner's goroutine and its mailbox.

// expWorker runs one experiment. The Runner's Progress callback appends
// to pending under the lock and wakes the reading command; it never
// waits for the UI.
type expWorker struct {
	Dir    string
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{} // one slot: "something is pending"
	last   time.Time     // the reading command's, one at a time

	mu      sync.Mutex
	pending []experiments.Progress
	ended   bool
	res     *experiments.Results
	err     error
}

// expInterval is the shortest time between two batches: 20 a second.
const expInterval = time.Second / 20

// maxExpPending bounds the undrained reports should nobody read them.
const maxExpPending = 1 << 14

func startExperiment(r *experiments.Runner) *expWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &expWorker{Dir: r.Dir, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	r.Progress = w.progress
	r.Snapshots = true
	r.ReportEvery = 250 * time.Millisecond
	go func() {
		defer close(w.done)
		var res *experiments.Results
		var err error
		func() {
			// A panic must not take the terminal with it: it becomes the
			// experiment's error.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("experiments: internal error: %v", p)
				}
			}()
			res, err = r.Run(ctx)
		}()
		w.mu.Lock()
		w.ended, w.res, w.err = true, res, err
		w.mu.Unlock()
		w.wake()
	}()
	return w
}

func (w *expWorker) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *expWorker) progress(p experiments.Progress) {
	w.mu.Lock()
	if len(w.pending) >= maxExpPending {
		w.pending = append(w.pending[:0], w.pending[maxExpPending/2:]...)
	}
	w.pending = append(w.pending, p)
	w.mu.Unlock()
	w.wake()
}

// Stop cancels the experiment: the current run saves a checkpoint and
// Run returns; the directory can be resumed.
func (w *expWorker) Stop() { w.cancel() }

// Wait waits up to timeout for the experiment to end.
func (w *expWorker) Wait(timeout time.Duration) bool {
	select {
	case <-w.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Outcome is how the experiment ended, once it has.
func (w *expWorker) Outcome() (res *experiments.Results, ended bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res, w.ended, w.err
}

// expBatchMsg carries what one experiment reported since the last batch.
type expBatchMsg struct {
	w     *expWorker
	ps    []experiments.Progress
	ended bool
	res   *experiments.Results
	err   error
}

// waitExp is the command that brings the next batch; Update re-arms it
// until the experiment has ended.
func waitExp(w *expWorker) tea.Cmd {
	return func() tea.Msg {
		<-w.notify
		if d := time.Until(w.last.Add(expInterval)); d > 0 {
			time.Sleep(d)
		}
		w.last = time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		ps := w.pending
		w.pending = nil
		return expBatchMsg{w: w, ps: ps, ended: w.ended, res: w.res, err: w.err}
	}
}

// expRegistry keeps every experiment the workbench started, so that
// whoever runs the program can stop them afterwards (Run).
type expRegistry struct {
	mu      sync.Mutex
	workers []*expWorker
}

func (r *expRegistry) add(w *expWorker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers = append(r.workers, w)
}

// Workers are the experiments started so far.
func (r *expRegistry) Workers() []*expWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.workers)
}

// ---------------------------------------------------------------------
// The setup form.

const (
	ffExperiment = iota
	ffPreset
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

var fieldLabels = [numFields]string{"Experiment", "Preset", "Variants", "Seeds", "Iterations", "Bases D", "Shots", "Ways", "Eval tasks", "Directory"}

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
	keys    KeyMap
	presets []presets.Preset
	kind    int // index into expKinds
	preset  int // index into presets
	inputs  [numFields]textinput.Model
	focus   int
	root    string // runs root, for the default directory
	// Checked from the fields by refresh.
	runs  int
	opts  experiments.Options
	err   string
	w, h  int
	stamp string // the time part of the default directory as shown
}

func newExpForm(t Theme, k KeyMap, all []presets.Preset, root string) expForm {
	f := expForm{theme: t, keys: k, presets: all, root: root, stamp: "YYYYMMDD-HHMMSS"}
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
	}
	return true
}

func (f *expForm) isText(i int) bool { return i != ffExperiment && i != ffPreset }

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
	bl := slices.Sorted(func(yield func(string) bool) {
		for n := range experiments.DefaultBaselines() {
			if !yield(n) {
				return
			}
		}
	})
	def, _, derr := experiments.Options{Experiment: name, Preset: p.Name}.Normalize(bl)
	ph := [numFields]string{}
	if derr == nil {
		ph[ffVariants] = strings.Join(def.Variants, ",")
		seeds := make([]string, len(def.Seeds))
		for i, s := range def.Seeds {
			seeds[i] = strconv.FormatUint(s, 10)
		}
		ph[ffSeeds] = strings.Join(seeds, ",")
		ph[ffBases] = ints(def.Bases)
		ph[ffShots] = ints(def.Shots)
		ph[ffWays] = ints(def.Ways)
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

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// expStartMsg asks the screen to start the experiment of the form.
type expStartMsg struct{}

func (f expForm) update(msg tea.Msg) (expForm, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return f, nil
	}
	k := f.keys
	switch {
	case key.Matches(km, k.FieldNext):
		f.move(1)
		return f, nil
	case key.Matches(km, k.FieldPrev):
		f.move(-1)
		return f, nil
	case key.Matches(km, k.Run):
		return f, func() tea.Msg { return expStartMsg{} }
	case !f.isText(f.focus) && key.Matches(km, k.Cycle):
		d := 1
		if km.String() == "left" {
			d = -1
		}
		if f.focus == ffExperiment {
			f.kind = (f.kind + d + len(expKinds)) % len(expKinds)
		} else if len(f.presets) > 0 {
			f.preset = (f.preset + d + len(f.presets)) % len(f.presets)
		}
		f.refresh()
		return f, nil
	}
	if f.isText(f.focus) {
		var cmd tea.Cmd
		f.inputs[f.focus], cmd = f.inputs[f.focus].Update(km)
		f.refresh()
		return f, cmd
	}
	return f, nil
}

// view draws the form at w×h.
func (f expForm) view(w, h int) string {
	t := f.theme
	var lines []string
	lines = append(lines, screenHeader(t, f.keys, "experiments · set up", w), "")
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
		if f.kindName() == experiments.Versatility {
			s += fmt.Sprintf(", each model evaluated on %s", plural(len(f.opts.Shots)*max(1, len(f.opts.Ways)), "cell"))
		}
		lines = append(lines, s+t.Dim.Render(" · the same directory as mkbench experiment "+f.kindName()))
	}
	lines = append(lines, t.Dim.Render("  an empty field is the default shown; "+fieldHints[ffOut]))
	body := strings.Join(lines, "\n")
	foot := footer(t, []key.Binding{short(f.keys.Run, "start"), short(f.keys.FieldNext, "field"),
		short(f.keys.Cycle, "change"), short(f.keys.Back, "back"), f.keys.Help, short(f.keys.Quit, "quit")})
	return block(body, w, h-1) + "\n" + block(foot, w, 1)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// screenHeader is a screen's first line: the name, what it shows, help.
func screenHeader(t Theme, k KeyMap, what string, w int) string {
	s := t.Title.Render(" mkbench ") + t.Dim.Render("│ ") + what
	hint := footer(t, k.HeaderHelp()) + " "
	if gap := w - ansi.StringWidthWc(s) - ansi.StringWidthWc(hint); gap > 0 {
		s += strings.Repeat(" ", gap) + hint
	}
	return block(s, w, 1)
}

func footer(t Theme, bs []key.Binding) string {
	f := help.New()
	f.Styles.ShortKey, f.Styles.ShortDesc, f.Styles.ShortSeparator = t.Key, t.Dim, t.Dim
	return " " + f.ShortHelpView(bs)
}

// ---------------------------------------------------------------------
// Results: one row per point of the experiment.

// rowKey identifies a row: what the experiment varies.
type rowKey struct {
	Variant          string
	Bases, Way, Shot int
}

// rowKeyOf is the row a point of experiment kind belongs to.
func rowKeyOf(kind string, k experiments.PointKey) rowKey {
	switch kind {
	case experiments.Efficiency:
		return rowKey{Variant: k.Variant, Bases: k.Bases}
	case experiments.Shots:
		return rowKey{Variant: k.Variant, Shot: k.TrainShot}
	case experiments.Versatility:
		return rowKey{Variant: k.Variant, Way: k.Way, Shot: k.Shot}
	}
	return rowKey{Variant: k.Variant}
}

// expRow is one point of the experiment as the table shows it.
type expRow struct {
	rowKey
	Seeds  []experiments.SeedResult
	Status string // pending, training, resuming, evaluating, done, failed, stopped
	Err    string
}

// planRows are the points of normalized options o, in plan order.
func planRows(o experiments.Options) []expRow {
	var rows []expRow
	add := func(k rowKey) { rows = append(rows, expRow{rowKey: k, Status: "pending"}) }
	switch o.Experiment {
	case experiments.Ablation:
		for _, v := range o.Variants {
			add(rowKey{Variant: v})
		}
	case experiments.Efficiency:
		for _, d := range o.Bases {
			for _, v := range o.Variants {
				add(rowKey{Variant: v, Bases: d})
			}
		}
	case experiments.Shots:
		for _, k := range o.Shots {
			for _, v := range o.Variants {
				add(rowKey{Variant: v, Shot: k})
			}
		}
	case experiments.Versatility:
		for _, v := range o.Variants {
			for _, k := range o.Shots {
				if len(o.Ways) == 0 {
					add(rowKey{Variant: v, Shot: k})
				}
				for _, w := range o.Ways {
					add(rowKey{Variant: v, Way: w, Shot: k})
				}
			}
		}
	}
	return rows
}

// aggregate is the row's mean and 95% interval: the run's over its
// evaluation tasks with one seed, Student-t over the seeds with several
// (as results.json computes them).
func (r expRow) aggregate() (mean, ci float64, ok bool) {
	n := len(r.Seeds)
	if n == 0 {
		return 0, 0, false
	}
	for _, s := range r.Seeds {
		mean += s.Mean
	}
	mean /= float64(n)
	if n == 1 {
		return mean, r.Seeds[0].CI95, true
	}
	var ss float64
	for _, s := range r.Seeds {
		ss += (s.Mean - mean) * (s.Mean - mean)
	}
	sd := math.Sqrt(ss / float64(n-1))
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	return mean, q * sd / math.Sqrt(float64(n)), true
}

// fmtMetric formats a value as the results tables do: accuracy in
// percent, MSE with four decimals.
func fmtMetric(metric string, v float64) string {
	if metric == "accuracy" {
		return strconv.FormatFloat(100*v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// expTableData is what the results table shows.
type expTableData struct {
	Kind   string // the experiment
	Metric string // "mse" or "accuracy"
	Seeds  int    // seeds per point
	Rows   []expRow
}

// expTable draws the results table at exactly w×h: one row per point,
// scrolled so that the first unfinished point is in view.
func expTable(t Theme, d expTableData, w, h int) string {
	if h <= 0 || w <= 0 {
		return block("", w, h)
	}
	metric := "MSE ± 95% CI"
	if d.Metric == "accuracy" {
		metric = "accuracy % ± 95% CI"
	}
	type col struct {
		name string
		w    int
	}
	cols := []col{{"variant", 12}}
	switch d.Kind {
	case experiments.Efficiency:
		cols = append(cols, col{"D", 6})
	case experiments.Shots:
		cols = append(cols, col{"shot", 5})
	case experiments.Versatility:
		if slices.ContainsFunc(d.Rows, func(r expRow) bool { return r.Way > 0 }) {
			cols = append(cols, col{"way", 5})
		}
		cols = append(cols, col{"shot", 5})
	}
	cols = append(cols, col{"seeds", 6}, col{metric, 21}, col{"train s", 8}, col{"status", 0})
	var head strings.Builder
	for _, c := range cols {
		if c.w > 0 {
			fmt.Fprintf(&head, "%-*s ", c.w, c.name)
		} else {
			head.WriteString(c.name)
		}
	}
	lines := []string{t.Bold.Render(head.String())}
	avail := h - 1
	first := slices.IndexFunc(d.Rows, func(r expRow) bool { return r.Status != "done" })
	start := 0
	if len(d.Rows) > avail && first >= avail-1 {
		start = min(first-(avail-2), len(d.Rows)-(avail-1))
	}
	more := 0
	for i := start; i < len(d.Rows); i++ {
		if len(lines) == h-1 && i < len(d.Rows)-1 {
			more = len(d.Rows) - i
			break
		}
		r := d.Rows[i]
		var sb strings.Builder
		for _, c := range cols {
			var v string
			switch c.name {
			case "variant":
				v = r.Variant
			case "D":
				v = strconv.Itoa(r.Bases)
			case "way":
				v = strconv.Itoa(r.Way)
			case "shot":
				v = strconv.Itoa(r.Shot)
			case "seeds":
				v = fmt.Sprintf("%d/%d", len(r.Seeds), d.Seeds)
			case metric:
				if m, ci, ok := r.aggregate(); ok {
					v = fmtMetric(d.Metric, m) + " ± " + fmtMetric(d.Metric, ci)
				} else {
					v = "–"
				}
			case "train s":
				v = "–"
				if len(r.Seeds) > 0 {
					var s float64
					for _, x := range r.Seeds {
						s += x.TrainSeconds
					}
					v = strconv.FormatFloat(s/float64(len(r.Seeds)), 'f', 1, 64)
				}
			}
			if c.w > 0 {
				fmt.Fprintf(&sb, "%-*s ", c.w, ansi.TruncateWc(v, c.w, "…"))
			}
		}
		st := r.Status
		switch r.Status {
		case "done":
		case "pending":
			st = t.Dim.Render(st)
		case "failed":
			st = t.Err.Render("failed")
			if r.Err != "" {
				st += " " + t.Dim.Render(r.Err)
			}
		case "stopped":
			st = t.Warn.Render(st)
		default:
			st = t.Key.Render(st)
		}
		lines = append(lines, sb.String()+st)
	}
	if start > 0 {
		lines[0] += t.Dim.Render(fmt.Sprintf("  (%d above)", start))
	}
	if more > 0 {
		lines = append(lines, t.Dim.Render(fmt.Sprintf("… %d more", more)))
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// expShades stand in for the heatmap's colours without colour, from
// worst to best.
var expShades = []rune{' ', '░', '▒', '▓', '█'}

// expHeatmap draws the versatility grid of every variant at exactly w×h:
// ways down, shots across (shots only for regression), each cell coloured
// by its metric, lighter better; without colour a shade glyph follows
// each value.
func expHeatmap(t Theme, metric string, rows []expRow, w, h int) string {
	var variants []string
	var ways, shots []int
	vals := map[rowKey]float64{}
	status := map[rowKey]string{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if !slices.Contains(variants, r.Variant) {
			variants = append(variants, r.Variant)
		}
		if !slices.Contains(ways, r.Way) {
			ways = append(ways, r.Way)
		}
		if !slices.Contains(shots, r.Shot) {
			shots = append(shots, r.Shot)
		}
		status[r.rowKey] = r.Status
		if m, _, ok := r.aggregate(); ok && finite(m) {
			vals[r.rowKey] = m
			lo, hi = math.Min(lo, m), math.Max(hi, m)
		}
	}
	slices.Sort(ways)
	slices.Sort(shots)
	level := func(v float64) float64 { // 0 worst … 1 best
		if !(hi > lo) {
			return 1
		}
		x := (v - lo) / (hi - lo)
		if metric != "accuracy" {
			x = 1 - x
		}
		return x
	}
	const cw = 9
	name := "accuracy %"
	if metric != "accuracy" {
		name = "MSE"
	}
	var lines []string
	for _, v := range variants {
		lines = append(lines, t.Bold.Render(v)+t.Dim.Render(" · "+name+" by way × shot, lighter is better"))
		head := fmt.Sprintf("%-7s", "")
		for _, k := range shots {
			head += fmt.Sprintf("%*s", cw, fmt.Sprintf("%d-shot", k))
		}
		lines = append(lines, t.Label.Render(head))
		for _, wy := range ways {
			label := "       "
			if wy > 0 {
				label = fmt.Sprintf("%-7s", fmt.Sprintf("%d-way", wy))
			}
			line := t.Label.Render(label)
			for _, k := range shots {
				rk := rowKey{Variant: v, Way: wy, Shot: k}
				m, ok := vals[rk]
				st, planned := status[rk]
				switch {
				case ok:
					x := level(m)
					s := fmtMetric(metric, m)
					if t.Mono {
						g := expShades[int(math.Round(x*float64(len(expShades)-1)))]
						line += fmt.Sprintf(" %6s %c", s, g)
					} else {
						c := t.heat[min(len(t.heat)-1, 2+int(math.Round(x*float64(len(t.heat)-3))))]
						fg := lipgloss.Color("#c0caf5")
						if x > 0.5 {
							fg = lipgloss.Color("#1a1b26")
						}
						line += " " + t.r.NewStyle().Background(c).Foreground(fg).Render(fmt.Sprintf("%*s ", cw-2, s))
					}
				case !planned:
					line += fmt.Sprintf("%*s", cw, "")
				case st == "evaluating":
					line += t.Key.Render(fmt.Sprintf("%*s", cw, "…  "))
				default:
					line += t.Dim.Render(fmt.Sprintf("%*s", cw, "·  "))
				}
			}
			lines = append(lines, line)
		}
		lines = append(lines, "")
	}
	if len(vals) > 0 {
		legend := "worse "
		if t.Mono {
			legend += string(expShades)
		} else {
			for _, c := range t.heat[2:] {
				legend += t.r.NewStyle().Foreground(c).Render("█")
			}
		}
		lines = append(lines, t.Dim.Render(legend+" better · "+fmtMetric(metric, lo)+"–"+fmtMetric(metric, hi)))
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// expProgressData is the progress line's content.
type expProgressData struct {
	Kind, Preset string
	Job, Jobs    int
	Name, Phase  string
	Iter, Iters  int
	ItPerSec     float64
	RunETA       time.Duration // < 0: unknown
	AllETA       time.Duration // < 0: unknown
	State        string        // running, stopping, finished, interrupted, failed
	// Points and PointsDone count the experiment's points (rows); the
	// versatility grid measures its progress by them.
	Points, PointsDone int
}

func fmtETA(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

// expProgress draws two lines: where the experiment is, and a bar of the
// runs done.
func expProgress(t Theme, d expProgressData, w int) string {
	l1 := fmt.Sprintf(" run %d/%d", d.Job, d.Jobs)
	if d.Name != "" {
		l1 += " " + t.Bold.Render(d.Name)
	}
	if d.Phase != "" {
		l1 += " · " + d.Phase
	}
	if d.Iters > 0 && (d.Phase == "training" || d.Phase == "resuming") {
		l1 += fmt.Sprintf(" · iter %d/%d · %.1f it/s · run ETA %s", d.Iter, d.Iters, d.ItPerSec, fmtETA(d.RunETA))
	}
	if d.State == "running" {
		l1 += " · experiment ETA " + fmtETA(d.AllETA)
	} else {
		l1 += " · " + t.Warn.Render(d.State)
	}
	frac := 0.0
	if d.Jobs > 0 {
		done := d.Job - 1
		if d.State == "finished" {
			done = d.Jobs
		}
		frac = float64(done) / float64(d.Jobs)
		if d.Iters > 0 && d.State == "running" {
			frac += float64(d.Iter) / float64(d.Iters) / float64(d.Jobs)
		}
	}
	if d.Kind == experiments.Versatility && d.Points > 0 && d.State != "finished" {
		frac = float64(d.PointsDone) / float64(d.Points)
	}
	l2 := " "
	if bw := min(w-10, 60); bw >= 5 {
		bar := progress.New(progress.WithSolidFill("#ff5f87"), progress.WithoutPercentage(),
			progress.WithWidth(bw), progress.WithColorProfile(t.r.ColorProfile()))
		l2 += bar.ViewAs(min(frac, 1))
	}
	l2 += fmt.Sprintf(" %3.0f%%", 100*min(frac, 1))
	return block(l1+"\n"+l2, w, 2)
}

// ---------------------------------------------------------------------
// The screen.

// Stages of the experiments screen.
const (
	expSetup = iota
	expResults
	expDash
)

// expScreen is the experiments screen.
type expScreen struct {
	theme Theme
	keys  KeyMap
	opts  Options
	root  string
	reg   *expRegistry
	form  expForm
	stage int
	run   *expState // the experiment started last; nil before the first
	w, h  int
}

// expState is everything the screen knows of a running experiment.
type expState struct {
	worker  *expWorker
	opts    experiments.Options // normalized
	preset  presets.Preset
	metric  string
	rows    []expRow
	job     int
	jobs    int
	name    string
	phase   string
	snap    *engine.Snapshot
	started time.Time
	jobAt   time.Time
	jobSecs []float64 // wall seconds of the runs trained here
	state   string
	msg     string
	msgErr  bool

	dash    dashboard
	hasDash bool
	dashJob int
	stub    *session.Run
}

func newExpScreen(t Theme, k KeyMap, opts Options, reg *expRegistry) expScreen {
	root := opts.Root
	if root == "" {
		root = presets.RunsRoot()
	}
	return expScreen{theme: t, keys: k, opts: opts, root: root, reg: reg, form: newExpForm(t, k, presets.All(), root)}
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

// running reports whether an experiment is under way.
func (s *expScreen) running() bool {
	return s.run != nil && (s.run.state == "running" || s.run.state == "stopping")
}

// capturing reports whether keys go to a text field of the form.
func (s *expScreen) capturing() bool { return s.stage == expSetup && s.form.capturing() }

// stop cancels the experiment; the current run checkpoints.
func (s *expScreen) stop() bool {
	if !s.running() {
		return false
	}
	if s.run.state == "running" {
		s.run.worker.Stop()
		s.run.state = "stopping"
		s.run.msg, s.run.msgErr = "stopping: the current run saves a checkpoint… (q again quits at once)", false
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
	dir := strings.TrimSpace(s.form.inputs[ffOut].Value())
	if dir == "" {
		dir = presets.NewExperimentDir(s.root, o.Experiment, o.Preset, time.Now())
	}
	r := &experiments.Runner{Dir: dir, Options: o, Overrides: s.opts.Overrides, Baselines: experiments.DefaultBaselines()}
	plan, err := r.Plan()
	if err != nil {
		s.form.err = firstLine(err.Error())
		return nil
	}
	norm := s.form.opts
	p := s.form.presetOf()
	st := &expState{opts: norm, preset: p, metric: "mse", rows: planRows(norm), jobs: len(plan), job: 1,
		started: time.Now(), state: "running", dashJob: -1}
	if p.Config.Classify() {
		st.metric = "accuracy"
	}
	st.msg = "started → " + dir
	st.worker = startExperiment(r)
	s.reg.add(st.worker)
	s.run = st
	s.stage = expResults
	return waitExp(st.worker)
}

// row returns the row of key k, or nil.
func (e *expState) row(k rowKey) *expRow {
	for i := range e.rows {
		if e.rows[i].rowKey == k {
			return &e.rows[i]
		}
	}
	return nil
}

// apply takes in one batch of the experiment's reports.
func (s *expScreen) apply(msg expBatchMsg) {
	e := s.run
	if e == nil || msg.w != e.worker {
		return
	}
	var ups []session.Update
	for _, p := range msg.ps {
		ups = append(ups, e.progress(s, p)...)
	}
	if msg.ended {
		ups = append(ups, e.end(msg.res, msg.err)...)
	}
	if e.hasDash && len(ups) > 0 {
		e.dash.apply(ups)
		if s.stage == expDash {
			e.dash.render()
		}
	}
}

// progress applies one report and returns what the current run's
// dashboard should take in.
func (e *expState) progress(s *expScreen, p experiments.Progress) []session.Update {
	kind := e.opts.Experiment
	e.job, e.jobs, e.name = p.Job, p.Jobs, p.Name
	now := time.Now()
	var ups []session.Update
	endDash := func(u session.Update) {
		if e.hasDash && e.dashJob == p.Job && !e.dash.allEnded() {
			u.Run = e.stub
			u.Ended = true
			ups = append(ups, u)
		}
	}
	switch p.Phase {
	case experiments.PhaseTrain, experiments.PhaseResume, experiments.PhaseReuse, experiments.PhaseModel:
		e.snap, e.jobAt = nil, now
		e.phase = map[string]string{experiments.PhaseTrain: "training", experiments.PhaseResume: "resuming",
			experiments.PhaseReuse: "reusing a finished run", experiments.PhaseModel: "evaluating the given model"}[p.Phase]
		st := e.phase
		if p.Phase == experiments.PhaseReuse || p.Phase == experiments.PhaseModel {
			st = "evaluating"
		}
		if kind == experiments.Versatility {
			for i := range e.rows {
				if e.rows[i].Variant == p.Key.Variant && e.rows[i].Status == "pending" {
					e.rows[i].Status = st
				}
			}
		} else if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Status = st
		}
		if p.Phase == experiments.PhaseTrain || p.Phase == experiments.PhaseResume {
			e.newDash(s, p)
		}
	case experiments.PhaseStep:
		if p.Snapshot == nil {
			break
		}
		snap := *p.Snapshot
		e.snap = &snap
		if snap.Iters > 0 && snap.Iter >= snap.Iters && kind != experiments.Versatility {
			// Past its last iteration a run is in its final evaluation.
			e.phase = "final evaluation"
			if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
				r.Status = "evaluating"
			}
		}
		if e.hasDash && e.dashJob == p.Job {
			disp, val := snap.Display, snap.Val
			last := snap
			last.Display, last.Val, last.Eval = nil, nil, nil
			u := session.Update{Run: e.stub, Last: &last, Display: disp,
				Points: []session.Point{{Iter: snap.Iter, Loss: snap.Loss, Data: snap.Data, KL: snap.KL, ELBO: snap.ELBO}}}
			if val != nil {
				u.Vals = []session.ValPoint{{Iter: snap.Iter, Eval: *val}}
			}
			ups = append(ups, u)
		}
	case experiments.PhaseEval:
		e.phase = "evaluating " + wayShotLabel(p.Key)
		if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Status = "evaluating"
		}
		endDash(session.Update{Result: engine.Result{Iters: e.iter()}})
	case experiments.PhaseDone:
		if p.Result == nil {
			break
		}
		sr := *p.Result
		if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Seeds = slices.DeleteFunc(r.Seeds, func(x experiments.SeedResult) bool { return x.Seed == sr.Seed })
			r.Seeds = append(r.Seeds, sr)
			r.Status = "done"
			if len(r.Seeds) < len(e.opts.Seeds) {
				r.Status = "pending"
			}
		}
		if kind != experiments.Versatility && e.phase != "reusing a finished run" {
			e.jobSecs = append(e.jobSecs, now.Sub(e.jobAt).Seconds())
		}
		ev := engine.EvalResult{Metric: e.metric, Mean: sr.Mean, CI95: sr.CI95, Tasks: sr.Tasks}
		endDash(session.Update{Result: engine.Result{Iters: sr.Iters, Eval: &ev}})
		e.msg, e.msgErr = fmt.Sprintf("%s: %s %s ± %s", p.Name, e.metric, fmtMetric(e.metric, sr.Mean), fmtMetric(e.metric, sr.CI95)), false
		if kind == experiments.Versatility {
			e.msg = fmt.Sprintf("%s at %s: %s %s ± %s", p.Name, wayShotLabel(p.Key), e.metric, fmtMetric(e.metric, sr.Mean), fmtMetric(e.metric, sr.CI95))
		}
	case experiments.PhaseFailed:
		err := "failed"
		if p.Err != nil {
			err = firstLine(p.Err.Error())
		}
		for i := range e.rows {
			r := &e.rows[i]
			if r.Variant == p.Key.Variant && r.Status != "done" && r.Status != "pending" {
				r.Status, r.Err = "failed", err
			}
		}
		endDash(session.Update{Err: p.Err})
		e.msg, e.msgErr = p.Name+": "+err, true
	case experiments.PhaseFigures:
		e.phase, e.snap = "drawing the tables and figures", nil
	}
	return ups
}

func (e *expState) iter() int {
	if e.snap != nil {
		return e.snap.Iter
	}
	return 0
}

func wayShotLabel(k experiments.PointKey) string {
	if k.Way > 0 {
		return fmt.Sprintf("%d-way %d-shot", k.Way, k.Shot)
	}
	return fmt.Sprintf("%d-shot", k.Shot)
}

// newDash gives the run that starts training a dashboard of its own,
// fed from the experiment's snapshots.
func (e *expState) newDash(s *expScreen, p experiments.Progress) {
	v := p.Key.Variant
	if !slices.Contains(toggleVariants[:], v) {
		e.hasDash = false // a baseline (MAML) reports no snapshots
		return
	}
	cfg := e.preset.Config
	if e.opts.Iters > 0 {
		cfg.Iters = e.opts.Iters
	}
	e.stub = &session.Run{Variant: v, Dir: filepath.Join(e.worker.Dir, p.Name), Config: cfg}
	d := newDashboard(s.theme, s.keys, nil, e.preset)
	d.readOnly = true
	vi := variantIndex(v)
	d.views[vi].run, d.views[vi].state = e.stub, "starting"
	d.selected = vi
	d.w, d.h = s.w, s.h
	d.setMsg(fmt.Sprintf("experiment run %d/%d: %s · esc returns to the experiment", p.Job, p.Jobs, p.Name))
	e.dash, e.hasDash, e.dashJob = d, true, p.Job
	if s.stage == expDash {
		e.dash.render()
	}
}

// end records how the experiment ended.
func (e *expState) end(res *experiments.Results, err error) []session.Update {
	var ups []session.Update
	interrupted := err != nil && errors.Is(err, context.Canceled)
	switch {
	case err == nil:
		e.state, e.phase = "finished", "done"
		e.job = e.jobs
		e.msg, e.msgErr = "finished: results.md, results.csv and figures/ in "+e.worker.Dir, false
	case interrupted:
		e.state = "interrupted"
		e.msg, e.msgErr = "interrupted; runs are checkpointed; continue with: mkbench experiment --resume "+e.worker.Dir, false
	case errors.Is(err, experiments.ErrRunsFailed):
		e.state = "finished with failures"
		e.msg, e.msgErr = firstLine(err.Error()), true
	default:
		e.state = "failed"
		e.msg, e.msgErr = firstLine(err.Error()), true
	}
	_ = res
	for i := range e.rows {
		switch e.rows[i].Status {
		case "training", "resuming", "evaluating":
			e.rows[i].Status = "stopped"
		}
	}
	e.snap = nil
	if e.hasDash && !e.dash.allEnded() {
		ups = append(ups, session.Update{Run: e.stub, Ended: true, Err: err,
			Result: engine.Result{Iters: e.iter(), Interrupted: interrupted}})
	}
	return ups
}

// progressData is the progress line of the experiment.
func (e *expState) progressData(now time.Time) expProgressData {
	d := expProgressData{Kind: e.opts.Experiment, Preset: e.preset.Name, Job: e.job, Jobs: e.jobs, Name: e.name,
		Phase: e.phase, RunETA: -1, AllETA: -1, State: e.state, Points: len(e.rows)}
	for _, r := range e.rows {
		if r.Status == "done" {
			d.PointsDone++
		}
	}
	if e.state == "stopping" {
		d.State = "stopping (checkpointing)"
	}
	if e.snap != nil {
		d.Iter, d.Iters, d.ItPerSec = e.snap.Iter, e.snap.Iters, e.snap.ItersPerSec
		if d.ItPerSec > 0 && d.Iters >= d.Iter {
			d.RunETA = time.Duration(float64(d.Iters-d.Iter) / d.ItPerSec * float64(time.Second))
		}
	}
	// The rest of the experiment: the runs left at the mean time of
	// those trained here, else at the current run's rate.
	left := float64(e.jobs - e.job)
	switch {
	case len(e.jobSecs) > 0:
		var s float64
		for _, x := range e.jobSecs {
			s += x
		}
		per := s / float64(len(e.jobSecs))
		cur := math.Max(0, per-now.Sub(e.jobAt).Seconds())
		if d.RunETA >= 0 {
			cur = d.RunETA.Seconds()
		}
		d.AllETA = time.Duration((cur + left*per) * float64(time.Second))
	case d.RunETA >= 0 && d.ItPerSec > 0:
		d.AllETA = d.RunETA + time.Duration(left*float64(d.Iters)/d.ItPerSec*float64(time.Second))
	}
	return d
}

func (s expScreen) update(msg tea.Msg) (expScreen, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		s.w, s.h = msg.Width, msg.Height
		s.form.w, s.form.h = msg.Width, msg.Height
		if s.run != nil && s.run.hasDash {
			s.run.dash.w, s.run.dash.h = msg.Width, msg.Height
			s.run.dash.render()
		}
		return s, nil
	case expStartMsg:
		return s, s.start()
	case expBatchMsg:
		s.apply(msg)
		return s, nil
	case tea.KeyMsg:
		switch s.stage {
		case expSetup:
			var cmd tea.Cmd
			s.form, cmd = s.form.update(msg)
			return s, cmd
		case expResults:
			switch {
			case key.Matches(msg, s.keys.ShowRun):
				if s.run != nil && s.run.hasDash {
					s.stage = expDash
					s.run.dash.w, s.run.dash.h = s.w, s.h
					s.run.dash.render()
				} else if s.run != nil {
					s.run.msg, s.run.msgErr = "no dashboard for this run (it is not trained here, or is a baseline)", false
				}
			case key.Matches(msg, s.keys.Back):
				if s.running() {
					s.run.msg, s.run.msgErr = "the experiment is running: q stops it (checkpointed), enter shows its run", false
				} else {
					s.stage = expSetup
				}
			}
		case expDash:
			if key.Matches(msg, s.keys.Back) {
				s.stage = expResults
				return s, nil
			}
			s.run.dash, _ = s.run.dash.update(msg)
		}
	}
	return s, nil
}

// view draws the screen.
func (s expScreen) view() string {
	w, h := s.w, s.h
	if w < 40 || h < 12 {
		return center(fmt.Sprintf("mkbench needs at least 40×12 (now %d×%d)", w, h), w, h)
	}
	switch {
	case s.stage == expSetup || s.run == nil:
		return s.form.view(w, h)
	case s.stage == expDash && s.run.hasDash:
		return s.run.dash.view()
	}
	return s.resultsView(time.Now())
}

// resultsView is the live results: header, progress, table (and the
// heatmap for versatility), message and keys.
func (s expScreen) resultsView(now time.Time) string {
	t, e, w, h := s.theme, s.run, s.w, s.h
	what := fmt.Sprintf("experiment %s · %s · %s → %s", e.opts.Experiment, e.preset.Name, plural(len(e.opts.Seeds), "seed"), e.worker.Dir)
	head := screenHeader(t, s.keys, what, w)
	prog := expProgress(t, e.progressData(now), w)
	bodyH := h - 6
	body := expBody(t, expTableData{Kind: e.opts.Experiment, Metric: e.metric, Seeds: len(e.opts.Seeds), Rows: e.rows}, w, bodyH)
	msg := " " + e.msg
	if e.msgErr {
		msg = " " + t.Err.Render(e.msg)
	}
	bs := []key.Binding{short(s.keys.ShowRun, "current run's dashboard"), short(s.keys.Quit, "stop & quit"), s.keys.Help}
	if !s.running() {
		bs = []key.Binding{short(s.keys.ShowRun, "last run's dashboard"), short(s.keys.Back, "new experiment"), s.keys.Help, short(s.keys.Quit, "quit")}
	}
	return head + "\n" + prog + "\n" + block("", w, 1) + "\n" + body + "\n" + block(msg, w, 1) + "\n" + block(footer(t, bs), w, 1)
}

// expBody is the table, with the heatmap beside it (wide terminals) or
// above it for versatility; exactly w×h.
func expBody(t Theme, d expTableData, w, h int) string {
	if d.Kind != experiments.Versatility {
		return expTable(t, d, w, h)
	}
	variants := 0
	seen := map[string]bool{}
	ways := map[int]bool{}
	for _, r := range d.Rows {
		if !seen[r.Variant] {
			seen[r.Variant] = true
			variants++
		}
		ways[r.Way] = true
	}
	heatH := variants*(len(ways)+3) + 1
	shots := map[int]bool{}
	for _, r := range d.Rows {
		shots[r.Shot] = true
	}
	heatW := max(7+9*len(shots)+2, 56)
	if w >= 120 {
		tw := w - heatW - 2
		return joinH(expTable(t, d, tw, h), block("", 2, h), expHeatmap(t, d.Metric, d.Rows, heatW, h))
	}
	heatH = min(heatH, h/2)
	return expHeatmap(t, d.Metric, d.Rows, w, heatH) + "\n" + expTable(t, d, w, h-heatH)
}
