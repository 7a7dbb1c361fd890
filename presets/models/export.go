package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// A model folder is written whole or not at all: an export writes the
// files into a hidden sibling, .NAME.tmp-DIGITS, and renames it into
// place under the library folder's lock, so a reader, or another export
// to the same name, never sees one export's model.mkbm beside another's
// model.json. An existing model is replaced only when asked (force), and
// it is kept, moved aside to .NAME.replaced-TIME, until the new one is in
// place; then the files an export writes are removed from it, and it only
// if nothing else is left.

// ownFiles are the files an export writes into a model folder.
var ownFiles = []string{FileModel, FileMetrics, FileVal, FileInfo}

// ExistsError is Export's refusal of a name the library already holds.
type ExistsError struct{ Dir string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("models: %s already exists; add --force to replace it (it is kept until the new model is in place), or choose another --name", e.Dir)
}

// Export writes run directory runDir's evaluated model (best.gob, else
// the last checkpoint) as model name in folder dst: model.mkbm,
// model.json with Test from evaluate (called on the float32 model as it
// will be read back) and the run's curves. adjust, if not nil, changes
// the model's evaluation settings first (eval_support_shift chosen after
// training on the validation classes); it must not change what the
// parameters mean, and its result is validated. A model over
// MaxModelBytes is refused: shipped models must stay small. A name dst
// holds already is refused (*ExistsError) unless force; note says what
// became of a replaced model.
func Export(runDir, dst, name string, force bool, settings []string, adjust func(*engine.Config), evaluate func(*engine.Checkpoint) (engine.EvalResult, error)) (info Info, note string, err error) {
	if err := checkName(name); err != nil {
		return info, "", err
	}
	dir := filepath.Join(dst, name)
	if _, err := os.Lstat(dir); err == nil && !force {
		return info, "", &ExistsError{dir} // before the evaluation, which takes minutes
	}
	ck, which, _, err := engine.LoadEvalCheckpoint(runDir)
	if err != nil {
		return info, "", err
	}
	if adjust != nil {
		adjust(&ck.Config)
		if err := ck.Config.Validate(); err != nil {
			return info, "", err
		}
	}
	data := engine.ModelFile(ck)
	if len(data) > MaxModelBytes {
		return info, "", fmt.Errorf("models: %s holds %d parameters, %.1f MB in float32, over the %d MB a shipped model may take; train a smaller model (infer_hidden, flow_hidden)",
			runDir, paramCount(ck), float64(len(data))/(1<<20), MaxModelBytes>>20)
	}
	back, err := engine.ReadModelFile(data, name)
	if err != nil {
		return info, "", err
	}
	// summary.json holds the whole run's iterations and training time, the
	// checkpoint only those up to the best validation; read before the
	// evaluation, which takes minutes, so a damaged one fails at once.
	sum, err := engine.ReadSummary(runDir)
	if err != nil {
		return info, "", err
	}
	if sum == nil {
		sum = &engine.Summary{}
	}
	files := map[string][]byte{FileModel: data}
	for _, f := range []string{FileMetrics, FileVal} {
		b, err := runfile.ReadBounded(filepath.Join(runDir, f), runfile.MaxLog)
		if err != nil && !(f == FileVal && errors.Is(err, fs.ErrNotExist)) {
			return info, "", err
		}
		if err == nil {
			files[f] = b
		}
	}
	test, err := evaluate(back)
	if err != nil {
		return info, "", err
	}
	test.PerTask = nil
	info = Info{Name: name, Preset: ck.Preset, Variant: ck.Config.Variant(), Source: ck.Source, Test: test,
		TrainSeconds: ck.TrainSeconds, Iters: max(sum.Iters, ck.Iter), BestIter: ck.Iter, Last: which == "last", Params: paramCount(ck),
		Settings: settings, Exported: time.Now().UTC().Truncate(time.Second)}
	if sum.TrainSeconds > 0 {
		info.TrainSeconds = sum.TrainSeconds
	}
	js, _ := json.MarshalIndent(info, "", "  ")
	files[FileInfo] = append(js, '\n')
	note, err = install(dst, name, force, files)
	return info, note, err
}

