package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
)

// Past these, a run's or an evaluation's first progress line is followed
// by a note of how long it will take and what makes it shorter: a default
// that takes 17 hours should say so while it can still be stopped cheaply.
const (
	longRun  = time.Hour
	longEval = 2 * time.Minute
)

// longNoteAfter is how long a run trains before its speed is trusted for
// the note: the first iterations are slow (buffers, caches), and a note
// from the first line said 180 h of a run that takes 60.
var longNoteAfter = 10 * time.Second

// evalProgressEvery is how often evalProgress prints.
var evalProgressEvery = 5 * time.Second

// evalProgress prints an evaluation's progress line, with its ETA, every
// evalProgressEvery, the first after one interval: short evaluations
// print none. shorter, when not "", is the flag that makes it shorter
// (the evaluation's size was the default): the first line after
// longNoteAfter of one that will take longer than longEval is followed by
// a note naming it.
func evalProgress(w io.Writer, shorter string) func(done, total int) {
	start := time.Now()
	last, noted := start, false
	return func(done, total int) {
		if done == total || time.Since(last) < evalProgressEvery {
			return
		}
		last = time.Now()
		eta := time.Duration(-1)
		if done > 0 {
			eta = time.Duration(float64(last.Sub(start)) / float64(done) * float64(total-done))
		}
		fmt.Fprintf(w, "evaluating: %d/%d tasks  eta %s\n", done, total, engine.FormatETA(eta))
		if noted || last.Sub(start) < longNoteAfter {
			return
		}
		noted = true
		if shorter != "" && eta > longEval {
			fmt.Fprintf(w, "note: this evaluation will take about %s more; %s makes it shorter\n", engine.FormatETA(eta), shorter)
		}
	}
}

// evalShorter is what makes an evaluation of tasks tasks shorter, for
// evalProgress: a tenth of them (the confidence interval about three times
// as wide).
func evalShorter(tasks int) string {
	if tasks < 20 {
		return ""
	}
	return fmt.Sprintf("--eval-tasks %d (its 95%% interval about 3× as wide)", tasks/10)
}

// trainETA is the time left of a run: at its speed, to its last
// iteration, or to the end of its training-time budget (--minutes) when
// that comes first.
func trainETA(s engine.Snapshot, budget time.Duration) time.Duration {
	eta := engine.Remaining(s.Iter, s.Iters, s.ItersPerSec)
	if budget > 0 {
		left := max(budget-s.Wall, 0)
		if eta < 0 || left < eta {
			eta = left
		}
	}
	return eta
}

// progressPrinter prints a progress line every two seconds, its ETA
// bounded by budget. When the first line after longNoteAfter finds the
// run will train for longer than longRun, a note follows with how long
// and what makes it shorter (shorterRun's advice for c).
func progressPrinter(w io.Writer, budget time.Duration, c engine.Config) engine.Observer {
	var last time.Time
	start, noted := time.Now(), false
	return engine.ObserverFunc(func(s engine.Snapshot) error {
		if s.Done || time.Since(last) < 2*time.Second {
			return nil
		}
		last = time.Now()
		eta := trainETA(s, budget)
		fmt.Fprintf(w, "iter %6d/%d  loss %.4f  data %.4f  kl %.3f  λ %.4f  %s  eta %s\n",
			s.Iter, s.Iters, s.Loss, s.Data, s.KL, s.Lambda, engine.FormatRate(s.ItersPerSec), engine.FormatETA(eta))
		if noted || time.Since(start) < longNoteAfter {
			return nil
		}
		noted = true
		if eta > longRun {
			fmt.Fprintf(w, "note: this run will train for about %s more at this speed; shorter: %s\n", engine.FormatETA(eta), shorterRun(c, budget))
		}
		return nil
	})
}

// shorterRun names what makes a run of c shorter: a smaller image size
// and the four-block backbone for an image model, a time budget, fewer
// iterations.
func shorterRun(c engine.Config, budget time.Duration) string {
	var ways []string
	if _, h, _, ok := c.ImageInput(); ok && h > 32 {
		ways = append(ways, fmt.Sprintf("--image-size 32 (now %d)", h))
	}
	switch {
	case c.ResNet != nil:
		ways = append(ways, "--set backbone=conv4 (now resnet18)")
	case c.Conv != nil && c.Conv.Blocks > 4:
		ways = append(ways, fmt.Sprintf("--set backbone=conv4 (now conv%d)", c.Conv.Blocks))
	}
	if budget == 0 {
		ways = append(ways, "--minutes M (train M minutes, then evaluate)")
	}
	ways = append(ways, "fewer --iters")
	return strings.Join(ways, ", ")
}
