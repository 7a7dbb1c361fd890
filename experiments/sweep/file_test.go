package sweep

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/mkbench/mkbench/engine"
)

const goodFile = `presets: [sine-5shot]          # one or more
variants: [vrf, metakernel]
seeds: [1, 2, 3]
iters: 1500
eval_tasks: 200
grid:
  bases: [64, 128]
  lr: [0.001, 0.0003]
slurm:
  partition: main
  account: mylab
  qos: normal
  time: "02:00:00"
  mem: 4G
  cpus_per_task: 1
  max_parallel: 8
  extra: ["--constraint=avx2"]
`

func TestParseFileIssueExample(t *testing.T) {
	f, err := ParseFile("s.yaml", []byte(goodFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	units := f.Units()
	if len(units) != 1*2*3*4 {
		t.Fatalf("%d units, want 24", len(units))
	}
	u := units[0]
	if u.Name != "sine-5shot-vrf-bases64-lr0.001-s1" || u.Dir != "units/sine-5shot-vrf-bases64-lr0.001-s1" {
		t.Errorf("first unit %q in %q", u.Name, u.Dir)
	}
	// Seeds are outermost: the first seed's 8 units come first.
	if units[7].Seed != 1 || units[8].Seed != 2 {
		t.Errorf("seeds are not outermost: unit 7 seed %d, unit 8 seed %d", units[7].Seed, units[8].Seed)
	}
	_, cfg, err := units[5].Spec().Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Variant() != "metakernel" || cfg.Bases != 64 || cfg.LR != 0.0003 || cfg.Iters != 1500 || cfg.EvalTasks != 200 || cfg.Seed != 1 {
		t.Errorf("unit 5 (%s): %s D=%d lr=%g iters=%d eval=%d seed=%d", units[5].Name, cfg.Variant(), cfg.Bases, cfg.LR, cfg.Iters, cfg.EvalTasks, cfg.Seed)
	}
	names := map[string]bool{}
	for i, u := range units {
		if u.Index != i || names[u.Name] {
			t.Fatalf("unit %d: index %d, name %q seen before: %v", i, u.Index, u.Name, names[u.Name])
		}
		names[u.Name] = true
	}
	s := f.Slurm
	if s.Partition != "main" || s.Time != "02:00:00" || s.Mem != "4G" || s.MaxParallel != 8 || s.CPUsPerTask != 1 || len(s.Extra) != 1 {
		t.Errorf("slurm section: %+v", s)
	}
	// Stable: the same file gives the same names.
	g, _ := ParseFile("s.yaml", []byte(goodFile), nil)
	if !sameUnits(units, g.Units()) {
		t.Error("the same file planned other units")
	}
}

func TestParseFileDefaults(t *testing.T) {
	f, err := ParseFile("s.yaml", []byte("presets: sine-3shot\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	u := f.Units()
	if len(u) != 1 || u[0].Variant != "metakernel" || u[0].Seed != 1 || u[0].Name != "sine-3shot-metakernel-s1" {
		t.Fatalf("units %+v", u)
	}
}

// TestParseFileErrors: each mistake is one error naming the file, the
// line and the key.
// axes writes n grid axes of m values each (m^n units).
func axes(n, m int) string {
	var b strings.Builder
	for i, k := range []string{"bases", "meta_batch", "query", "infer_hidden", "prior_hidden", "flow_hidden"}[:n] {
		b.WriteString("  " + k + ": [")
		for v := range m {
			if v > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, v+1+i)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestParseFileErrors(t *testing.T) {
	cases := []struct {
		name, file, want string
	}{
		{"unknown key", "presets: [sine-5shot]\nseed: [1]\n", "s.yaml:2: seed: unknown key in the sweep file"},
		{"unknown slurm key", "presets: [sine-5shot]\nslurm:\n  partitoin: main\n", "s.yaml:3: partitoin: unknown key in slurm"},
		{"empty list", "presets: [sine-5shot]\nseeds: []\n", "s.yaml:2: seeds: the list is empty"},
		{"empty grid list", "presets: [sine-5shot]\ngrid:\n  bases: []\n", "s.yaml:3: grid.bases: the list is empty"},
		{"no presets", "seeds: [1]\n", "presets: missing"},
		{"bad preset", "presets: [sine-5shot, sine-6shot]\n", "s.yaml:1: presets: no preset \"sine-6shot\""},
		{"bad variant", "presets: [sine-5shot]\nvariants:\n  - vrf\n  - rbff\n", "s.yaml:4: variants: no variant \"rbff\""},
		{"unknown grid key", "presets: [sine-5shot]\ngrid:\n  lr: [0.1]\n  basis: [64]\n", "s.yaml:4: grid.basis: unknown setting \"basis\""},
		{"bad grid value", "presets: [sine-5shot]\ngrid:\n  bases:\n    - 64\n    - many\n", "s.yaml:5: grid.bases: bases=many: want a whole number"},
		{"grid over an unused field", "presets: [sine-5shot]\ngrid:\n  way: [5, 20]\n", "s.yaml:3: grid.way: sine-5shot, variant metakernel"},
		{"grid over the seed", "presets: [sine-5shot]\ngrid:\n  seed: [1, 2]\n", "s.yaml:3: grid.seed: give it as the sweep's own key seeds:"},
		{"bad duration", "presets: [sine-5shot]\nminutes: soon\n", "s.yaml:2: minutes: \"soon\" is not a duration"},
		{"negative duration", "presets: [sine-5shot]\nminutes: -5\n", "s.yaml:2: minutes:"},
		{"bad slurm time", "presets: [sine-5shot]\nslurm:\n  time: two hours\n", "s.yaml:3: slurm.time: \"two hours\" is not a Slurm time limit"},
		{"bad mem", "presets: [sine-5shot]\nslurm:\n  mem: 4 GB\n", "s.yaml:3: slurm.mem:"},
		{"bad extra", "presets: [sine-5shot]\nslurm:\n  extra: [constraint=avx2]\n", "s.yaml:3: slurm.extra: \"constraint=avx2\" is not an sbatch option"},
		{"zero iters", "presets: [sine-5shot]\niters: 0\n", "s.yaml:2: iters: \"0\" is not a positive whole number"},
		{"duplicate seed", "presets: [sine-5shot]\nseeds: [1, 1]\n", "s.yaml:2: seeds: seed 1 is listed twice"},
		{"duplicate key", "presets: [sine-5shot]\niters: 5\niters: 6\n", "s.yaml:3: iters: given twice"},
		{"not a mapping", "- sine-5shot\n", "s.yaml:1: the sweep file: want a mapping"},
		{"not YAML", "presets: [sine-5shot\n", "s.yaml: not YAML"},
		{"empty file", "", "s.yaml is empty"},
		{"bad value in range", "presets: [sine-5shot]\ngrid:\n  bases: [0]\n", "s.yaml:3: grid.bases:"},
		{"eval_tasks past its bound", "presets: [sine-5shot]\neval_tasks: 100000000000\n", "s.yaml:2: eval_tasks: sine-5shot, variant metakernel: engine: invalid config: eval_tasks must be at most"},
		{"a grid of 10^12 units", "presets: [sine-5shot]\ngrid:\n" + axes(4, 1000), "more than 100000 units"},
		{"a value that drives the terminal", "presets: [sine-5shot]\ngrid:\n  sources: [\"a\\e]0;x\\a\"]\n", "s.yaml:3: grid.sources: a\\x1b]0;x\\x07: a value may not hold control characters"},
		{"duration of no time", "presets: [sine-5shot]\nminutes: 1e-12\n", "s.yaml:2: minutes: 1e-12 minutes is less than a second of training"},
		{"duration past time's range", "presets: [sine-5shot]\nminutes: 1e300\n", "s.yaml:2: minutes: 1e+300 minutes is beyond any training time"},
		{"duration of none", "presets: [sine-5shot]\nminutes: 0\n", "s.yaml:2: minutes: 0 is no limit"},
		// A sweep file someone hands over must not write or run what
		// mkbench does not, through the options sbatch reads.
		{"extra output", "presets: [sine-5shot]\nslurm:\n  extra: [\"--output=/home/u/.bashrc\"]\n", "s.yaml:3: slurm.extra: \"--output=/home/u/.bashrc\": --output is mkbench's to set"},
		{"extra output abbreviated", "presets: [sine-5shot]\nslurm:\n  extra: [\"--outp=/tmp/x\"]\n", "--output is mkbench's to set"},
		{"extra short output", "presets: [sine-5shot]\nslurm:\n  extra: [\"-o /tmp/x\"]\n", "-o is mkbench's to set"},
		{"extra short options run together", "presets: [sine-5shot]\nslurm:\n  extra: [\"-Ho /tmp/x\"]\n", "give a short option alone or before a space"},
		{"extra export", "presets: [sine-5shot]\nslurm:\n  extra: [\"--export=ALL,LD_PRELOAD=/tmp/x.so\"]\n", "--export is mkbench's to set"},
		{"extra array", "presets: [sine-5shot]\nslurm:\n  extra: [\"--array 0-99\"]\n", "--array is mkbench's to set"},
		{"extra chdir", "presets: [sine-5shot]\nslurm:\n  extra: [\"-D /\"]\n", "-D is mkbench's to set"},
		{"extra control character", "presets: [sine-5shot]\nslurm:\n  extra: [\"--comment=a\\eb\"]\n", "is not an sbatch option"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFile("s.yaml", []byte(c.file), nil)
			if err == nil {
				t.Fatalf("no error for\n%s", c.file)
			}
			if !errors.Is(err, ErrSweepFile) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
}

// TestExtraOptionsAllowed: the options a cluster asks of a job pass.
func TestExtraOptionsAllowed(t *testing.T) {
	for _, e := range []string{"--constraint=avx2", "--gres=gpu:1", "--exclude=n3", "--exclusive", "-C avx2", "--mail-type=END", "--nodelist n1", "-N 1"} {
		if err := checkExtra(e); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}

func TestParseFileBaselines(t *testing.T) {
	file := "presets: [sine-5shot]\nvariants: [maml, vrf]\n"
	if _, err := ParseFile("s.yaml", []byte(file), nil); err == nil {
		t.Fatal("maml accepted without the baseline registered")
	}
	f, err := ParseFile("s.yaml", []byte(file), []string{"maml"})
	if err != nil {
		t.Fatal(err)
	}
	if u := f.Units(); len(u) != 2 || u[0].Name != "sine-5shot-maml-s1" {
		t.Fatalf("units %+v", u)
	}
}

func TestParseSlurm(t *testing.T) {
	s, err := ParseSlurm("j.yaml", []byte("slurm:\n  time: \"1-00:00:00\"\n  max_parallel: 3\n"))
	if err != nil || s.Time != "1-00:00:00" || s.MaxParallel != 3 {
		t.Fatalf("%+v, %v", s, err)
	}
	if _, err := ParseSlurm("j.yaml", []byte("slurm:\n  max_parallel: 0\n")); err == nil || !strings.Contains(err.Error(), "j.yaml:2: slurm.max_parallel") {
		t.Fatalf("error %v", err)
	}
}

func TestScriptArray(t *testing.T) {
	f, err := ParseFile("s.yaml", []byte(goodFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := Manifest{File: f, Units: f.Units(), Binary: "/opt/mk bench/mkbench"}
	idx := make([]int, len(m.Units))
	for i := range idx {
		idx[i] = i
	}
	s := Script(m, "/home/u/sw", idx)
	for _, want := range []string{"#SBATCH --array=0-23%8\n", "#SBATCH --requeue\n", "#SBATCH --signal=B:TERM@120\n",
		"#SBATCH --partition=main\n", "#SBATCH --time=02:00:00\n", "#SBATCH --mem=4G\n", "#SBATCH --cpus-per-task=1\n",
		"#SBATCH --constraint=avx2\n", "#SBATCH --output=/home/u/sw/logs/%A_%a.out\n",
		`exec '/opt/mk bench/mkbench' sweep work '/home/u/sw' --index "$SLURM_ARRAY_TASK_ID"`} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if got := arraySpec([]int{1, 4, 5, 6, 9}); got != "1,4-6,9" {
		t.Errorf("arraySpec = %q", got)
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte("presets: [sine-5shot]\ngrid:\n  embed_hidden: [[40, 40], \"64,64\"]\n"))
	f.Add([]byte("presets: [omniglot-5w1s]\nvariants: [rbf]\nminutes: 1.5\n"))
	f.Add([]byte("presets: [sine-5shot]\ngrid:\n  sources: [\"a/b\", \"a+b\", A_b]\n  lr: [0.001, 0x1p-3, 1e-3]\n"))
	f.Add([]byte("presets: [sine-5shot]\ngrid:\n  lr: [0.001" + strings.Repeat("0", 300) + "1, 0.001]\n"))
	f.Add([]byte("presets: [sine-5shot]\ndevice: opencl:2\nslurm: {gres: \"gpu:a100:1\"}\n"))
	f.Add([]byte("presets: [sine-5shot]\nslurm:\n  extra: [\"--outp=/x\", \"-C avx2\", \"-Hox\", \"--exp=A\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile("f.yaml", data, []string{"maml"})
		if err != nil {
			if !errors.Is(err, ErrSweepFile) {
				t.Fatalf("error %v does not match ErrSweepFile", err)
			}
			return
		}
		if len(file.Presets) == 0 {
			t.Fatal("a file without presets parsed")
		}
		units := file.Units()
		if len(units) > 0 {
			if _, _, err := units[0].Spec().Config(); err != nil && units[0].Variant != "maml" {
				t.Fatalf("a parsed file's first unit has no config: %v", err)
			}
		}
		// Every unit has a directory of its own that a file system takes.
		dirs := map[string]string{}
		for _, u := range units {
			if !unitDirOK(u.Dir) || len(u.Name) > MaxUnitName || u.Name != SafeName(u.Name) {
				t.Fatalf("unit %d has the directory %q", u.Index, u.Dir)
			}
			if other, ok := dirs[strings.ToLower(u.Dir)]; ok {
				t.Fatalf("%v and %v share the directory %s", other, u.Grid, u.Dir)
			}
			dirs[strings.ToLower(u.Dir)] = fmt.Sprint(u.Grid)
		}
		// What reaches the job script is an option mkbench lets through.
		for _, e := range file.Slurm.Extra {
			if err := checkExtra(e); err != nil || strings.ContainsFunc(e, unicode.IsControl) {
				t.Fatalf("extra %q passed: %v", e, err)
			}
		}
		if _, err := engine.MinutesBudget(file.Minutes); err != nil {
			t.Fatalf("minutes %g passed", file.Minutes)
		}
		// sweep.json is checked as the parser checks: what it passed,
		// Load takes.
		if err := file.Slurm.check(); err != nil {
			t.Fatalf("slurm settings passed the parser, not the manifest's check: %v", err)
		}
		if len(units) > 0 && !printable(units[0]) {
			t.Fatalf("unit %q is not printable (device %q)", units[0].Name, units[0].Device)
		}
	})
}

func TestParseFileTooManyUnits(t *testing.T) {
	var b strings.Builder
	b.WriteString("presets: [sine-5shot]\ngrid:\n")
	for _, k := range []string{"bases", "infer_hidden", "prior_hidden", "flow_hidden", "meta_batch", "query"} {
		b.WriteString("  " + k + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n")
	}
	_, err := ParseFile("s.yaml", []byte(b.String()), nil)
	if err == nil || !strings.Contains(err.Error(), "more than 100000 units") {
		t.Fatalf("error %v", err)
	}
}

func TestSharedStorage(t *testing.T) {
	out := "NodeName=n1 Arch=x86_64 NodeHostName=vm NodeAddr=127.0.0.1\nNodeName=n2 NodeHostName=vm.lab.org State=IDLE\n"
	if o := otherHosts(out, "vm.lab.org"); len(o) != 0 {
		t.Errorf("one machine's nodes: others %v", o)
	}
	out += "NodeName=n3 NodeHostName=gpu7 State=IDLE\nNodeName=n4 NodeHostName=gpu7\n"
	o := otherHosts(out, "vm")
	if len(o) != 1 || o[0] != "gpu7" {
		t.Fatalf("others %v", o)
	}
	if err := sharedPaths(o, "/home/u/sweeps/a", ""); err != nil {
		t.Error(err)
	}
	err := sharedPaths(o, "/home/u/sweeps/a", "/tmp/mkbench")
	if err == nil || !strings.Contains(err.Error(), "/tmp/mkbench is under /tmp, which the cluster's other nodes (gpu7) do not see") {
		t.Errorf("error %v", err)
	}
	if err := sharedPaths(nil, "/tmp/x"); err != nil {
		t.Errorf("a one-machine cluster refused /tmp: %v", err)
	}
}
