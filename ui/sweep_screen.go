package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
)

// The sweep screen watches a sweep directory (mkbench sweep run), wherever
// its units run: everything it shows is read from the directory, as
// mkbench sweep status reads it, so local workers and Slurm array tasks
// look the same. A table of the units, the loss curves of the marked ones
// and the results so far; its keys are in sweep_keys.go and its drawing
// in sweep_view.go.
//
// The directory is read every sweepPoll by a command, never in Update:
// one read is in flight at a time (the next is armed when it answers),
// so the curves' file offsets it returns always continue the ones the
// screen holds. squeue, which can hang for a minute, runs in a loop of
// its own at most every sweepQueueEvery, so a slow cluster never holds
// up the files.

// Stages of the sweep screen.
const (
	sweepChoose = iota // the directory is typed or picked
	sweepWatch
)

const (
	sweepPoll       = time.Second
	sweepQueueEvery = 5 * time.Second
)

// foundSweep is a sweep directory found under the runs root.
type foundSweep struct {
	dir string
	mod time.Time
}

// unitCurve is one unit's loss curve as read so far from its metrics.jsonl;
// off is where the next read starts.
type unitCurve struct {
	off        int64
	iter, loss []float64
}

// sweepScreen is the sweep screen.
type sweepScreen struct {
	theme  Theme
	keys   sweepKeys
	root   string // where the picker's w looks for sweeps
	direct bool   // opened with --sweep: back quits
	stage  int
	// Choosing.
	input     textinput.Model
	found     []foundSweep
	pick      listCursor // on found
	chooseErr string
	// Watching.
	dir       string
	gen       int           // counts opens: messages of an earlier one are dropped
	st        *sweep.Status // nil until the first read
	readErr   string
	queueAt   time.Time
	queueBusy bool
	queue     map[int][2]string // Slurm state and node by unit index, from the last squeue
	queueErr  string
	curves    map[int]*unitCurve
	marks     marks[int] // marked unit index → colour slot
	cursor    listCursor // on the units; it pages by the table's height
	alt       bool
	logY, ema bool
	frame     string
	dirty     bool
	w, h      int
}

// Messages of the sweep screen's commands, each tagged with the open it
// belongs to.
type (
	sweepTickMsg  struct{ gen int }
	sweepFoundMsg struct {
		gen   int
		found []foundSweep
	}
	sweepReadMsg struct {
		gen    int
		st     sweep.Status
		err    error
		curves []curveRead
	}
	sweepQueueMsg struct {
		gen   int
		queue map[int][2]string
		err   string
	}
)

// curveReq asks for a unit's metrics.jsonl from off on; curveRead is the
// answer: the rows from `from` to `to` (from 0 when reset: the file is
// shorter than before, as after a resume that cut rows past its
// checkpoint).
type curveReq struct {
	unit int
	path string
	off  int64
}

type curveRead struct {
	unit      int
	from, to  int64
	reset     bool
	iter, val []float64
}

func newSweepScreen(t Theme, root string) *sweepScreen {
	in := textinput.New()
	in.Prompt = "> "
	in.CharLimit = 1024
	in.PlaceholderStyle = t.Dim
	in.Placeholder = filepath.Join(root, "sweep-NAME-YYYYMMDD-HHMMSS")
	in.Cursor.SetMode(cursor.CursorStatic)
	in.Focus()
	return &sweepScreen{theme: t, keys: newSweepKeys(), root: root, input: in, dirty: true}
}

// choose shows the directory prompt and looks for sweeps under the root.
func (s *sweepScreen) choose() tea.Cmd {
	s.gen++
	s.stage, s.chooseErr, s.found, s.pick, s.dirty = sweepChoose, "", nil, listCursor{}, true
	s.input.SetValue("")
	gen, root := s.gen, s.root
	return func() tea.Msg { return sweepFoundMsg{gen, findSweeps(root)} }
}

// findSweeps lists the directories under root that hold a sweep, newest
// first.
func findSweeps(root string) []foundSweep {
	ents, _ := os.ReadDir(root)
	var out []foundSweep
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if fi, err := os.Stat(filepath.Join(dir, sweep.FileManifest)); err == nil && e.IsDir() {
			out = append(out, foundSweep{dir, fi.ModTime()})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].mod.After(out[j].mod) })
	return out
}

