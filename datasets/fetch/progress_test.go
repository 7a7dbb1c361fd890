package fetch

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// clock is a time source the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestProgressIsThrottledAndPlainOffATerminal(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	p := NewProgress(&out, false, "x.zip", 10<<20, 0)
	p.now, p.start, p.last = c.now, c.t, c.t
	for i := 0; i < 100; i++ { // 1 MB each 0.1 s: 10 s in all
		c.t = c.t.Add(100 * time.Millisecond)
		p.Add(100 << 10)
	}
	p.Finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Contains(out.String(), "\r") {
		t.Fatalf("want one progress line in 10 s and the summary, plain:\n%s", out.String())
	}
	if want := "x.zip  9.8 MB of 10.0 MB   97%  1000.0 KB/s  ETA 0s"; lines[0] != want && !strings.HasPrefix(lines[0], "x.zip  9.8 MB of 10.0 MB") {
		t.Errorf("line %q, want like %q", lines[0], want)
	}
	if !strings.Contains(lines[1], "in 10s") {
		t.Errorf("summary %q", lines[1])
	}
}

func TestProgressRedrawsOnATerminalWithRateAndETA(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	p := NewProgress(&out, true, "x.zip", 4<<20, 1<<20)
	p.now, p.start, p.last = c.now, c.t, c.t
	c.t = c.t.Add(time.Second)
	p.Add(1 << 20) // 1 MB/s, 2 MB left
	if s := out.String(); !strings.Contains(s, "resuming at 1.0 MB") || !strings.Contains(s, "\r") || !strings.Contains(s, "ETA 2s") || !strings.Contains(s, "50%") {
		t.Fatalf("tty line %q", s)
	}
}
