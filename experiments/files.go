package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/mkbench/mkbench/internal/runfile"
)

// readJSON reads the JSON file at path into v; an error for a missing
// file wraps os.ErrNotExist. The experiment's own files are small: one
// past runfile.MaxSmallJSON is refused unread.
func readJSON(path string, v any) error {
	b, err := runfile.ReadBounded(path, runfile.MaxSmallJSON)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("experiments: %s is damaged: %w", path, err)
	}
	return nil
}

// writeJSON writes v as indented JSON and writeFile writes data,
// atomically (runfile). Results and the files the experiments add to run
// directories are for reading by others (runfile.Shared), unlike the
// engine's run files.
func writeJSON(path string, v any) error { return runfile.WriteJSON(path, v, runfile.Shared) }

func writeFile(path string, data []byte) error {
	return runfile.WriteAtomic(path, data, runfile.Shared)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}
