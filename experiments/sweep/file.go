package sweep

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// File is a sweep file: what to run, as the user wrote it, checked.
type File struct {
	Presets   []string `json:"presets"`
	Variants  []string `json:"variants,omitempty"` // empty: each preset's own variant
	Seeds     []uint64 `json:"seeds,omitempty"`    // empty: each preset's seed
	Iters     int      `json:"iters,omitempty"`    // 0: each preset's
	Minutes   float64  `json:"minutes,omitempty"`  // training-time budget per unit; 0: none
	EvalTasks int      `json:"eval_tasks,omitempty"`
	Grid      []Axis   `json:"grid,omitempty"`
	// Device is where every unit's image backbones run, as --device
	// takes it (cpu, opencl, opencl:N, auto); "" when the file gives
	// none. It is no setting: a unit's config.json is the same on any.
	Device string `json:"device,omitempty"`
	Slurm  Slurm  `json:"slurm"`
}

// Axis is one grid key and its values, each in ParseSet's syntax
// ("lr=0.001"), in the file's order.
type Axis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// Slurm holds the job settings of the slurm engine; every field is
// optional, and an empty one leaves the cluster's default.
type Slurm struct {
	Partition   string `json:"partition,omitempty"`
	Account     string `json:"account,omitempty"`
	QOS         string `json:"qos,omitempty"`
	Time        string `json:"time,omitempty"` // Slurm's time format: "90", "02:00:00", "1-12:00:00"
	Mem         string `json:"mem,omitempty"`  // "4G", "500M"
	CPUsPerTask int    `json:"cpus_per_task,omitempty"`
	MaxParallel int    `json:"max_parallel,omitempty"`
	// Gres is what a unit on a device asks for (--gres), for clusters
	// that name their GPUs ("gpu:a100:1"); "" asks for DefaultGres.
	Gres  string   `json:"gres,omitempty"`
	Extra []string `json:"extra,omitempty"` // raw #SBATCH options, each "--name[=value]"
}

// LineError is an error at a line of a sweep file: it reads
// "FILE:LINE: KEY: what is wrong".
type LineError struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Key, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// MaxUnits bounds the units of one sweep file: a grid typed wrong can
// multiply out to more runs than any cluster queue takes.
const MaxUnits = 100000

// ErrSweepFile is what every error of ParseFile matches with errors.Is.
var ErrSweepFile = errors.New("bad sweep file")

// topKeys are the keys a sweep file may have, in the order help shows them.
var topKeys = []string{"presets", "variants", "seeds", "iters", "minutes", "eval_tasks", "grid", "device", "slurm"}

// slurmKeys are the keys of its slurm section.
var slurmKeys = []string{"partition", "account", "qos", "time", "mem", "cpus_per_task", "max_parallel", "gres", "extra"}

// ownKeys are run settings the sweep sets with keys of its own, so a grid
// over them is pointed there.
var ownKeys = map[string]string{"seed": "seeds", "iters": "iters", "eval_tasks": "eval_tasks"}

