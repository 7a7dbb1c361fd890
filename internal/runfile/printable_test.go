package runfile

import "testing"

// What a hostile file name or model.json could carry reaches the terminal
// as visible escapes; ordinary text, accents and CJK included, is unchanged.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want, lines string }{
		{"omniglot-5w1s", "omniglot-5w1s", "omniglot-5w1s"},
		{"Ελληνικά/κ_01", "Ελληνικά/κ_01", "Ελληνικά/κ_01"},
		{"run\x1b]0;pwned\x07", `run\x1b]0;pwned\x07`, `run\x1b]0;pwned\x07`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
		{"a\nb\tc\r", `a\x0ab\x09c\x0d`, "a\nb\\x09c\\x0d"},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`, `bad\xff\xfeutf8`},
		{"gnp.\u202eexe", `gnp.\u202eexe`, `gnp.\u202eexe`},
		{"c1\u009bcsi", `c1\u009bcsi`, `c1\u009bcsi`},
		{"del\x7f", `del\x7f`, `del\x7f`},
	} {
		if got := Printable(c.in); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := PrintableLines(c.in); got != c.lines {
			t.Errorf("PrintableLines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}
