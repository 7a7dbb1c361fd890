package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mkbench/mkbench/internal/runfile"
)

// ErrNoSlurm reports that the Slurm commands are missing or the cluster
// does not answer.
var ErrNoSlurm = errors.New("slurm is not available")

// slurmCmd runs a Slurm client command and returns its standard output;
// the error carries its standard error.
func slurmCmd(ctx context.Context, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, fmt.Errorf("%w: %s is not on PATH (the slurm engine submits with sbatch; run on a login node, or use --engine local)", ErrNoSlurm, name)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return out.Bytes(), fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), msg)
	}
	return out.Bytes(), nil
}

// Script is the job array script of the units at indices: one array task
// per unit, each running `mkbench sweep work DIR --index I` with exec, so
// the worker itself receives Slurm's signals. --requeue lets Slurm start a
// task again after a node failure or a preemption; --signal=B:TERM@120
// gives a task two minutes' notice of its time limit, in which the worker
// saves a checkpoint and requeues itself. dir and binary must be absolute.
func Script(m Manifest, dir string, indices []int) string {
	s := m.File.Slurm
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("#!/bin/bash")
	line("# Written by mkbench sweep run; submit it with the command, not by hand:")
	line("# it records the job id the status and cancel commands use.")
	line("#SBATCH --job-name=mkbench-%s", SafeName(filepath.Base(dir)))
	array := arraySpec(indices)
	if s.MaxParallel > 0 {
		array += "%" + strconv.Itoa(s.MaxParallel)
	}
	line("#SBATCH --array=%s", array)
	line("#SBATCH --requeue")
	line("#SBATCH --signal=B:TERM@120")
	line("#SBATCH --output=%s", filepath.Join(dir, DirLogs, "%A_%a.out"))
	line("#SBATCH --open-mode=append")
	for _, o := range []struct{ flag, v string }{{"partition", s.Partition}, {"account", s.Account}, {"qos", s.QOS}, {"time", s.Time}, {"mem", s.Mem}} {
		if o.v != "" {
			line("#SBATCH --%s=%s", o.flag, o.v)
		}
	}
	if s.CPUsPerTask > 0 {
		line("#SBATCH --cpus-per-task=%d", s.CPUsPerTask)
	}
	if g := gres(m, indices); g != "" {
		line("#SBATCH --gres=%s", g)
	}
	for _, e := range s.Extra {
		line("#SBATCH %s", e)
	}
	line("")
	line("# One Go thread per allocated CPU, so units sharing a node do not oversubscribe it.")
	line(`export GOMAXPROCS="${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-1}}"`)
	line(`exec %s sweep work %s --index "$SLURM_ARRAY_TASK_ID"`, shellQuote(m.Binary), shellQuote(dir))
	return b.String()
}

// DefaultGres is what a unit on a device asks Slurm for without a
// slurm.gres of the sweep's: one GPU.
const DefaultGres = "gpu:1"

// gres is the generic resource the array of the units at indices asks
// for: a GPU (slurm.gres, else DefaultGres) when one of them runs on a
// device, none when all run on the CPU. A --gres or --gpus among the
// extra lines (how a GPU was asked for before device:) says it alone.
func gres(m Manifest, indices []int) string {
	for _, e := range m.File.Slurm.Extra {
		if strings.HasPrefix(e, "--gres") || strings.HasPrefix(e, "--gpus") || strings.HasPrefix(e, "-G") {
			return ""
		}
	}
	for _, i := range indices {
		if i >= 0 && i < len(m.Units) && m.Units[i].OnDevice() {
			if m.File.Slurm.Gres != "" {
				return m.File.Slurm.Gres
			}
			return DefaultGres
		}
	}
	return ""
}