// ParseFile reads a sweep file's YAML. name is how errors name the file;
// baselines are variant names besides the engine's that units may run.
// Every mistake — an unknown key, an empty list, a bad value, a grid over
// a setting a preset does not use, a bad duration — is one error naming
// the key and its line (a *LineError).
func ParseFile(name string, data []byte, baselines []string) (File, error) {
	var f File
	root, err := parseYAML(name, data, "a sweep file needs at least presets: [NAME]")
	if err != nil {
		return f, err
	}
	p := parser{file: name, baselines: baselines}
	err = p.mapping(root, "the sweep file", topKeys, func(key string, k, v *yaml.Node) error {
		switch key {
		case "presets":
			return p.presets(v, &f)
		case "variants":
			return p.variants(v, &f)
		case "seeds":
			return p.each(v, key, func(n *yaml.Node) error {
				s, err := strconv.ParseUint(n.Value, 10, 63)
				if err != nil || n.Kind != yaml.ScalarNode {
					return p.at(n, key, fmt.Errorf("%q is not a seed (a whole number ≥ 0)", n.Value))
				}
				if slices.Contains(f.Seeds, s) {
					return p.at(n, key, fmt.Errorf("seed %d is listed twice", s))
				}
				f.Seeds = append(f.Seeds, s)
				return nil
			})
		case "iters":
			return p.positiveInt(v, key, &f.Iters)
		case "eval_tasks":
			return p.positiveInt(v, key, &f.EvalTasks)
		case "minutes":
			x, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || err != nil {
				return p.at(v, key, fmt.Errorf("%q is not a duration in minutes (a number, e.g. minutes: 60)", v.Value))
			}
			if d, err := engine.MinutesBudget(x); err != nil || d == 0 {
				if err == nil {
					err = errors.New("0 is no limit: leave minutes out for none")
				}
				return p.at(v, key, err)
			}
			f.Minutes = x
		case "grid":
			return p.grid(v, &f)
		case "device":
			return p.device(v, &f)
		case "slurm":
			return p.slurm(v, &f.Slurm)
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	if len(f.Presets) == 0 {
		return f, p.at(root, "presets", errors.New("missing: name one or more presets (presets: [sine-5shot]; see mkbench presets)"))
	}
	return f, p.checkUse(root, f)
}

// parser carries what the error messages need.
type parser struct {
	file      string
	baselines []string
}

func (p parser) at(n *yaml.Node, key string, err error) error {
	return fmt.Errorf("%w: %w", ErrSweepFile, &LineError{File: p.file, Line: n.Line, Key: key, Err: err})
}

// mapping walks a mapping node's pairs in order, refusing keys not in
// known and keys given twice.
func (p parser) mapping(n *yaml.Node, what string, known []string, fn func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.at(n, what, fmt.Errorf("want a mapping of keys (%s)", strings.Join(known, ", ")))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			return p.at(k, k.Value, fmt.Errorf("unknown key in %s (keys: %s)", what, strings.Join(known, ", ")))
		}
		if seen[k.Value] {
			return p.at(k, k.Value, errors.New("given twice"))
		}
		seen[k.Value] = true
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// each calls fn on every item of a list (a lone scalar is a list of one),
// refusing an empty list.
func (p parser) each(n *yaml.Node, key string, fn func(*yaml.Node) error) error {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	} else if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return p.at(n, key, errors.New("want a list, e.g. [1, 2, 3]"))
	}
	if len(items) == 0 {
		return p.at(n, key, errors.New("the list is empty: give at least one value, or leave the key out"))
	}
	for _, it := range items {
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

func (p parser) positiveInt(n *yaml.Node, key string, dst *int) error {
	x, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || x <= 0 {
		return p.at(n, key, fmt.Errorf("%q is not a positive whole number", n.Value))
	}
	*dst = x
	return nil
}

func (p parser) presets(n *yaml.Node, f *File) error {
	return p.each(n, "presets", func(it *yaml.Node) error {
		if _, err := presets.Get(it.Value); err != nil || it.Kind != yaml.ScalarNode {
			return p.at(it, "presets", fmt.Errorf("no preset %q (see mkbench presets)", it.Value))
		}
		if slices.Contains(f.Presets, it.Value) {
			return p.at(it, "presets", fmt.Errorf("%s is listed twice", it.Value))
		}
		f.Presets = append(f.Presets, it.Value)
		return nil
	})
}

func (p parser) variants(n *yaml.Node, f *File) error {
	known := append(slices.Clone(engine.Variants), p.baselines...)
	return p.each(n, "variants", func(it *yaml.Node) error {
		if !slices.Contains(known, it.Value) || it.Kind != yaml.ScalarNode {
			return p.at(it, "variants", fmt.Errorf("no variant %q (variants: %s)", it.Value, strings.Join(known, ", ")))
		}
		if slices.Contains(f.Variants, it.Value) {
			return p.at(it, "variants", fmt.Errorf("%s is listed twice", it.Value))
		}
		f.Variants = append(f.Variants, it.Value)
		return nil
	})
}

// grid reads the grid: each key an override key, each value parsed as
// --set parses it. A value of a list setting (embed_hidden) may be a YAML
// list or "64,64".
func (p parser) grid(n *yaml.Node, f *File) error {
	if n.Kind != yaml.MappingNode {
		return p.at(n, "grid", errors.New("want a mapping of setting keys to lists of values, e.g. grid: {bases: [64, 128]}"))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := strings.ReplaceAll(k.Value, "-", "_")
		where := "grid." + k.Value
		if own, ok := ownKeys[key]; ok {
			return p.at(k, where, fmt.Errorf("give it as the sweep's own key %s:, not in the grid", own))
		}
		if seen[key] {
			return p.at(k, where, errors.New("given twice"))
		}
		seen[key] = true
		ax := Axis{Key: key}
		var values []string // the values parsed, as fmt.Sprint writes them
		if v.Kind != yaml.SequenceNode {
			return p.at(v, where, errors.New("want a list of values, e.g. [64, 128]"))
		}
		if len(v.Content) == 0 {
			return p.at(v, where, errors.New("the list is empty: give at least one value, or leave the key out"))
		}
		for _, it := range v.Content {
			val := it.Value
			if it.Kind == yaml.SequenceNode {
				parts := make([]string, len(it.Content))
				for j, c := range it.Content {
					parts[j] = c.Value
				}
				val = strings.Join(parts, ",")
			} else if it.Kind != yaml.ScalarNode {
				return p.at(it, where, fmt.Errorf("want a value, not a %s", kindName(it)))
			}
			// A value is shown on terminals and in results.md: it may not
			// carry control characters that would act on them.
			if runfile.Printable(val) != val {
				return p.at(it, where, fmt.Errorf("%s: a value may not hold control characters, direction overrides or bytes that are not UTF-8", runfile.Printable(val)))
			}
			set := key + "=" + val
			_, parsed, err := presets.ParseSet(set)
			if err != nil {
				if errors.Is(err, presets.ErrUnknownKey) {
					return p.at(k, where, err)
				}
				return p.at(it, where, err)
			}
			if slices.Contains(ax.Values, set) {
				return p.at(it, where, fmt.Errorf("%s is listed twice", val))
			}
			// 0.001 and 1e-3 are one value: two units would train the same
			// run under two names.
			same := fmt.Sprint(parsed)
			if j := slices.Index(values, same); j >= 0 {
				_, first, _ := strings.Cut(ax.Values[j], "=")
				return p.at(it, where, fmt.Errorf("%s is %s again, written another way; list each value once", val, first))
			}
			values = append(values, same)
			ax.Values = append(ax.Values, set)
		}
		f.Grid = append(f.Grid, ax)
	}
	return nil
}

// device reads device: one device for every unit, as --device takes it.
// It is one value, not a grid axis: a unit's name and directory are its
// settings, and the device is none (the same run on a GPU and on the
// CPU agree within tolerances); compare devices with a sweep each.
func (p parser) device(n *yaml.Node, f *File) error {
	if n.Kind == yaml.SequenceNode {
		return p.at(n, "device", &DeviceError{Value: kindName(n), Err: fmt.Errorf("one device for the whole sweep, not a list: %s; compare devices with a sweep file each", deviceForms)})
	}
	sel, err := opencl.ParseSelection(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || strings.TrimSpace(n.Value) == "" || err != nil {
		return p.at(n, "device", &DeviceError{Value: n.Value, Err: fmt.Errorf("%q is not a device: %s", n.Value, deviceForms)})
	}
	f.Device = sel.String()
	return nil
}

// deviceForms are the values device: takes.
const deviceForms = "use cpu, opencl, opencl:N (N from mkbench devices) or auto"

// DeviceError is a device: value that is none; Value is what was
// written, for a did-you-mean.
type DeviceError struct {
	Value string
	Err   error
}

func (e *DeviceError) Error() string { return e.Err.Error() }
func (e *DeviceError) Unwrap() error { return e.Err }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// slurmTime is Slurm's --time: minutes, minutes:seconds, hours:minutes:
// seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.
var slurmTime = regexp.MustCompile(`^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$`)

// slurmMem is Slurm's --mem: a number of megabytes, or with a K, M, G or
// T suffix.
var slurmMem = regexp.MustCompile(`^[1-9]\d*[KMGT]?$`)

// slurmGres is Slurm's --gres: NAME[:TYPE][:COUNT], comma-separated.
var slurmGres = regexp.MustCompile(`^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*(,[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*)*$`)

// slurmWord is a partition, account or QOS name.
var slurmWord = regexp.MustCompile(`^[A-Za-z0-9_.,-]+$`)

func (p parser) slurm(n *yaml.Node, s *Slurm) error {
	return p.mapping(n, "slurm", slurmKeys, func(key string, k, v *yaml.Node) error {
		where := "slurm." + key
		word := func(dst *string, re *regexp.Regexp, want string) error {
			if v.Kind != yaml.ScalarNode || !re.MatchString(v.Value) {
				return p.at(v, where, fmt.Errorf("%q is not %s", v.Value, want))
			}
			*dst = v.Value
			return nil
		}
		switch key {
		case "partition":
			return word(&s.Partition, slurmWord, "a partition name")
		case "account":
			return word(&s.Account, slurmWord, "an account name")
		case "qos":
			return word(&s.QOS, slurmWord, "a QOS name")
		case "time":
			return word(&s.Time, slurmTime, `a Slurm time limit (MINUTES, HH:MM:SS or D-HH:MM:SS, e.g. "02:00:00"; quote it in YAML)`)
		case "mem":
			return word(&s.Mem, slurmMem, "a memory size (e.g. 4G, 500M)")
		case "cpus_per_task":
			return p.positiveInt(v, where, &s.CPUsPerTask)
		case "max_parallel":
			return p.positiveInt(v, where, &s.MaxParallel)
		case "gres":
			return word(&s.Gres, slurmGres, `a Slurm generic resource (e.g. "gpu:1", "gpu:a100:1")`)
		case "extra":
			return p.each(v, where, func(it *yaml.Node) error {
				line := strings.TrimSpace(it.Value)
				if it.Kind != yaml.ScalarNode || !strings.HasPrefix(line, "-") || strings.ContainsFunc(line, unicode.IsControl) {
					return p.at(it, where, fmt.Errorf("%q is not an sbatch option (write it as on an #SBATCH line, e.g. --constraint=avx2)", it.Value))
				}
				if err := checkExtra(line); err != nil {
					return p.at(it, where, err)
				}
				s.Extra = append(s.Extra, line)
				return nil
			})
		}
		return nil
	})
}

// sbatchOwned are the sbatch options an extra line may not give: those
// the job script sets for mkbench's guarantees (one task per unit, the
// requeue, the notice before the time limit, the output files), and those
// that would let a sweep file someone hands over write files outside the
// sweep directory or change what the job runs. Short forms are the
// letters. sbatch takes any unambiguous prefix of a long option, so a
// prefix of one of these is refused too.
var sbatchOwned = []string{"array", "job-name", "requeue", "no-requeue", "signal", "output", "error", "input", "open-mode",
	"chdir", "export", "export-file", "get-user-env", "wrap", "container", "container-id", "bb", "bbf", "uid", "gid", "parsable"}

var sbatchOwnedShort = "aJoeiD"

// check refuses Slurm settings the parser would refuse: sweep.json, which
// a sweep directory handed over brings, is read without the parser, and
// each field is written raw on an #SBATCH line of a script bash runs.
func (s Slurm) check() error {
	for _, w := range []struct {
		key, v string
		re     *regexp.Regexp
	}{{"partition", s.Partition, slurmWord}, {"account", s.Account, slurmWord}, {"qos", s.QOS, slurmWord}, {"time", s.Time, slurmTime}, {"mem", s.Mem, slurmMem}, {"gres", s.Gres, slurmGres}} {
		if w.v != "" && !w.re.MatchString(w.v) {
			return fmt.Errorf("slurm.%s %q is not one", w.key, w.v)
		}
	}
	if s.CPUsPerTask < 0 || s.MaxParallel < 0 {
		return errors.New("slurm.cpus_per_task or max_parallel is negative")
	}
	for _, e := range s.Extra {
		if !strings.HasPrefix(e, "-") || strings.ContainsFunc(e, unicode.IsControl) {
			return fmt.Errorf("slurm.extra %q is not an sbatch option", e)
		}
		if err := checkExtra(e); err != nil {
			return fmt.Errorf("slurm.extra: %w", err)
		}
	}
	return nil
}

// checkExtra refuses an extra sbatch line that gives an option mkbench
// owns, naming it.
func checkExtra(line string) error {
	owned := ""
	if name, ok := strings.CutPrefix(line, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		name, _, _ = strings.Cut(name, " ")
		for _, o := range sbatchOwned {
			if name != "" && strings.HasPrefix(o, name) {
				owned = "--" + o
				break
			}
		}
		if name == "" {
			return fmt.Errorf("%q is not an sbatch option (write it as on an #SBATCH line, e.g. --constraint=avx2)", line)
		}
	} else {
		// getopt reads "-Ho FILE" as -H and -o: a short option stands
		// alone or before a space.
		if len(line) < 2 || len(line) > 2 && line[2] != ' ' {
			return fmt.Errorf("%q: give a short option alone or before a space (-C avx2), or the long form (--constraint=avx2)", line)
		}
		if strings.IndexByte(sbatchOwnedShort, line[1]) >= 0 {
			owned = line[:2]
		}
	}
	if owned != "" {
		return fmt.Errorf("%q: %s is mkbench's to set (it keeps the units' output, requeue and files in the sweep directory); give other options, e.g. --constraint=avx2", line, owned)
	}
	return nil
}

// checkUse builds one configuration per preset and variant with every
// grid key, so a key the preset does not use (way on sine, flow_layers on
// rbf) or a value it cannot take is named at its line before any unit is
// planned.
func (p parser) checkUse(root *yaml.Node, f File) error {
	line := func(key string) (*yaml.Node, string) {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value != "grid" {
				continue
			}
			g := root.Content[i+1]
			for j := 0; j+1 < len(g.Content); j += 2 {
				if strings.ReplaceAll(g.Content[j].Value, "-", "_") == key {
					return g.Content[j], "grid." + g.Content[j].Value
				}
			}
		}
		return root, "grid"
	}
	n := len(f.Presets) * max(len(f.Variants), 1) * max(len(f.Seeds), 1)
	for _, ax := range f.Grid {
		n *= len(ax.Values)
		if n > MaxUnits {
			break
		}
	}
	if n > MaxUnits {
		return p.at(root, "grid", fmt.Errorf("the sweep has more than %d units; split it into several sweep files", MaxUnits))
	}
	units := f.Units()
	if a, b, ok := sameDir(units); ok {
		for i, g := range a.Grid {
			if g != b.Grid[i] {
				n, where := line(f.Grid[i].Key)
				_, va, _ := strings.Cut(g, "=")
				_, vb, _ := strings.Cut(b.Grid[i], "=")
				return p.at(n, where, fmt.Errorf("%q and %q would both be the unit directory %s (names keep letters, digits and -._@, and a file system may ignore case); give values that differ otherwise", va, vb, a.Dir))
			}
		}
		return p.at(root, "presets", fmt.Errorf("%s %s and %s %s would both be the unit directory %s", a.Preset, a.Variant, b.Preset, b.Variant, a.Dir))
	}
	for _, u := range units {
		if slices.Contains(p.baselines, u.Variant) {
			continue
		}
		if _, _, err := u.Spec().Config(); err != nil {
			for _, ax := range f.Grid {
				if namesKey(err.Error(), ax.Key) {
					n, where := line(ax.Key)
					return p.at(n, where, fmt.Errorf("%s, variant %s: %w", u.Preset, u.Variant, err))
				}
			}
			// A size of the sweep's own (eval_tasks 10^11) is named at
			// its line.
			for i := 0; i+1 < len(root.Content); i += 2 {
				if k := root.Content[i]; (k.Value == "iters" || k.Value == "eval_tasks") && namesKey(err.Error(), k.Value) {
					return p.at(k, k.Value, fmt.Errorf("%s, variant %s: %w", u.Preset, u.Variant, err))
				}
			}
			return p.at(root, u.Name, err)
		}
	}
	return nil
}

// sameDir finds two units that name one directory, ignoring case (macOS
// and Windows file systems do, and a sweep directory may be copied there).
func sameDir(units []Unit) (a, b Unit, ok bool) {
	first := make(map[string]int, len(units))
	for i, u := range units {
		key := strings.ToLower(u.Dir)
		if j, seen := first[key]; seen {
			return units[j], u, true
		}
		first[key] = i
	}
	return a, b, false
}

// namesKey reports whether msg names key as a word (bases, not
// bases_scale).
func namesKey(msg, key string) bool {
	for i := strings.Index(msg, key); i >= 0; {
		end := i + len(key)
		before := i == 0 || !isWordByte(msg[i-1])
		after := end == len(msg) || !isWordByte(msg[end])
		if before && after {
			return true
		}
		j := strings.Index(msg[i+1:], key)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// ParseSlurm reads the Slurm job options of an experiment run with the
// slurm engine (mkbench experiment --engine slurm --slurm FILE): a YAML
// file whose slurm: section has a sweep file's keys. Errors are as
// ParseFile's.
func ParseSlurm(name string, data []byte) (Slurm, error) {
	var s Slurm
	root, err := parseYAML(name, data, "it needs a slurm: section")
	if err != nil {
		return s, err
	}
	p := parser{file: name}
	err = p.mapping(root, name, []string{"slurm"}, func(_ string, _, v *yaml.Node) error {
		return p.slurm(v, &s)
	})
	return s, err
}

// parseYAML parses data into its root node; empty says what an empty
// file lacks.
func parseYAML(name string, data []byte, empty string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: not YAML: %v", ErrSweepFile, name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: %s is empty; %s", ErrSweepFile, name, empty)
	}
	return doc.Content[0], nil
}
