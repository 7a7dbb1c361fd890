// Package session runs the workbench's trainings. Each variant trains in
// its own goroutine through engine.Run; its observer only copies snapshots
// into a mailbox and wakes the consumer, so training never waits for the
// terminal. The UI takes everything pending in one batch (Next) at a
// bounded rate. The package knows nothing of the terminal, so it is tested
// on its own, race detector included.
package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// DefaultInterval is the shortest time between two batches from Next:
// 15 per second, inside the workbench's 20 redraws a second.
const DefaultInterval = time.Second / 15

// Session holds the workbench's runs. Its exported fields are settings,
// read when a run starts (the workbench changes Preset when the user
// goes on to another preset once the runs of the first have ended).
type Session struct {
	Preset presets.Preset
	Root   string // runs root; "" is presets.RunsRoot()
	// Overrides replace the preset's settings in every run (iteration
	// budget, seed, model sizes), as presets.Spec applies them.
	Overrides presets.Overrides
	// Data is the data directory of the runs' task sources, as
	// presets.NewSources takes it ("" is the family's default); a folder
	// preset's runs need it. NewSources, when set, is used instead.
	Data string
	// NewSources builds a run's task sources (training, and validation
	// and test where the family has them); nil is presets.NewSources with
	// Data.
	NewSources func(family string, cfg engine.Config) (presets.Sources, error)
	Interval   time.Duration // between batches; 0 is DefaultInterval
	// Budget, when positive, is every run's training-time budget
	// (engine.RunOptions.Budget, mkbench tui --minutes).
	Budget time.Duration

	notify    chan struct{} // one slot: "something is pending"
	closed    chan struct{}
	closeOnce sync.Once
	lastBatch time.Time        // touched by Next's caller only
	now       func() time.Time // names run directories; nil is time.Now (tests fix it)

	mu     sync.Mutex
	runs   []*Run
	nextID int
}