// arraySpec writes indices as Slurm's --array list: runs of consecutive
// indices as ranges ("0-11", "1,4-6").
func arraySpec(indices []int) string {
	var parts []string
	for i := 0; i < len(indices); {
		j := i
		for j+1 < len(indices) && indices[j+1] == indices[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", indices[i], indices[j]))
		} else {
			parts = append(parts, strconv.Itoa(indices[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// WriteScript writes dir's sweep.sbatch for the units at indices and
// returns its path.
func WriteScript(m Manifest, dir string, indices []int) (string, error) {
	// The directory is written raw on #SBATCH lines, which end at a
	// newline and split at spaces: such a path would cut a line in two
	// (and a newline could add a line of its own).
	if strings.ContainsFunc(dir, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' || r == '\'' }) {
		return "", fmt.Errorf("sweep: the slurm engine needs a sweep directory whose path has no spaces, quotes or control characters, not %s; choose another --out", strconv.Quote(dir))
	}
	if err := m.File.Slurm.check(); err != nil {
		return "", fmt.Errorf("sweep: %w", err)
	}
	path := filepath.Join(dir, FileScript)
	// Slurm opens the tasks' output files there, and fails a task whose
	// folder is missing.
	if err := os.MkdirAll(filepath.Join(dir, DirLogs), 0o755); err != nil {
		return "", err
	}
	if err := notLinked(filepath.Join(dir, DirLogs), path); err != nil {
		return "", err
	}
	return path, runfile.WriteAtomic(path, []byte(Script(m, dir, indices)), 0o755)
}

// Submit writes the script for the units at indices, submits it with
// sbatch, and records the job in jobs.jsonl. It refuses a sweep directory
// or binary under /tmp when the cluster's nodes are more than this
// machine: other nodes would not see them.
func Submit(ctx context.Context, dir string, indices []int) (Submission, error) {
	m, err := Load(dir)
	if err != nil {
		return Submission{}, err
	}
	if err := checkShared(ctx, dir, m.Binary, m.Data); err != nil {
		return Submission{}, err
	}
	os.Remove(filepath.Join(dir, FileCancelled))
	path, err := WriteScript(m, dir, indices)
	if err != nil {
		return Submission{}, err
	}
	out, err := slurmCmd(ctx, "sbatch", "--parsable", path)
	if err != nil {
		// A cluster without GPUs, or one that names them otherwise,
		// refuses the request in its own words: say what to change.
		if g := gres(m, indices); g != "" && strings.Contains(strings.ToLower(err.Error()), "gres") {
			return Submission{}, fmt.Errorf("sweep: submitting %s: %w (units on a device ask for --gres=%s: give the cluster's name for a GPU as slurm: {gres: ...} in the sweep file, or run them on the CPU with --device cpu)",
				path, err, g)
		}
		return Submission{}, fmt.Errorf("sweep: submitting %s: %w", path, err)
	}
	// --parsable prints "jobid" or "jobid;cluster".
	job, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.Atoi(job); err != nil {
		return Submission{}, fmt.Errorf("sweep: sbatch answered %q, not a job id", out)
	}
	sub := Submission{Job: job, Indices: indices, Time: time.Now().UTC()}
	return sub, runfile.Append(filepath.Join(dir, FileJobs), sub, runfile.Shared)
}

// checkShared refuses paths under the temporary folder when the cluster
// spans other machines than this one.
func checkShared(ctx context.Context, paths ...string) error {
	out, err := slurmCmd(ctx, "scontrol", "show", "node", "--oneliner")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSlurm, err)
	}
	host, _ := os.Hostname()
	return sharedPaths(otherHosts(string(out), host), paths...)
}

// otherHosts lists the node host names in `scontrol show node --oneliner`
// output that are not host (short names compared: vm is vm.lab.org).
func otherHosts(out, host string) []string {
	short := func(h string) string { s, _, _ := strings.Cut(h, "."); return s }
	var others []string
	for _, f := range strings.Fields(out) {
		if h, ok := strings.CutPrefix(f, "NodeHostName="); ok && short(h) != short(host) && !slices.Contains(others, h) {
			others = append(others, h)
		}
	}
	return others
}

// sharedPaths refuses a path under the temporary folder when there are
// other hosts, which do not see this machine's.
func sharedPaths(others []string, paths ...string) error {
	if len(others) == 0 {
		return nil
	}
	tmp := filepath.Clean(os.TempDir())
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		for _, t := range []string{tmp, "/tmp"} {
			if abs == t || strings.HasPrefix(abs, t+string(filepath.Separator)) {
				return fmt.Errorf("sweep: %s is under %s, which the cluster's other nodes (%s) do not see; put the sweep directory, the data and the mkbench binary on shared storage (your home or project folder)", p, t, strings.Join(others, ", "))
			}
		}
	}
	return nil
}

// QueueTask is an array task squeue lists.
type QueueTask struct {
	State string
	Node  string
}

// Active reports whether Slurm still holds the task: it is waiting, or
// running, or on its way to either (a requeue), rather than ended.
func (q QueueTask) Active() bool {
	switch q.State {
	case "PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "STOPPED":
		return true
	}
	return false
}

// Queue asks squeue for the tasks of the sweep's jobs, by unit index:
// those Slurm holds (QueueTask.Active) and those it remembers as ended
// (for MinJobAge). Tasks of the latest submission win over older ones for
// the same unit.
func Queue(ctx context.Context, subs []Submission) (map[int]QueueTask, error) {
	out := map[int]QueueTask{}
	if len(subs) == 0 {
		return out, nil
	}
	var jobs []string
	order := map[string]int{}
	for i, s := range subs {
		jobs = append(jobs, s.Job)
		order[s.Job] = i
	}
	data, err := slurmCmd(ctx, "squeue", "--noheader", "--array", "--states=all", "--jobs", strings.Join(jobs, ","), "--format", "%i|%T|%N")
	if err != nil {
		// squeue refuses job ids it no longer knows: all are done.
		if strings.Contains(err.Error(), "Invalid job id") {
			return out, nil
		}
		return nil, err
	}
	from := map[int]int{}
	for _, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(ln, "|")
		if len(f) < 3 {
			continue
		}
		job, task, ok := strings.Cut(f[0], "_")
		idx, err := strconv.Atoi(task)
		if !ok || err != nil {
			continue
		}
		if o, seen := from[idx]; seen && o > order[job] {
			continue
		}
		from[idx] = order[job]
		out[idx] = QueueTask{State: f[1], Node: f[2]}
	}
	return out, nil
}

// AddQueue fills in st's Slurm states from squeue; an error is kept in
// st.SlurmError rather than returned, since the files tell the rest.
func AddQueue(ctx context.Context, st *Status) {
	if len(st.Jobs) == 0 {
		return
	}
	q, err := Queue(ctx, st.Jobs)
	if err != nil {
		st.SlurmError = err.Error()
		return
	}
	st.applyQueue(q)
}

// applyQueue sets the units' Slurm states from q, by unit index.
func (st *Status) applyQueue(q map[int]QueueTask) {
	for i := range st.Units {
		u := &st.Units[i]
		if t, ok := q[u.Index]; ok {
			u.Slurm, u.Node, u.Queued = t.State, t.Node, t.Active()
		}
		// A unit whose worker died on a failed node, which Slurm has
		// requeued, waits for its next worker: pending, not failed.
		if u.Queued && u.State == StateFailed && !u.Permanent {
			st.Counts[StateFailed]--
			st.Counts[StatePending]++
			u.State = StatePending
		}
	}
}

// RequeueSelf asks Slurm to requeue the job this process runs in, for a
// worker stopped by the notice of its time limit: Slurm requeues on a node
// failure or a preemption by itself, but not on a time limit. It does
// nothing outside Slurm, after sweep cancel, or when the job's end is not
// near (a SIGTERM from a preemption or an scancel).
func RequeueSelf(ctx context.Context, dir string) (bool, error) {
	id := os.Getenv("SLURM_JOB_ID")
	if id == "" || exists(filepath.Join(dir, FileCancelled)) {
		return false, nil
	}
	out, err := slurmCmd(ctx, "squeue", "--noheader", "--jobs", id, "--format", "%e")
	if err != nil {
		return false, err
	}
	end, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(string(out)), time.Local)
	if err != nil || time.Until(end) > 3*time.Minute {
		return false, nil
	}
	if _, err := slurmCmd(ctx, "scontrol", "requeue", id); err != nil {
		return false, err
	}
	return true, nil
}
