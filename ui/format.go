package ui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// finite reports whether v can be drawn: NaN or ±Inf scaled to a canvas
// coordinate becomes an absurd integer, and the line between two such
// points is a huge allocation.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num formats a metric in at most about 8 columns.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "+∞"
	case math.IsInf(v, -1):
		return "−∞"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3:
		return fmt.Sprintf("%.2e", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// compact formats an axis label in as few columns as it can.
func compact(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a == 0:
		return "0"
	case a < 0.01:
		return fmt.Sprintf("%.0e", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// commaList writes integers as the command line takes them: 1,5,10.
func commaList[T int | uint64](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// firstLine is the first line of an error's text, as a screen shows it.
// Errors quote names read from files and folders, so the line passes
// through runfile.Printable: such a name cannot write escape sequences to
// the terminal.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return runfile.Printable(s)
}

// note is a screen's latest message; an error is drawn in the error
// style.
type note struct {
	text string
	err  bool
}

// set shows s. Notes quote names read from files (a run's directory, a
// model's name), so they pass through runfile.Printable: such a name
// cannot write escape sequences to the terminal.
func (n *note) set(s string) { *n = note{text: runfile.Printable(s)} }

// fail shows the first line of err.
func (n *note) fail(err error) { *n = note{text: firstLine(err.Error()), err: true} }

func (n note) render(t Theme) string {
	if n.err {
		return t.Err.Render(n.text)
	}
	return n.text
}

// etaCap is the longest remaining time shown as such; engine.Remaining
// caps there (100 years) rather than overflow, and sums of ETAs are
// capped there too (addETA, secondsETA).
const etaCap = 100 * 365 * 24 * time.Hour

// eta formats a remaining time as the status lines show it: "–" when
// unknown (negative), to the second below two days, then in days or
// years, and "≥100y" from etaCap on (a budget like --iters 1e12).
func eta(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d < 48*time.Hour:
		return engine.FormatETA(d)
	case d >= etaCap:
		return "≥100y"
	case d < 365*day:
		return fmt.Sprintf("%dd%dh", d/day, d%day/time.Hour)
	}
	return fmt.Sprintf("%.1fy", d.Hours()/24/365)
}

// secondsETA is s seconds as a Duration, capped at etaCap: a float
// beyond about 292 years would overflow the conversion into a negative
// time.
func secondsETA(s float64) time.Duration {
	if !(s < etaCap.Seconds()) {
		return etaCap
	}
	return time.Duration(max(s, 0) * float64(time.Second))
}

// addETA adds two remaining times, capped at etaCap.
func addETA(a, b time.Duration) time.Duration { return secondsETA(a.Seconds() + b.Seconds()) }

// runETA is the time a run has left: its iterations' at its pace
// (engine.Remaining), or what is left of its training-time budget when
// that ends it first (byBudget); negative when not known. wall is the
// training time so far, resumed parts included, as the budget counts it.
func runETA(iter, iters int, perSec float64, budget, wall time.Duration) (left time.Duration, byBudget bool) {
	left = engine.Remaining(iter, iters, perSec)
	if budget > 0 {
		if b := max(budget-wall, 0); left < 0 || b < left {
			return b, true
		}
	}
	return left, false
}

// count writes an iteration count exactly up to 7 digits and as 12.35M,
// 4.5G or 1T beyond, so that an iteration and its budget fit a column
// however large the budget.
func count(n int) string {
	a := math.Abs(float64(n))
	switch {
	case a >= 1e12:
		return fmt.Sprintf("%.4gT", float64(n)/1e12)
	case a >= 1e9:
		return fmt.Sprintf("%.4gG", float64(n)/1e9)
	case a >= 1e7:
		return fmt.Sprintf("%.4gM", float64(n)/1e6)
	}
	return fmt.Sprint(n)
}

// cutMiddle fits s into w columns by cutting its middle: the start and
// the end stay, and the end is what tells a run's directory (its seed and
// time) from its neighbours'.
func cutMiddle(s string, w int) string {
	if ansi.StringWidthWc(s) <= w {
		return s
	}
	if w <= 1 {
		return ansi.TruncateWc(s, max(w, 0), "")
	}
	r := []rune(s)
	tail := (w - 1) / 2
	for tail > 0 && ansi.StringWidthWc(string(r[len(r)-tail:])) > (w-1)/2 {
		tail--
	}
	rest := w - 1 - ansi.StringWidthWc(string(r[len(r)-tail:]))
	return ansi.TruncateWc(string(r[:len(r)-tail]), rest, "") + "…" + string(r[len(r)-tail:])
}

// cutStart fits path s into w columns by cutting its start: of a run's
// directory, the end (the run's own name, its experiment's) is what
// tells it apart, and the runs root before it is the same for every run.
func cutStart(s string, w int) string {
	if ansi.StringWidthWc(s) <= w {
		return s
	}
	r := []rune(s)
	k := len(r)
	for k > 0 && ansi.StringWidthWc(string(r[k-1:])) <= w-1 {
		k--
	}
	return "…" + string(r[k:])
}

// fitNames fits names that share a column of w: a name that is too
// long loses the start it shares with another name (up to a -, _, / or .
// in it), shown as "…", then the folders before its last element, and
// then its middle (cutMiddle). Runs named
// sine-5shot-metakernel-s1-… and sine-5shot-rbf-s1-… differ after their
// shared start and at their ends, which cutting at the end hid.
func fitNames(names []string, w int) []string {
	out := make([]string, len(names))
	for i, n := range names {
		if ansi.StringWidthWc(n) > w {
			shared := 0 // the longest start n shares with another name
			for j, o := range names {
				k := 0
				for k < len(n) && k < len(o) && n[k] == o[k] {
					k++
				}
				if j != i && k < len(n) {
					shared = max(shared, k)
				}
			}
			if cut := strings.LastIndexAny(n[:shared], "-_/.") + 1; cut > 0 {
				n = "…" + n[cut:]
			}
			// A path's folders go before its own name is cut.
			for ansi.StringWidthWc(n) > w {
				rest := strings.TrimPrefix(n, "…")
				k := strings.IndexByte(rest, '/')
				if k < 0 || k == len(rest)-1 {
					break
				}
				n = "…" + rest[k+1:]
			}
		}
		out[i] = cutMiddle(n, w)
	}
	return out
}
