package ui

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The runs screen: every run directory under the runs root, in the groups
// of the experiments and sweeps they belong to, with their state and
// numbers (experiments/runs). Marked runs overlay their curves or show how
// their settings differ; the run under the cursor opens, resumes,
// evaluates or is deleted. Opened with R from the picker and the
// dashboard, or mkbench tui --runs.
//
// The directories are found at once (listings only) and read in chunks in
// the background, so a root of a thousand runs shows its table at once
// and fills it in while keys keep working.

// runsStage is what the screen shows.
type runsStage int

const (
	runsTable  runsStage = iota
	runsCurves           // the marked runs' curves, overlaid
	runsDiff             // the settings that differ between the marked runs
)

// runsChunk is how many runs one background read takes: small enough that
// keys are answered between chunks.
const runsChunk = 64

type runsScreen struct {
	theme Theme
	keys  runsKeys
	root  string
	data  string // the data folder for runs that recorded none
	gen   int    // the scan; messages of an older one are dropped

	scanning bool
	scanErr  string
	all      []runs.Run // in the order found; read[i] once its files are read
	read     []bool
	nread    int
	view     []int      // the rows shown: indexes into all, filtered and sorted
	cursor   listCursor // on view; it pages by the table's height
	marks    marks[string]

	sortKey   int // index into runs.SortKeys
	desc      bool
	filter    textinput.Model
	filtering bool

	stage            runsStage
	metric           int // index into overlayMetrics
	timeX, ema, logY bool
	curves           map[string]*runCurves
	confirm          string // the directory asked to be deleted, awaiting y
	evals            map[string]*evalJob
	note             note
	w, h             int
	spin             int
	tickOn           bool
}

// runCurves are a run's curves once read (or why they could not be).
type runCurves struct {
	c   runs.Curves
	err error
}

func newRunsScreen(t Theme, root, data string) *runsScreen {
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = "words in the directory, preset, variant, state or seed"
	return &runsScreen{theme: t, keys: newRunsKeys(), root: root, data: data, marks: marks[string]{},
		curves: map[string]*runCurves{}, evals: map[string]*evalJob{}, filter: in, sortKey: slices.Index(runs.SortKeys, "run")}
}

// Messages of the screen's background work.
type (
	runsFoundMsg struct {
		gen   int
		found []runs.Entry
		err   error
	}
	runsReadMsg struct {
		gen, start int
		rs         []runs.Run
	}
	runsCurvesMsg struct {
		dir string
		c   runCurves
	}
	runsEvalMsg struct {
		dir  string
		res  engine.EvalResult
		note string
		err  error
	}
	runsDeletedMsg struct {
		dir  string
		err  error
		left []string // what was not mkbench's, left in dir
	}
	runsTickMsg struct{}
	// openRunMsg and resumeRunMsg ask the root to open the run, or to
	// resume it on the dashboard.
	openRunMsg   struct{ dir string }
	resumeRunMsg struct{ r runs.Run }
)

// scan finds the runs again: the table starts over, marks kept.
func (s *runsScreen) scan() tea.Cmd {
	s.gen++
	s.scanning, s.scanErr = true, ""
	gen, root := s.gen, s.root
	return func() tea.Msg {
		found, err := runs.Find(root)
		return runsFoundMsg{gen, found, err}
	}
}

// readChunk reads the runs from start on, runsChunk of them.
func (s *runsScreen) readChunk(start int) tea.Cmd {
	gen, root := s.gen, s.root
	entries := make([]runs.Entry, 0, runsChunk)
	for i := start; i < min(start+runsChunk, len(s.all)); i++ {
		entries = append(entries, s.all[i].Entry)
	}
	return func() tea.Msg {
		now := time.Now()
		rs := make([]runs.Run, len(entries))
		for i, e := range entries {
			rs[i] = runs.Read(e, now)
		}
		runs.UnitDevices(root, rs)
		return runsReadMsg{gen, start, rs}
	}
}

func (s *runsScreen) Init() tea.Cmd { return s.scan() }

func (s *runsScreen) SetSize(w, h int) { s.w, s.h = w, h }