// watch starts watching dir; the first read's error sends the screen
// back to the prompt.
func (s *sweepScreen) watch(dir string) tea.Cmd {
	if dir == "" {
		s.chooseErr = "name a sweep directory (mkbench sweep run FILE --out DIR makes one)"
		s.dirty = true
		return nil
	}
	s.gen++
	s.stage, s.dir, s.st, s.readErr, s.queue, s.queueErr = sweepWatch, dir, nil, "", nil, ""
	s.queueAt, s.queueBusy = time.Time{}, false
	s.curves, s.marks, s.cursor = map[int]*unitCurve{}, marks[int]{}, listCursor{}
	s.input.SetValue(dir)
	s.dirty = true
	return s.read()
}

// close stops the polling: the messages in flight are dropped.
func (s *sweepScreen) close() { s.gen++ }

// capturing reports whether keys go to the directory prompt.
func (s *sweepScreen) capturing() bool { return s.stage == sweepChoose }

// shown are the units whose curves are drawn: the marked ones, else the
// one under the cursor.
func (s *sweepScreen) shown() []int {
	if s.st == nil || len(s.st.Units) == 0 {
		return nil
	}
	if len(s.marks) == 0 {
		return []int{s.st.Units[s.cursor.At()].Index}
	}
	var out []int
	for _, u := range s.st.Units {
		if _, ok := s.marks[u.Index]; ok {
			out = append(out, u.Index)
		}
	}
	return out
}

// read is the command that reads the status and the shown curves.
func (s *sweepScreen) read() tea.Cmd {
	gen, dir := s.gen, s.dir
	var reqs []curveReq
	if s.st != nil {
		for _, i := range s.shown() {
			var off int64
			if c := s.curves[i]; c != nil {
				off = c.off
			}
			reqs = append(reqs, curveReq{i, filepath.Join(dir, s.st.Units[i].Dir, engine.FileMetrics), off})
		}
	}
	return func() tea.Msg {
		st, err := sweep.ReadStatus(dir)
		msg := sweepReadMsg{gen: gen, st: st, err: err}
		for _, r := range reqs {
			msg.curves = append(msg.curves, readCurve(r))
		}
		return msg
	}
}

// readCurve reads the complete rows of a metrics.jsonl from r.off on.
func readCurve(r curveReq) curveRead {
	out := curveRead{unit: r.unit, from: r.off, to: r.off}
	f, err := os.Open(r.path)
	if err != nil {
		out.reset, out.to = r.off > 0, 0
		return out
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return out
	}
	off := r.off
	if fi.Size() < off {
		out.reset, off, out.to = true, 0, 0
	}
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	end := bytes.LastIndexByte(buf[:n], '\n')
	if end < 0 {
		return out // no complete row yet: the writer is mid-line
	}
	for _, line := range bytes.Split(buf[:end], []byte("\n")) {
		var row engine.MetricsRow
		if json.Unmarshal(line, &row) == nil {
			out.iter, out.val = append(out.iter, float64(row.Iter)), append(out.val, row.Loss)
		}
	}
	out.to = off + int64(end+1)
	return out
}

// queueCmd asks squeue for the Slurm states of st's jobs.
func queueCmd(gen int, st sweep.Status) tea.Cmd {
	st.Units = slices.Clone(st.Units) // AddQueue writes into them; the screen holds the original
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sweep.AddQueue(ctx, &st)
		q := map[int][2]string{}
		for _, u := range st.Units {
			if u.Slurm != "" {
				q[u.Index] = [2]string{u.Slurm, u.Node}
			}
		}
		return sweepQueueMsg{gen, q, st.SlurmError}
	}
}

func (s *sweepScreen) Init() tea.Cmd {
	if s.stage == sweepWatch && s.st == nil {
		return s.read()
	}
	return nil
}

func (s *sweepScreen) SetSize(w, h int) {
	s.w, s.h, s.dirty = w, h, true
	s.input.Width = max(w-6, 10)
}

