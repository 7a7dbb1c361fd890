package models

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
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

// DamagedError is List's error for the models of a library that cannot
// be read: each one's error, by name. List returns the others all the
// same.
type DamagedError struct {
	Where   string
	Damaged []Damaged
}

// Damaged is a model folder that cannot be read, and why.
type Damaged struct {
	Name string
	Err  error
}

func (e *DamagedError) Error() string {
	var names []string
	for _, d := range e.Damaged {
		names = append(names, d.Name)
	}
	return fmt.Sprintf("models: %d damaged in %s (%s): %v", len(e.Damaged), e.Where, strings.Join(names, ", "), e.Damaged[0].Err)
}

// ErrDamaged is what a DamagedError matches with errors.Is.
var ErrDamaged = errors.New("damaged model")

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// List is the library's models, by name: its folders holding a
// model.json (hidden folders, an export's work in progress, are not
// models). One that cannot be read does not hide the others: they are
// returned with a *DamagedError naming each damaged one and why.
func (l Library) List() ([]Info, error) {
	entries, err := fs.ReadDir(l.fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", l.where, err)
	}
	var out []Info
	var damaged []Damaged
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := fs.Stat(l.fsys, path.Join(e.Name(), FileInfo)); errors.Is(err, fs.ErrNotExist) {
			continue // not a model
		}
		info, err := l.info(e.Name())
		if err != nil {
			damaged = append(damaged, Damaged{e.Name(), err})
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(damaged) > 0 {
		return out, &DamagedError{Where: l.where, Damaged: damaged}
	}
	return out, nil
}

// checkName refuses a name that is not a plain folder name: a path
// (a/b, ../x, /etc) would reach outside the library, and a hidden name is
// an export in progress (.NAME.tmp-*).
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || name[0] == '.' || !fs.ValidPath(name) {
		return fmt.Errorf("models: %q is not a model name (a plain folder name, such as omniglot-5w1s; mkbench models lists them)", name)
	}
	return nil
}

func (l Library) info(name string) (Info, error) {
	var info Info
	if err := checkName(name); err != nil {
		return info, err
	}
	b, err := runfile.ReadFSBounded(l.fsys, path.Join(name, FileInfo), runfile.MaxSmallJSON)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := fs.Stat(l.fsys, name); serr != nil {
			return info, fmt.Errorf("models: %w %q in %s (mkbench models lists them)", ErrNoModel, name, l.where)
		}
	}
	if err != nil {
		return info, fmt.Errorf("models: %s/%s: %w", name, FileInfo, err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("models: %s/%s in %s is damaged (%v); reinstall or re-export the model", name, FileInfo, l.where, err)
	}
	if info.Name != name {
		return info, fmt.Errorf("models: %s/%s in %s names the model %q, not its folder's name; rename the folder back or re-export the model", name, FileInfo, l.where, info.Name)
	}
	return info, nil
}

// Open reads model name: its checkpoint (from model.mkbm) and its Info.
func (l Library) Open(name string) (*engine.Checkpoint, Info, error) {
	info, err := l.info(name)
	if err != nil {
		return nil, info, err
	}
	b, err := l.modelFile(name)
	if err != nil {
		return nil, info, err
	}
	ck, err := engine.ReadModelFile(b, path.Join(name, FileModel))
	if err != nil {
		return nil, info, fmt.Errorf("models: %w; reinstall or re-export the model", err)
	}
	return ck, info, nil
}

// modelFile reads model name's model.mkbm, refused past MaxModelBytes,
// which no export writes: a model folder may come from anyone.
func (l Library) modelFile(name string) ([]byte, error) {
	b, err := runfile.ReadFSBounded(l.fsys, path.Join(name, FileModel), MaxModelBytes)
	if err != nil {
		return nil, fmt.Errorf("models: %s in %s: %w", name, l.where, err)
	}
	return b, nil
}

// Curves returns model name's learning curves, metrics.jsonl and val.jsonl
// as the run wrote them.
func (l Library) Curves(name string) (metrics, val []byte, err error) {
	if metrics, err = runfile.ReadFSBounded(l.fsys, path.Join(name, FileMetrics), runfile.MaxLog); err != nil {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	if val, err = runfile.ReadFSBounded(l.fsys, path.Join(name, FileVal), runfile.MaxLog); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	return metrics, val, nil
}

func paramCount(ck *engine.Checkpoint) int {
	n := 0
	for _, p := range ck.Params {
		n += len(p.Data)
	}
	return n
}