func (s *runsScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		s.SetSize(msg.Width, msg.Height)
	case runsFoundMsg:
		if msg.gen != s.gen {
			return s, nil
		}
		if msg.err != nil {
			s.scanning, s.scanErr = false, firstLine(msg.err.Error())
			s.all, s.read, s.view = nil, nil, nil
			return s, nil
		}
		keep := s.currentDir()
		s.all = make([]runs.Run, len(msg.found))
		for i, e := range msg.found {
			s.all[i] = runs.Run{Entry: e}
		}
		s.read, s.nread = make([]bool, len(s.all)), 0
		for d := range s.marks {
			if !slices.ContainsFunc(msg.found, func(e runs.Entry) bool { return e.Dir == d }) {
				delete(s.marks, d)
			}
		}
		s.refresh(keep)
		if len(s.all) == 0 {
			s.scanning = false
			return s, nil
		}
		return s, s.readChunk(0)
	case runsReadMsg:
		if msg.gen != s.gen {
			return s, nil
		}
		for i, r := range msg.rs {
			s.all[msg.start+i], s.read[msg.start+i] = r, true
		}
		s.nread = msg.start + len(msg.rs)
		s.refresh(s.currentDir())
		if s.nread < len(s.all) {
			return s, s.readChunk(s.nread)
		}
		s.scanning = false
	case runsCurvesMsg:
		c := msg.c
		s.curves[msg.dir] = &c
	case runsEvalMsg:
		return s, s.evaluated(msg)
	case runsDeletedMsg:
		s.deleted(msg)
	case runsTickMsg:
		s.spin++
		if len(s.evals) == 0 {
			s.tickOn = false
			return s, nil
		}
		return s, runsTick()
	case tea.KeyMsg:
		return s, s.key(msg)
	}
	return s, nil
}

// refresh rebuilds the rows shown (filter, then sort), keeping the cursor
// on the run in directory keep when it is still shown.
func (s *runsScreen) refresh(keep string) {
	shown := slices.Clone(s.all)
	where := map[string]int{}
	for i, r := range s.all {
		where[r.Dir] = i
	}
	shown = runs.Filter(shown, s.filter.Value())
	runs.Sort(shown, runs.SortKeys[s.sortKey], s.desc) // a key of SortKeys: no error
	s.view = s.view[:0]
	for _, r := range shown {
		s.view = append(s.view, where[r.Dir])
	}
	s.cursor = s.cursor.Len(len(s.view))
	for i, j := range s.view {
		if s.all[j].Dir == keep {
			s.cursor = s.cursor.Select(i)
		}
	}
}

// current is the run under the cursor.
func (s *runsScreen) current() (*runs.Run, bool) {
	if len(s.view) == 0 {
		return nil, false
	}
	return &s.all[s.view[s.cursor.At()]], true
}

func (s *runsScreen) currentDir() string {
	if r, ok := s.current(); ok {
		return r.Dir
	}
	return ""
}

// marked are the marked runs in the table's order, or the run under the
// cursor when none is.
func (s *runsScreen) marked() []runs.Run {
	var out []runs.Run
	for _, j := range s.view {
		if _, ok := s.marks[s.all[j].Dir]; ok {
			out = append(out, s.all[j])
		}
	}
	if len(out) == 0 {
		if r, ok := s.current(); ok {
			out = append(out, *r)
		}
	}
	return out
}

// loadCurves reads the curves of the runs shown on the curves view that
// are not read yet.
func (s *runsScreen) loadCurves() tea.Cmd {
	var cmds []tea.Cmd
	for _, r := range s.marked() {
		if _, ok := s.curves[r.Dir]; ok {
			continue
		}
		s.curves[r.Dir] = nil // asked
		dir := r.Dir
		cmds = append(cmds, func() tea.Msg {
			c, err := runs.ReadCurves(dir)
			return runsCurvesMsg{dir, runCurves{c, err}}
		})
	}
	return tea.Batch(cmds...)
}

func runsTick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return runsTickMsg{} })
}

// evalJob is an evaluation in the background; the evaluating goroutine
// counts its tasks, the row reads them at each tick.
type evalJob struct {
	done, total atomic.Int64
}

func (j *evalJob) progress(done, total int) {
	j.total.Store(int64(total))
	j.done.Store(int64(done))
}