// install writes files as model folder dst/name, whole or not at all
// (see above).
func install(dst, name string, force bool, files map[string][]byte) (note string, err error) {
	lock, err := lockLibrary(dst)
	if err != nil {
		return "", err
	}
	defer lock.Remove() // no lock file left in the library (the shipped folder is in the source tree)
	removeDeadExports(dst)
	tmp, err := os.MkdirTemp(dst, "."+name+".tmp-")
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	defer os.RemoveAll(tmp) // made here, holding only what this export wrote; gone once renamed
	for _, f := range ownFiles {
		if b, ok := files[f]; ok {
			if err := runfile.WriteAtomic(filepath.Join(tmp, f), b, 0o644); err != nil {
				return "", fmt.Errorf("models: %w", err)
			}
		}
	}
	dir := filepath.Join(dst, name)
	var old string
	if _, err := os.Lstat(dir); err == nil {
		if !force {
			return "", &ExistsError{dir} // another export got there first
		}
		old = filepath.Join(dst, "."+name+".replaced-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := os.Rename(dir, old); err != nil {
			return "", fmt.Errorf("models: %s could not be moved aside to be replaced (%w); nothing was changed", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			if rerr := os.Rename(old, dir); rerr != nil {
				return "", fmt.Errorf("models: the new %s could not be put in place (%v), and the old one is at %s (%v)", dir, err, old, rerr)
			}
		}
		return "", fmt.Errorf("models: the new %s could not be put in place (%w); nothing was changed", dir, err)
	}
	if old == "" {
		return "", nil
	}
	return "replaced the model that was there; " + dropOld(old), nil
}

// dropOld removes from the replaced model folder old the files an export
// writes, and old itself when nothing else is left; else it says what
// was kept.
func dropOld(old string) string {
	for _, f := range ownFiles {
		os.Remove(filepath.Join(old, f))
	}
	if err := os.Remove(old); err == nil {
		return "its files are removed"
	}
	var left []string
	if entries, err := os.ReadDir(old); err == nil {
		for _, e := range entries {
			left = append(left, e.Name())
		}
	}
	return fmt.Sprintf("its files not written by an export (%s) are kept in %s", strings.Join(left, ", "), old)
}

// removeDeadExports removes the work folders of exports into dst that
// were killed: .NAME.tmp-DIGITS holding nothing but the files an export
// writes. The caller holds dst's lock, which every export holds while its
// work folder exists, so none is in progress.
func removeDeadExports(dst string) {
	entries, _ := os.ReadDir(dst)
	for _, e := range entries {
		n := e.Name()
		if _, ok := runfile.TempOf(n); !ok || !e.IsDir() || !strings.HasPrefix(n, ".") {
			continue
		}
		dir := filepath.Join(dst, n)
		inside, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		own := true
		for _, f := range inside {
			base, ok := runfile.TempOf(f.Name())
			if !ok {
				base = f.Name()
			}
			own = own && f.Type().IsRegular() && slices.Contains(ownFiles, base)
		}
		if own {
			for _, f := range inside {
				os.Remove(filepath.Join(dir, f.Name()))
			}
			os.Remove(dir)
		}
	}
}

// lockLibrary takes the lock of the library folder dst (creating it),
// waiting a little for another export, which holds it only while it
// writes its few files and renames their folder into place. Its holder
// removes the lock file when done (runfile.DirLock.Remove), so a library
// keeps no trace of it.
func lockLibrary(dst string) (*runfile.DirLock, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := runfile.Lock(dst)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, runfile.ErrInUse) || time.Now().After(deadline) {
			return nil, fmt.Errorf("models: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