// New returns a session for preset p with runs under root.
func New(p presets.Preset, root string) *Session {
	return &Session{Preset: p, Root: root, notify: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Point is one curve sample: the scalars of one snapshot.
type Point struct {
	Iter                 int
	Loss, Data, KL, ELBO float64
}

// ValPoint is one validation during training.
type ValPoint struct {
	Iter int
	Eval engine.EvalResult
}

// Run is one training run: a variant of the session's preset in its own
// run directory. Its exported fields do not change after Start.
type Run struct {
	ID      int
	Variant string
	Dir     string
	Config  engine.Config
	Resumed bool          // continues an earlier run's directory
	Budget  time.Duration // training-time budget; 0: none (Session.Budget)

	sess   *Session
	ctl    chan engine.Command
	cancel context.CancelFunc
	done   chan struct{}
	box    mailbox
}

// Start begins training variant in a new run directory, drawing display
// task displayTask. It returns at once; the run reports through Next.
func (s *Session) Start(variant string, displayTask int) (*Run, error) {
	_, cfg, err := presets.CheckedConfig(presets.Spec{Preset: s.Preset.Name, Variant: variant, Overrides: s.Overrides})
	if err != nil {
		return nil, err
	}
	root := s.Root
	if root == "" {
		root = presets.RunsRoot()
	}
	now := s.now
	if now == nil {
		now = time.Now
	}
	// NewRunDir creates the directory: a second workbench started in the
	// same second gets the next name instead of this one.
	dir, err := presets.NewRunDir(root, s.Preset.Name, cfg.Variant(), cfg.Seed, now())
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return s.launch(&Run{Variant: cfg.Variant(), Dir: dir, Config: cfg, Budget: s.Budget}, displayTask)
}

// Resume continues a run that was stopped before its end, in its own
// directory and from its checkpoint, as `mkbench run --resume` would.
//
// prev may be a Run read from its directory rather than started here (the
// runs screen's): with no process of this session behind it, nothing here
// can still be running it, and the run directory's lock keeps out
// another process that is.
func (s *Session) Resume(prev *Run, displayTask int) (*Run, error) {
	if prev.done != nil {
		select {
		case <-prev.done:
		default:
			return nil, fmt.Errorf("session: %s is still running", prev.Variant)
		}
	}
	return s.launch(&Run{Variant: prev.Variant, Dir: prev.Dir, Config: prev.Config, Resumed: true, Budget: s.Budget}, displayTask)
}

func (s *Session) launch(r *Run, displayTask int) (*Run, error) {
	select {
	case <-s.closed:
		return nil, errors.New("session: closed")
	default:
	}
	newSources := s.NewSources
	if newSources == nil {
		data := s.Data // read here: the worker must not read the session's fields
		newSources = func(family string, cfg engine.Config) (presets.Sources, error) {
			return presets.NewSources(family, cfg, data)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.sess, r.cancel = s, cancel
	r.ctl = make(chan engine.Command, 16)
	r.done = make(chan struct{})
	s.mu.Lock()
	s.nextID++
	r.ID = s.nextID
	s.runs = append(s.runs, r)
	s.mu.Unlock()

	// The worker reads nothing of the session's fields: the workbench
	// sets Preset anew when the user goes on to another preset.
	source := s.Preset.Source
	opts := engine.RunOptions{Preset: s.Preset.Name, Dir: r.Dir, Resume: r.Resumed, DisplayTask: displayTask, Control: r.ctl, Budget: r.Budget,
		EvalProgress: func(done, total int) {
			r.box.evalProgress(done, total, time.Now())
			s.wake()
		}}
	cfg := r.Config
	if r.Resumed {
		cfg.Iters = 0 // the checkpoint's budget
	}
	obs := engine.ObserverFunc(func(snap engine.Snapshot) error {
		r.box.observe(snap)
		s.wake()
		return nil
	})
	go func() {
		// Sources are built here, not by the caller: loading a data set
		// takes seconds, and the caller is the UI's update loop.
		res, err := safeRun(func() (engine.Result, error) {
			srcs, err := newSources(source, r.Config)
			if err != nil {
				return engine.Result{}, err
			}
			opts.Val, opts.Test = srcs.Val, srcs.Test
			return engine.Run(ctx, cfg, srcs.Train, opts, obs)
		})
		cancel()
		// Done before the news: whoever reads Ended may Resume at once.
		close(r.done)
		r.box.end(res, err)
		s.wake()
	}()
	return r, nil
}

// safeRun runs a worker's work with one more recover than engine.Run
// has (loading the sources is outside it): a worker must never take the
// terminal down with it.
func safeRun(work func() (engine.Result, error)) (res engine.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("session: training worker panicked: %v", p)
		}
	}()
	return work()
}

func (s *Session) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Send queues a command for the run's next iteration boundary. Its reply
// arrives in a later Update. Send never blocks; it reports false when the
// run has ended or its queue is full.
func (r *Run) Send(cmd engine.Command) bool {
	select {
	case <-r.done:
		return false
	default:
	}
	cmd.Reply = func(rep engine.Reply) {
		r.box.reply(rep)
		r.sess.wake()
	}
	select {
	case r.ctl <- cmd:
		return true
	default:
		return false
	}
}

// Stop asks the run to stop: it checkpoints and ends (Update.Ended). A run
// in its final evaluation finishes that first.
func (r *Run) Stop() { r.cancel() }

// Done is closed when the run's goroutine has ended.
func (r *Run) Done() <-chan struct{} { return r.done }

// Alive reports whether the run's goroutine is still going.
func (r *Run) Alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Outcome is how a run ended.
type Outcome struct {
	Result engine.Result
	Err    error
}

// Outcome returns how the run ended, and false while it has not.
func (r *Run) Outcome() (Outcome, bool) {
	r.box.mu.Lock()
	defer r.box.mu.Unlock()
	return Outcome{r.box.result, r.box.err}, r.box.ended
}

// Runs returns every run started in the session, in start order.
func (s *Session) Runs() []*Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Run(nil), s.runs...)
}

// StopAll asks every run to stop.
func (s *Session) StopAll() {
	for _, r := range s.Runs() {
		r.Stop()
	}
}

// Wait waits until every run has ended or the timeout passes, and reports
// whether they all ended.
func (s *Session) Wait(timeout time.Duration) bool {
	deadline := time.After(timeout)
	for _, r := range s.Runs() {
		select {
		case <-r.done:
		case <-deadline:
			return false
		}
		// done is closed just before the outcome is recorded (so that a
		// reader of Ended may Resume at once); ended means recorded too.
		for {
			if _, ended := r.Outcome(); ended {
				break
			}
			select {
			case <-deadline:
				return false
			case <-time.After(time.Millisecond):
			}
		}
	}
	return true
}

// Close stops every run and makes Next return false once nothing is
// pending. It does not wait; see Wait.
func (s *Session) Close() {
	s.StopAll()
	s.closeOnce.Do(func() { close(s.closed) })
}

// EvalProgress is how far a run's evaluation (a validation, an evaluate
// command or the final one) has got.
type EvalProgress struct {
	Done, Total int     // tasks
	Rate        float64 // tasks a second since the first report; 0: not known yet
}

// Remaining is the time the rest of the evaluation takes at Rate;
// negative when not known.
func (p EvalProgress) Remaining() time.Duration {
	return engine.Remaining(p.Done, p.Total, p.Rate)
}

