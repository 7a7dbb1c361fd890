package runfile

import "path/filepath"

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
