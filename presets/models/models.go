package models

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/runfile"
)

//go:embed shipped
var shipped embed.FS

// Files of a model's folder.
const (
	FileModel   = "model.mkbm"
	FileInfo    = "model.json"
	FileMetrics = engine.FileMetrics
	FileVal     = engine.FileVal
)

// MaxModelBytes bounds a shipped model file (float32 parameters).
const MaxModelBytes = 8 << 20

// ErrNoModel is matched by the error for a name no library holds.
var ErrNoModel = errors.New("no such model")

// Info describes a model (model.json).
type Info struct {
	Name    string `json:"name"`
	Preset  string `json:"preset"`
	Variant string `json:"variant"`
	Source  string `json:"source"` // the task family
	// Test is the float32 model's evaluation with the run's settings
	// (tasks, queries, draws) and its fixed evaluation seed, as `mkbench
	// eval --model NAME` repeats it.
	Test         engine.EvalResult `json:"test"`
	TrainSeconds float64           `json:"train_seconds"`
	Iters        int               `json:"iters"`     // iterations trained
	BestIter     int               `json:"best_iter"` // the iteration whose parameters these are
	// Last marks the last parameters of a run that did not validate
	// (train_split trainval, val_every 0), not its best validation's.
	Last   bool `json:"last,omitempty"`
	Params int  `json:"params"`
	// Settings are the run's settings that differ from its preset's, as
	// key=value: the choices that made it.
	Settings []string  `json:"settings,omitempty"`
	Exported time.Time `json:"exported"`
}

// Library is a set of models: the shipped ones (Shipped) or a folder of
// them (Dir).
type Library struct {
	fsys  fs.FS
	where string // for messages
}

// Shipped is the models built into the binary.
func Shipped() Library {
	sub, err := fs.Sub(shipped, "shipped")
	if err != nil {
		panic(err)
	}
	return Library{fsys: sub, where: "the models shipped in mkbench"}
}

// Dir is the models in folder dir (one folder per model).
func Dir(dir string) Library { return Library{fsys: os.DirFS(dir), where: dir} }

// List is the library's models, by name: its folders holding a
// model.json. A damaged model.json is an error naming it.
func (l Library) List() ([]Info, error) {
	entries, err := fs.ReadDir(l.fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", l.where, err)
	}
	var out []Info
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(l.fsys, path.Join(e.Name(), FileInfo)); errors.Is(err, fs.ErrNotExist) {
			continue // not a model (or one still being exported: model.json comes last)
		}
		info, err := l.info(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l Library) info(name string) (Info, error) {
	var info Info
	b, err := fs.ReadFile(l.fsys, path.Join(name, FileInfo))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := fs.Stat(l.fsys, name); serr != nil {
			return info, fmt.Errorf("models: %w %q in %s (mkbench models lists them)", ErrNoModel, name, l.where)
		}
	}
	if err != nil {
		return info, fmt.Errorf("models: %s/%s: %w", name, FileInfo, err)
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Name != name {
		return info, fmt.Errorf("models: %s/%s in %s is damaged (%v); reinstall or re-export the model", name, FileInfo, l.where, err)
	}
	return info, nil
}

// Open reads model name: its checkpoint (from model.mkbm) and its Info.
func (l Library) Open(name string) (*engine.Checkpoint, Info, error) {
	info, err := l.info(name)
	if err != nil {
		return nil, info, err
	}
	b, err := fs.ReadFile(l.fsys, path.Join(name, FileModel))
	if err != nil {
		return nil, info, fmt.Errorf("models: %s: %w", name, err)
	}
	ck, err := engine.ReadModelFile(b, path.Join(name, FileModel))
	if err != nil {
		return nil, info, fmt.Errorf("models: %w; reinstall or re-export the model", err)
	}
	return ck, info, nil
}

// Curves returns model name's learning curves, metrics.jsonl and val.jsonl
// as the run wrote them.
func (l Library) Curves(name string) (metrics, val []byte, err error) {
	if metrics, err = fs.ReadFile(l.fsys, path.Join(name, FileMetrics)); err != nil {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	if val, err = fs.ReadFile(l.fsys, path.Join(name, FileVal)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	return metrics, val, nil
}

// Export writes run directory runDir's evaluated model (best.gob, else
// the last checkpoint) as model name in folder dst: model.mkbm,
// model.json with Test from evaluate (called on the float32 model as it
// will be read back) and the run's curves. adjust, if not nil, changes
// the model's evaluation settings first (eval_support_shift chosen after
// training on the validation classes); it must not change what the
// parameters mean, and its result is validated. A model over
// MaxModelBytes is refused: shipped models must stay small.
func Export(runDir, dst, name string, settings []string, adjust func(*engine.Config), evaluate func(*engine.Checkpoint) (engine.EvalResult, error)) (Info, error) {
	var info Info
	if name == "" || name != filepath.Base(name) || name[0] == '.' {
		return info, fmt.Errorf("models: %q is not a model name (a plain folder name)", name)
	}
	ck, which, _, err := engine.LoadEvalCheckpoint(runDir)
	if err != nil {
		return info, err
	}
	if adjust != nil {
		adjust(&ck.Config)
		if err := ck.Config.Validate(); err != nil {
			return info, err
		}
	}
	data := engine.ModelFile(ck)
	if len(data) > MaxModelBytes {
		return info, fmt.Errorf("models: %s holds %d parameters, %.1f MB in float32, over the %d MB a shipped model may take; train a smaller model (infer_hidden, flow_hidden)",
			runDir, paramCount(ck), float64(len(data))/(1<<20), MaxModelBytes>>20)
	}
	back, err := engine.ReadModelFile(data, name)
	if err != nil {
		return info, err
	}
	// summary.json holds the whole run's iterations and training time, the
	// checkpoint only those up to the best validation; read before the
	// evaluation, which takes minutes, so a damaged one fails at once.
	sum, err := engine.ReadSummary(runDir)
	if err != nil {
		return info, err
	}
	if sum == nil {
		sum = &engine.Summary{}
	}
	test, err := evaluate(back)
	if err != nil {
		return info, err
	}
	test.PerTask = nil
	info = Info{Name: name, Preset: ck.Preset, Variant: ck.Config.Variant(), Source: ck.Source, Test: test,
		TrainSeconds: ck.TrainSeconds, Iters: max(sum.Iters, ck.Iter), BestIter: ck.Iter, Last: which == "last", Params: paramCount(ck),
		Settings: settings, Exported: time.Now().UTC().Truncate(time.Second)}
	if sum.TrainSeconds > 0 {
		info.TrainSeconds = sum.TrainSeconds
	}
	dir := filepath.Join(dst, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return info, err
	}
	js, _ := json.MarshalIndent(info, "", "  ")
	files := map[string][]byte{FileModel: data, FileInfo: append(js, '\n')}
	for _, f := range []string{FileMetrics, FileVal} {
		b, err := os.ReadFile(filepath.Join(runDir, f))
		if err != nil && !(f == FileVal && errors.Is(err, os.ErrNotExist)) {
			return info, err
		}
		if err == nil {
			files[f] = b
		}
	}
	// model.json last: a folder without it is not listed as a model.
	for _, f := range []string{FileModel, FileMetrics, FileVal, FileInfo} {
		if b, ok := files[f]; ok {
			if err := runfile.WriteAtomic(filepath.Join(dir, f), b, 0o644); err != nil {
				return info, err
			}
		}
	}
	return info, nil
}

func paramCount(ck *engine.Checkpoint) int {
	n := 0
	for _, p := range ck.Params {
		n += len(p.Data)
	}
	return n
}
