package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// countingStep is a step that only counts.
func countingStep(iter int) (StepStats, error) { return StepStats{Loss: float64(iter)}, nil }

// Hooks run in the order attached, EveryN at its multiples and the last
// step, and the end hooks see a finished loop.
func TestLoopHooksOrder(t *testing.T) {
	var calls []string
	l := NewLoop(2, 7, 0, countingStep)
	l.OnStart(func(l *Loop) error { calls = append(calls, fmt.Sprint("start@", l.Iter)); return nil })
	l.BeforeStep(func(l *Loop) error { calls = append(calls, fmt.Sprint("before@", l.Iter)); return nil })
	l.OnStep(func(l *Loop, st StepStats) error {
		calls = append(calls, fmt.Sprint("step@", l.Iter, "/", st.Loss))
		return nil
	})
	l.EveryN(3, true, func(l *Loop, _ StepStats) error { calls = append(calls, fmt.Sprint("every3@", l.Iter)); return nil })
	l.EveryN(2, false, func(l *Loop, _ StepStats) error { calls = append(calls, fmt.Sprint("every2@", l.Iter)); return nil })
	l.OnEnd(func(l *Loop, e Ending) error {
		calls = append(calls, fmt.Sprint("end@", l.Iter, " ", e.Finished, e.Interrupted, e.Err))
		return nil
	})
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start@2",
		"before@2", "step@3/2", "every3@3",
		"before@3", "step@4/3", "every2@4",
		"before@4", "step@5/4",
		"before@5", "step@6/5", "every3@6", "every2@6",
		"before@6", "step@7/6", "every3@7",
		"end@7 true false <nil>"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls\n%q\nwant\n%q", calls, want)
	}
}

// An interrupting hook ends the loop Interrupted with its cause unwrapped;
// a plain error fails it; a failing step fails it before its hooks run.
func TestLoopEndings(t *testing.T) {
	stop := errors.New("stop")
	cases := []struct {
		name   string
		hook   StepHook
		step   func(int) (StepStats, error)
		iter   int
		ending Ending
	}{
		{"interrupt", func(l *Loop, _ StepStats) error {
			if l.Iter == 3 {
				return Interrupt(stop)
			}
			return nil
		}, countingStep, 3, Ending{Interrupted: true, Err: stop}},
		{"fail", func(l *Loop, _ StepStats) error {
			if l.Iter == 2 {
				return stop
			}
			return nil
		}, countingStep, 2, Ending{Err: stop}},
		{"step", nil, func(iter int) (StepStats, error) {
			if iter == 4 {
				return StepStats{}, stop
			}
			return StepStats{}, nil
		}, 4, Ending{Err: stop}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLoop(0, 10, 0, tc.step)
			if tc.hook != nil {
				l.OnStep(tc.hook)
			}
			var got Ending
			l.OnEnd(func(l *Loop, e Ending) error { got = e; return nil })
			err := l.Run(context.Background())
			if err != stop || got != tc.ending || l.Iter != tc.iter {
				t.Fatalf("err %v, ending %+v at %d; want %+v at %d", err, got, l.Iter, tc.ending, tc.iter)
			}
		})
	}
	if Interrupt(nil) != nil {
		t.Fatal("Interrupt(nil) is not nil")
	}
}

// A cancelled context interrupts the loop before the next step; an end
// hook's error is Run's and stops the later end hooks.
func TestLoopCancelAndEndError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := NewLoop(0, 10, 0, countingStep)
	l.OnStep(func(l *Loop, _ StepStats) error {
		if l.Iter == 2 {
			cancel()
		}
		return nil
	})
	endErr := errors.New("end")
	var later bool
	l.OnEnd(func(_ *Loop, e Ending) error {
		if !e.Interrupted || !errors.Is(e.Err, context.Canceled) {
			t.Errorf("ending %+v", e)
		}
		return endErr
	})
	l.OnEnd(func(*Loop, Ending) error { later = true; return nil })
	if err := l.Run(ctx); err != endErr || l.Iter != 2 || later {
		t.Fatalf("err %v at %d (later end hook called: %v)", err, l.Iter, later)
	}
}

// A hook may make the step just done the last by lowering End; EveryN's
// last call follows it.
func TestLoopEndLowered(t *testing.T) {
	l := NewLoop(0, 100, 0, countingStep)
	l.OnStep(func(l *Loop, _ StepStats) error {
		if l.Iter == 5 {
			l.End = l.Iter
		}
		return nil
	})
	var rows []int
	l.EveryN(4, true, func(l *Loop, _ StepStats) error { rows = append(rows, l.Iter); return nil })
	if err := l.Run(context.Background()); err != nil || l.Iter != 5 || !slices.Equal(rows, []int{4, 5}) {
		t.Fatalf("err %v, iter %d, rows %v", err, l.Iter, rows)
	}
}