// text is the row's metric cell while the evaluation runs: its share of
// tasks done, or dots (one more each tick) until the first batch is.
func (j *evalJob) text(spin int) string {
	done, total := j.done.Load(), j.total.Load()
	if total == 0 {
		return runstate.Evaluating + strings.Repeat(".", spin%4)
	}
	return fmt.Sprintf("%s %d%%", runstate.Evaluating, 100*done/total)
}

// evaluate evaluates the run under the cursor in the background as mkbench
// eval --run does; its row shows the result when it comes.
func (s *runsScreen) evaluate(r runs.Run) tea.Cmd {
	switch {
	case r.State == runstate.Running:
		s.note.set(r.Rel + " is running: evaluate it when it has stopped")
		return nil
	case r.State == "":
		s.note.set(r.Rel + " cannot be read: " + r.Error)
		return nil
	}
	if _, busy := s.evals[r.Dir]; busy {
		s.note.set(r.Rel + " is being evaluated already")
		return nil
	}
	job := &evalJob{}
	s.evals[r.Dir] = job
	s.note.set(fmt.Sprintf("evaluating %s on %d tasks…", r.Rel, r.Config.EvalTasks))
	dir, data := r.Dir, s.data
	cmd := func() tea.Msg {
		res, note, err := presets.EvaluateRun(dir, data, job.progress)
		return runsEvalMsg{dir, res, note, err}
	}
	if !s.tickOn {
		s.tickOn = true
		return tea.Batch(cmd, runsTick())
	}
	return cmd
}

func (s *runsScreen) evaluated(msg runsEvalMsg) tea.Cmd {
	delete(s.evals, msg.dir)
	i := slices.IndexFunc(s.all, func(r runs.Run) bool { return r.Dir == msg.dir })
	if msg.err != nil {
		s.note.fail(fmt.Errorf("evaluating %s: %w", msg.dir, msg.err))
		return nil
	}
	if i < 0 {
		return nil
	}
	r := &s.all[i]
	text := fmt.Sprintf("%s: %s", r.Rel, msg.res)
	if r.Eval != nil && !r.Val && r.Eval.Tasks == msg.res.Tasks {
		if r.Eval.Mean == msg.res.Mean {
			text += " (matches summary.json)"
		} else {
			text += fmt.Sprintf(" (summary.json: %s)", runs.MetricText(*r))
		}
	}
	if msg.note != "" {
		text += "; " + msg.note
	}
	res := msg.res
	r.Eval, r.Val = &res, false
	s.note.set(text)
	s.refresh(s.currentDir())
	return nil
}

// remove deletes run directory dir, unless a process holds its lock:
// mkbench's own files of the run, and the folder once nothing else is in
// it (engine.RemoveRun); a file not mkbench's is left, and named.
func remove(dir string) tea.Cmd {
	return func() tea.Msg {
		lock, err := engine.LockRun(dir)
		if err != nil {
			return runsDeletedMsg{dir: dir, err: err}
		}
		left, err := engine.RemoveRun(dir, models.FileModel, models.FileInfo, experiments.FileFits, experiments.FileOmega,
			sweep.FileStarts, sweep.FileEnds)
		if err != nil || len(left) > 0 {
			lock.Release()
			return runsDeletedMsg{dir: dir, err: err, left: left}
		}
		lock.Remove()
		return runsDeletedMsg{dir: dir, err: os.Remove(dir)}
	}
}

func (s *runsScreen) deleted(msg runsDeletedMsg) {
	if msg.err != nil {
		s.note.fail(fmt.Errorf("not deleted: %w", msg.err))
		return
	}
	i := slices.IndexFunc(s.all, func(r runs.Run) bool { return r.Dir == msg.dir })
	if i < 0 {
		return
	}
	keep := s.currentDir()
	s.all, s.read = slices.Delete(s.all, i, i+1), slices.Delete(s.read, i, i+1)
	s.nread = min(s.nread, len(s.all))
	delete(s.marks, msg.dir)
	delete(s.curves, msg.dir)
	s.refresh(keep)
	if len(msg.left) > 0 {
		s.note.set(fmt.Sprintf("deleted the run's files in %s; left what is not mkbench's: %s", msg.dir, strings.Join(msg.left, ", ")))
		return
	}
	s.note.set("deleted " + msg.dir)
}
