package runfile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Printable is text that came from files — a run's preset or directory,
// a model's name or settings, a folder's file names, an error quoting
// them — made safe to show on a terminal: control characters (an escape
// sequence can retitle the window, rewrite the screen or, on some
// terminals, answer back as typed input), bidirectional overrides (which
// make a name read as another) and bytes that are not UTF-8 are written
// as Go escapes (\x1b, \u202e, \xff), so the text shows what the file
// holds and does nothing to the terminal. Tabs and newlines are escaped
// too: a name is one line of a table.
func Printable(s string) string { return printable(s, false) }

// PrintableLines is Printable keeping newlines, for a message that is
// several lines by design (an internal error's stack).
func PrintableLines(s string) string { return printable(s, true) }

func printable(s string, lines bool) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && lines:
			b.WriteByte('\n')
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}