// Training time: excluded time does not count, Every follows it, and the
// clock stops with the last step.
func TestLoopClock(t *testing.T) {
	const step = 2 * time.Millisecond
	l := NewLoop(0, 12, 100, func(int) (StepStats, error) {
		time.Sleep(step)
		return StepStats{}, nil
	})
	var excluded time.Duration
	l.BeforeStep(func(l *Loop) error {
		t0 := time.Now()
		time.Sleep(step) // a pause
		d := time.Since(t0)
		excluded += d
		l.Exclude(d)
		return nil
	})
	var every []time.Duration
	l.Every(5*step, func(l *Loop, _ StepStats) error { every = append(every, l.Elapsed()); return nil })
	t0 := time.Now()
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	el := l.Elapsed()
	if el < 12*step || el > wall-excluded {
		t.Fatalf("elapsed %v for 12 steps of %v in %v with %v excluded", el, step, wall, excluded)
	}
	if len(every) == 0 {
		t.Fatal("Every never ran")
	}
	for i, at := range every {
		prev := time.Duration(0)
		if i > 0 {
			prev = every[i-1]
		}
		if at-prev < 5*step {
			t.Fatalf("Every(%v) ran at %v of training time", 5*step, every)
		}
	}
	time.Sleep(step)
	if l.Elapsed() != el || l.TrainSeconds() != 100+el.Seconds() {
		t.Fatal("the clock runs after the loop ended")
	}
}

// The loop's own per-step work allocates nothing: running 1000 steps with
// hooks of every kind allocates as much as running 10.
func TestLoopStepDoesNotAllocate(t *testing.T) {
	allocs := func(n int) float64 {
		return testing.AllocsPerRun(5, func() {
			l := NewLoop(0, n, 0, countingStep)
			var sum float64
			l.BeforeStep(func(*Loop) error { return nil })
			l.OnStep(func(_ *Loop, st StepStats) error { sum += st.Loss; return nil })
			l.EveryN(7, true, func(*Loop, StepStats) error { return nil })
			l.Every(time.Hour, func(*Loop, StepStats) error { return nil })
			if err := l.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(10), allocs(1000); a != b {
		t.Fatalf("10 steps allocate %v, 1000 steps %v", a, b)
	}
}

// An absurd budget (--iters 1e12 at a few iterations a second) gives a
// long ETA, never a negative one from an overflowed Duration.
func TestRemainingNeverOverflows(t *testing.T) {
	if d := Remaining(0, 1e12, 0.5); d <= 0 || FormatETA(d) == "–" {
		t.Fatalf("Remaining(0, 1e12, 0.5) = %v", d)
	}
	if d := Remaining(10, 110, 2); d != 50*time.Second {
		t.Fatalf("Remaining(10, 110, 2) = %v", d)
	}
	if Remaining(5, 5, 2) >= 0 || Remaining(0, 5, 0) >= 0 {
		t.Fatal("nothing left or no rate must be unknown (negative)")
	}
}

// Progress lines tell an Omniglot run's 0.7 iterations a second from its
// 1.4 (both printed "1 it/s" when rounded to a whole number).
func TestFormatRate(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0.7123, "0.712 it/s"}, {1.4, "1.40 it/s"}, {0.04, "0.040 it/s"}, {9.999, "10.0 it/s"},
		{30.46, "30.5 it/s"}, {412.3, "412 it/s"}, {0, "– it/s"}, {math.NaN(), "– it/s"}, {math.Inf(1), "– it/s"}, {-1, "– it/s"},
	} {
		if got := FormatRate(c.in); got != c.want {
			t.Errorf("FormatRate(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A stop from one step hook lets the step's later hooks run (they keep its
// records: a run stopped by its observer at a snapshot iteration once lost
// that iteration's ω histograms); a failure ends the step at once.
func TestLoopStopFinishesTheStep(t *testing.T) {
	var ran []string
	hook := func(name string, err error) StepHook {
		return func(l *Loop, _ StepStats) error {
			ran = append(ran, fmt.Sprintf("%s@%d", name, l.Iter))
			if l.Iter == 3 {
				return err
			}
			return nil
		}
	}
	stop := errors.New("stop")
	l := NewLoop(0, 10, 0, countingStep)
	l.OnStep(hook("obs", Interrupt(stop)))
	l.OnStep(hook("events", nil))
	if err := l.Run(context.Background()); !errors.Is(err, stop) {
		t.Fatalf("Run: %v, want the stop", err)
	}
	if got := strings.Join(ran, " "); got != "obs@1 events@1 obs@2 events@2 obs@3 events@3" {
		t.Errorf("hooks ran %q: the stopped step's later hook must run, and no step after it", got)
	}

	ran, fail := nil, errors.New("disk full")
	l = NewLoop(0, 10, 0, countingStep)
	l.OnStep(hook("obs", Interrupt(stop)))
	l.OnStep(hook("log", fail))
	l.OnStep(hook("events", nil))
	if err := l.Run(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("Run: %v, want the failure after the stop", err)
	}
	if got := strings.Join(ran, " "); got != "obs@1 log@1 events@1 obs@2 log@2 events@2 obs@3 log@3" {
		t.Errorf("hooks ran %q: a failure ends the step at once", got)
	}
}
