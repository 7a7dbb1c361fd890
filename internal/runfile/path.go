package runfile

import (
	"path/filepath"
	"unicode/utf8"
)

// AbsOrEmpty is path p made absolute, so that a run directory's record
// of it (a data folder, a binary) is found from another working directory
// or another node; "" (the default) stays "".
func AbsOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// PathBytes is what a JSON file records beside path p, in a *_bytes field
// (base64), when JSON cannot hold p: a Linux path need not be UTF-8, and
// encoding/json writes U+FFFD for each byte that is not, so the path would
// not read back. nil for a UTF-8 path, which the field then leaves out, so
// such files are as they were.
func PathBytes(p string) []byte {
	if utf8.ValidString(p) {
		return nil
	}
	return []byte(p)
}

// PathFrom is the path a file recorded as s, or as b when it has them
// (PathBytes).
func PathFrom(s string, b []byte) string {
	if len(b) > 0 {
		return string(b)
	}
	return s
}
