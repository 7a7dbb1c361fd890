package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dataSet is what a test needs of one data set folder.
type dataSet struct {
	what  string     // the data in words, as the skip line names it
	files [][]string // each must exist in the folder under one of its names
	get   string     // where a developer gets it
}

// sets are the data sets tests use that the repository does not ship
// (their licenses or sizes keep them out), by their folder names under
// $MKBENCH_DATA, ./data or ../shared/data: the names mkbench itself looks
// for.
var sets = map[string]dataSet{
	"omniglot": {
		what:  "the Omniglot zips",
		files: [][]string{{"images_background.zip", "images_background"}, {"images_evaluation.zip", "images_evaluation"}},
		get:   "get them with: mkbench data get omniglot",
	},
	"miniimagenet": {
		what:  "the Ravi & Larochelle split files",
		files: [][]string{{filepath.Join("splits", "ravi", "train.csv")}, {filepath.Join("splits", "ravi", "val.csv")}, {filepath.Join("splits", "ravi", "test.csv")}},
		get:   "from twitter/meta-learning-lstm's data/miniImagenet, into splits/ravi/",
	},
	"metadataset": {
		what:  "Meta-Dataset's released spec files",
		files: [][]string{{filepath.Join("specs", "ilsvrc_2012_dataset_spec.json")}},
		get:   "from google-research/meta-dataset's dataset_conversion/dataset_specs, into specs/",
	},
}

// Data is the folder of the data set called set (omniglot, metadataset,
// miniimagenet), holding its files and any extra ones named (slash-separated
// paths inside the folder; naming one of the set's own, such as
// images_background.zip, asks for that form of it rather than another). It is looked for where mkbench looks when no
// --data is given: $MKBENCH_DATA/set when MKBENCH_DATA is set, else
// ./data/set or ../shared/data/set from the module's root. When it is not
// there, Need skips the test (fails it with CI=true) with one line saying
// what the test needs and where it looked.
func Data(tb testing.TB, set string, extra ...string) string {
	tb.Helper()
	if _, ok := sets[set]; !ok {
		tb.Fatalf("testutil: no data set %q is known (see sets in internal/testutil/data.go)", set)
	}
	dir, err := findData(set, extra...)
	if err != nil {
		Need(tb, "%v", err)
	}
	return dir
}

// Need ends a test that lacks something this machine does not have (a data
// set, a tool), with the one line the message makes: a skip, or with CI
// set true a failure, so that a CI run missing it cannot pass by skipping.
func Need(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		tb.Fatalf("%s (CI=true: a test that lacks what it needs fails)", msg)
	}
	tb.Skip(msg)
}

// inCI reports whether the CI variable says the tests run in CI (true, 1,
// TRUE…, as strconv.ParseBool reads it).
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// findData is Data's search, as an error naming what is missing where.
func findData(set string, extra ...string) (string, error) {
	s := sets[set]
	// An extra file that is one of the set's own names (a test that needs
	// the zips rather than an unpacked copy) narrows that entry; the others
	// are needed besides, and named.
	need := slices.Clone(s.files)
	var named []string
	for _, e := range extra {
		e = filepath.FromSlash(e)
		if i := slices.IndexFunc(need, func(names []string) bool { return slices.Contains(names, e) }); i >= 0 {
			need[i] = []string{e}
			continue
		}
		need = append(need, []string{e})
		named = append(named, filepath.ToSlash(e))
	}
	var tried []string
	for _, p := range dataDirs(set) {
		if p.dir != "" && hasAll(p.dir, need) {
			return filepath.Abs(p.dir)
		}
		tried = append(tried, p.name)
	}
	what := s.what
	if len(named) > 0 {
		what += " and " + strings.Join(named, ", ")
	}
	return "", fmt.Errorf("needs %s in %s (%s)", what, strings.Join(tried, " or "), s.get)
}

// place is a folder a data set may be in, with the name a skip line gives it.
type place struct{ dir, name string }

// dataDirs are the folders the data set may be in, in mkbench's order
// (./data and ../shared/data from the module's root), each named as a
// developer knows it rather than by a long absolute path. Without
// MKBENCH_DATA the last entry, with no folder, only names the variable.
func dataDirs(set string) []place {
	if d := os.Getenv("MKBENCH_DATA"); d != "" {
		dir := filepath.Join(d, set)
		return []place{{dir, "$MKBENCH_DATA/" + set + " (" + dir + ")"}}
	}
	root, err := moduleRoot()
	if err != nil {
		// Not inside the module: the conventional places, relative.
		root = "."
	}
	return []place{
		{filepath.Join(root, "data", set), "./data/" + set},
		{filepath.Join(root, "..", "shared", "data", set), "../shared/data/" + set},
		{"", "$MKBENCH_DATA/" + set},
	}
}

// hasAll reports whether dir holds one of the names of each entry of need.
func hasAll(dir string, need [][]string) bool {
	for _, names := range need {
		found := false
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// moduleRoot is the folder of the go.mod above the working directory (a
// test runs in its package's folder).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("testutil: no go.mod above the working directory")
		}
		dir = up
	}
}