// Update takes in the reads (re-arming the next), the squeue answers and
// the keys.
func (s *sweepScreen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		s.SetSize(msg.Width, msg.Height)
	case tea.KeyMsg:
		return s, s.key(msg)
	case sweepFoundMsg:
		if msg.gen == s.gen {
			s.found = msg.found
			if len(s.found) > 0 && s.input.Value() == "" {
				s.input.SetValue(s.found[0].dir)
				s.input.CursorEnd()
			}
			s.dirty = true
		}
	case sweepTickMsg:
		if msg.gen == s.gen {
			return s, s.read()
		}
	case sweepReadMsg:
		if msg.gen != s.gen {
			return s, nil
		}
		return s, s.apply(msg)
	case sweepQueueMsg:
		if msg.gen == s.gen {
			s.queueBusy, s.queue, s.queueErr, s.dirty = false, msg.queue, msg.err, true
			s.addQueue()
		}
	}
	return s, nil
}

// apply takes in a read and arms the next (and squeue, when due).
func (s *sweepScreen) apply(msg sweepReadMsg) tea.Cmd {
	s.dirty = true
	if msg.err != nil && s.st == nil {
		// Not a sweep (or unreadable) from the start: back to the prompt.
		s.stage, s.chooseErr = sweepChoose, firstLine(msg.err.Error())
		s.gen++
		return nil
	}
	tick := func(gen int) tea.Cmd {
		return tea.Tick(sweepPoll, func(time.Time) tea.Msg { return sweepTickMsg{gen} })
	}(s.gen)
	if msg.err != nil {
		s.readErr = firstLine(msg.err.Error())
		return tick
	}
	s.st, s.readErr = &msg.st, ""
	s.addQueue()
	s.cursor = s.cursor.Len(len(s.st.Units))
	for _, r := range msg.curves {
		s.applyCurve(r)
	}
	if len(s.st.Jobs) > 0 && !s.queueBusy && time.Since(s.queueAt) >= sweepQueueEvery {
		s.queueBusy, s.queueAt = true, time.Now()
		return tea.Batch(tick, queueCmd(s.gen, *s.st))
	}
	return tick
}

// applyCurve adds the rows of a read to the unit's curve.
func (s *sweepScreen) applyCurve(r curveRead) {
	c := s.curves[r.unit]
	if c == nil {
		c = &unitCurve{}
		s.curves[r.unit] = c
	}
	if r.from != c.off {
		return // cannot happen with one read in flight; never splice
	}
	if r.reset {
		*c = unitCurve{}
	}
	for i, it := range r.iter {
		// Rows that go back in iterations replace the ones they repeat.
		if n := len(c.iter); n > 0 && it <= c.iter[n-1] {
			k := sort.SearchFloat64s(c.iter, it)
			c.iter, c.loss = c.iter[:k], c.loss[:k]
		}
		c.iter, c.loss = append(c.iter, it), append(c.loss, r.val[i])
	}
	c.off = r.to
}

// addQueue puts the last squeue answer on the units: a read of the files
// knows nothing of Slurm.
func (s *sweepScreen) addQueue() {
	if s.st == nil {
		return
	}
	for i := range s.st.Units {
		q := s.queue[s.st.Units[i].Index]
		s.st.Units[i].Slurm, s.st.Units[i].Node = q[0], q[1]
	}
}

// View draws the screen when something changed since the last frame.
func (s *sweepScreen) View() string {
	if s.dirty {
		s.frame, s.dirty = s.render(), false
	}
	return s.frame
}

func (s *sweepScreen) ShortHelp() []key.Binding {
	return s.keys.footer(s.stage == sweepChoose, s.direct)
}

func (s *sweepScreen) FullHelp() [][]key.Binding { return fullHelp(s.HelpGroups()) }

func (s *sweepScreen) HelpGroups() []helpGroup {
	return s.keys.groups(s.stage == sweepChoose, s.direct)
}

var (
	_ component  = (*sweepScreen)(nil)
	_ titledHelp = (*sweepScreen)(nil)
)
