package fetch

import (
	"fmt"
	"io"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Progress writes one file's progress: bytes, percent, rate and time
// left. On a terminal (tty) it redraws one line in place at most ten times
// a second; elsewhere (a log, CI) it prints a plain line every ten
// seconds, so a log does not fill with redraws. Finish ends it with a
// summary line.
type Progress struct {
	w       io.Writer
	tty     bool
	name    string
	total   int64
	done    int64 // bytes of the file there, resumed ones included
	resumed int64 // bytes there before this session, left out of the rate
	start   time.Time
	last    time.Time
	now     func() time.Time
	every   time.Duration
}

// NewProgress starts the progress of name, total bytes long, of which
// have are already there.
func NewProgress(w io.Writer, tty bool, name string, total, have int64) *Progress {
	p := &Progress{w: w, tty: tty, name: name, total: total, done: have, resumed: have, now: time.Now, every: 10 * time.Second}
	if tty {
		p.every = 100 * time.Millisecond
	}
	p.start = p.now()
	p.last = p.start
	if have > 0 {
		fmt.Fprintf(w, "%s: resuming at %s of %s\n", name, runfile.Size(have), runfile.Size(total))
	}
	return p
}

// Add counts n more bytes and redraws when it is time.
func (p *Progress) Add(n int64) {
	p.done += n
	if t := p.now(); t.Sub(p.last) >= p.every {
		p.last = t
		p.draw(p.line(t))
	}
}

// line is the progress so far at time t.
func (p *Progress) line(t time.Time) string {
	s := fmt.Sprintf("%s  %s of %s", p.name, runfile.Size(p.done), runfile.Size(p.total))
	if p.total > 0 {
		s += fmt.Sprintf("  %3d%%", p.done*100/p.total)
	}
	el := t.Sub(p.start).Seconds()
	if got := p.done - p.resumed; el > 0 && got > 0 {
		rate := float64(got) / el
		s += fmt.Sprintf("  %s/s", runfile.Size(int64(rate)))
		if left := p.total - p.done; left > 0 {
			s += "  ETA " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String()
		}
	}
	return s
}

func (p *Progress) draw(s string) {
	if p.tty {
		// \r and "erase to the end of the line" redraw in place.
		fmt.Fprintf(p.w, "\r%s\x1b[K", s)
		return
	}
	fmt.Fprintln(p.w, s)
}

// Finish prints the last line: what came, in how long.
func (p *Progress) Finish() {
	t := p.now()
	got := p.done - p.resumed
	el := t.Sub(p.start)
	s := fmt.Sprintf("%s  %s in %s", p.name, runfile.Size(got), el.Round(100*time.Millisecond))
	if el > 0 && got > 0 {
		s += fmt.Sprintf(" (%s/s)", runfile.Size(int64(float64(got)/el.Seconds())))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", s)
		return
	}
	fmt.Fprintln(p.w, s)
}