// Update is what one run produced since the previous batch.
type Update struct {
	Run *Run
	// EvalProgress is the newest progress of an evaluation under way, if
	// one reported since the last batch.
	EvalProgress *EvalProgress
	Points       []Point          // one per snapshot, in order
	Last         *engine.Snapshot // the newest snapshot, Display and Eval removed
	Display      *engine.Display  // the newest display snapshot, if any came
	Eval         *engine.EvalResult
	Final        bool       // Eval is the run's final evaluation
	Vals         []ValPoint // validations since the last batch (Config.ValEvery)
	Replies      []engine.Reply
	Ended        bool // the run is over; Result and Err are its outcome
	Result       engine.Result
	Err          error
}

// Drain returns, without waiting, what every run produced since the last
// batch; runs with nothing new are left out.
func (s *Session) Drain() []Update {
	var ups []Update
	for _, r := range s.Runs() {
		if u, ok := r.box.take(); ok {
			u.Run = r
			ups = append(ups, u)
		}
	}
	return ups
}

// Next waits until some run has something new, then returns everything
// pending as one batch, never sooner than Interval after the previous
// batch: the UI redraws once per batch, whatever the number of runs. It
// returns false when the session is closed and nothing is pending. One
// goroutine at a time may call it.
func (s *Session) Next() ([]Update, bool) {
	for {
		select {
		case <-s.notify:
		case <-s.closed:
			ups := s.Drain()
			return ups, len(ups) > 0
		}
		iv := s.Interval
		if iv <= 0 {
			iv = DefaultInterval
		}
		if wait := time.Until(s.lastBatch.Add(iv)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-s.closed:
			}
		}
		s.lastBatch = time.Now()
		if ups := s.Drain(); len(ups) > 0 {
			return ups, true
		}
	}
}

// maxPending bounds a mailbox's curve points should nobody drain it; the
// oldest half goes first.
const maxPending = 1 << 16

// mailbox is where a run's goroutine leaves what the UI has not taken yet.
// Every method holds the lock only to copy, so training never waits long.
type mailbox struct {
	mu      sync.Mutex
	fresh   bool
	points  []Point
	last    *engine.Snapshot
	display *engine.Display
	eval    *engine.EvalResult
	final   bool
	vals    []ValPoint
	replies []engine.Reply
	ended   bool
	result  engine.Result
	err     error
	// The evaluation under way: its newest progress, and its first
	// report, from which its rate is measured.
	evalProg            *EvalProgress
	evalFirst           int
	evalFirstAt         time.Time
	evalDone, evalTotal int
}

// evalProgress records that done of total tasks of an evaluation are
// done at now. A report that goes back (a new evaluation) starts the
// rate afresh.
func (b *mailbox) evalProgress(done, total int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if total != b.evalTotal || done < b.evalDone || b.evalFirstAt.IsZero() {
		b.evalFirst, b.evalFirstAt = done, now
	}
	b.evalDone, b.evalTotal = done, total
	p := &EvalProgress{Done: done, Total: total}
	if el := now.Sub(b.evalFirstAt).Seconds(); el > 0 && done > b.evalFirst {
		p.Rate = float64(done-b.evalFirst) / el
	}
	b.fresh, b.evalProg = true, p
}

func (b *mailbox) observe(s engine.Snapshot) {
	disp, ev, val := s.Display, s.Eval, s.Val
	s.Display, s.Eval, s.Val = nil, nil, nil
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fresh = true
	if len(b.points) >= maxPending {
		b.points = append(b.points[:0], b.points[maxPending/2:]...)
	}
	b.points = append(b.points, Point{Iter: s.Iter, Loss: s.Loss, Data: s.Data, KL: s.KL, ELBO: s.ELBO})
	b.last = &s
	if disp != nil {
		b.display = disp
	}
	if ev != nil {
		e := *ev
		e.PerTask = nil // the UI shows the summary only; keep the copy small
		b.eval, b.final = &e, s.Done
	}
	if val != nil {
		v := *val
		v.PerTask = nil
		b.vals = append(b.vals, ValPoint{Iter: s.Iter, Eval: v})
	}
}

func (b *mailbox) reply(r engine.Reply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fresh = true
	b.replies = append(b.replies, r)
}

func (b *mailbox) end(res engine.Result, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fresh = true
	b.ended, b.result, b.err = true, res, err
}

func (b *mailbox) take() (Update, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fresh {
		return Update{}, false
	}
	u := Update{Points: b.points, Last: b.last, Display: b.display, Eval: b.eval, Final: b.final, Vals: b.vals,
		Replies: b.replies, Ended: b.ended, Result: b.result, Err: b.err, EvalProgress: b.evalProg}
	b.fresh = false
	b.points, b.last, b.display, b.eval, b.final, b.vals, b.replies = nil, nil, nil, nil, false, nil, nil
	b.evalProg = nil
	// ended stays set: a run ends once, and the flag only travels once
	// because fresh is clear until something new (nothing) arrives.
	return u, true
}
