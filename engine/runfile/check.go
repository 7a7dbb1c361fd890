package runfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteAtomicChecked is WriteAtomic that reads the temporary file back
// after the sync and passes its content to check before the rename: a
// write the disk got wrong, or content check refuses, never replaces the
// previous file.
func WriteAtomicChecked(path string, data []byte, perm os.FileMode, check func(written []byte) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(perm)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && check != nil {
		var back []byte
		if back, werr = os.ReadFile(name); werr == nil {
			if werr = check(back); werr != nil {
				werr = fmt.Errorf("verifying what was written: %w", werr)
			}
		}
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return nil
}
