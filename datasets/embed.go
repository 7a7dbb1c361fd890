package datasets

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoEmbeddings is wrapped by the errors EmbeddingSplitFile returns when
// a folder holds no embedding file for a split.
var ErrNoEmbeddings = errors.New("datasets: embedding file not found")

// DefaultEmbeddingsDir is where mkbench looks for pre-trained embeddings
// when the user names no folder: $MKBENCH_DATA/embeddings, else
// ./data/embeddings if it exists, else ../shared/data/embeddings if that
// exists, else ./data/embeddings. Its files are found by
// EmbeddingSplitFile.
func DefaultEmbeddingsDir() string { return defaultDataDir("embeddings") }

// EmbeddingOptions tunes LoadEmbeddings. The zero value finds the arrays
// by their usual names and keeps the features as stored.
type EmbeddingOptions struct {
	// Features and Labels name the arrays of an .npz file or the entries
	// of a pickled dict; "" tries the usual names (features: features,
	// embeddings, feats, x, X, data; labels: labels, targets, y, Y, and
	// LEO's keys, "<index>-<class>-<file>").
	Features, Labels string
	// LabelsFile is the .npy file of labels when the path given to
	// LoadEmbeddings is an .npy file of features.
	LabelsFile string
	// Normalize scales every feature vector to unit Euclidean length, as
	// LEO does with its embeddings before each episode.
	Normalize bool
}

// EmbeddingClass is one class of an EmbeddingSet.
type EmbeddingClass struct {
	Name     string // the label as text: a class name or an integer
	Examples int
	first    int
}

// EmbeddingSet is one split of pre-trained features (the paper's
// deep-embedding table: WRN-28-10 activations, 640 values per image): each
// example's feature vector, grouped by class. It implements ClassSource,
// so episodes are drawn from it directly, with InDim the feature width and
// no CNN. It is immutable and safe for concurrent use.
type EmbeddingSet struct {
	name, source string
	dim          int
	classes      []EmbeddingClass
	feats        []float32 // class-major, each class's examples in file order
	elapsed      time.Duration
}

func (e *EmbeddingSet) Family() string             { return "embeddings" }
func (e *EmbeddingSet) Name() string               { return e.name }
func (e *EmbeddingSet) Source() string             { return e.source }
func (e *EmbeddingSet) NumClasses() int            { return len(e.classes) }
func (e *EmbeddingSet) Class(i int) EmbeddingClass { return e.classes[i] }
func (e *EmbeddingSet) ImagesIn(i int) int         { return e.classes[i].Examples }
func (e *EmbeddingSet) InDim() int                 { return e.dim }
func (e *EmbeddingSet) Elapsed() time.Duration     { return e.elapsed }

// NumExamples is the number of feature vectors of all classes.
func (e *EmbeddingSet) NumExamples() int { return len(e.feats) / e.dim }

// Image writes the features of example k of class c into dst[:InDim()].
func (e *EmbeddingSet) Image(c, k int, dst []float64) {
	cl := e.classes[c]
	if k < 0 || k >= cl.Examples {
		panic(fmt.Sprintf("datasets: embedding class %q example %d out of range [0, %d)", cl.Name, k, cl.Examples))
	}
	src := e.feats[(cl.first+k)*e.dim:][:e.dim]
	dst = dst[:e.dim]
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// EmbeddingSplitFile finds the file of a split ("train", "val", "test") in
// dir, in the layouts embeddings are shared in: LEO's
// <split>_embeddings.pkl (embeddings/miniImageNet/center/ and
// tieredImageNet/center/), or <split>.npz, <split>_embeddings.npz,
// <split>.pkl.
func EmbeddingSplitFile(dir, split string) (string, error) {
	names := []string{split + "_embeddings.pkl", split + ".npz", split + "_embeddings.npz", split + ".pkl"}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s holds none of %s", ErrNoEmbeddings, dir, strings.Join(names, ", "))
}

// LoadEmbeddings reads one split of pre-trained features from path, which
// is
//   - an .npz archive (numpy.savez or savez_compressed) with a 2-D float32
//     or float64 array of features (examples × width) and a 1-D array of
//     labels (integers or strings);
//   - an .npy file of features, with opts.LabelsFile the .npy of labels;
//   - a pickle (.pkl) of a dict in LEO's format: 'embeddings' (a float32
//     array, examples × 640) and 'keys' ("<index>-<class>-<file>", the
//     class being the middle field, checked against the file name's
//     prefix as LEO does), or any dict of a feature and a label array.
//
// Classes are numbered in order of first appearance, each class's examples
// in file order. split names the set in errors and is its Name. Nothing is
// cached: the features are the decoded form.
func LoadEmbeddings(path, split string, opts EmbeddingOptions) (*EmbeddingSet, error) {
	start := time.Now()
	var feats, labels *npArray
	var featName, labelName string
	var leo bool
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".npz":
		arrays, names, err := readNpzFile(path)
		if err != nil {
			return nil, err
		}
		get := func(want string, usual []string, what string) (*npArray, string, error) {
			return pickArray(path, names, func(n string) (*npArray, bool) { a, ok := arrays[n]; return a, ok }, want, usual, what)
		}
		if feats, featName, err = get(opts.Features, featureNames, "features"); err != nil {
			return nil, err
		}
		if labels, labelName, err = get(opts.Labels, labelNames, "labels"); err != nil {
			return nil, err
		}
		leo = labelName == "keys"
	case ".npy":
		if opts.LabelsFile == "" {
			return nil, fmt.Errorf("datasets: %s is an .npy of features; its labels need their own .npy file (EmbeddingOptions.LabelsFile)", path)
		}
		var err error
		if feats, err = readNpyFile(path); err != nil {
			return nil, err
		}
		if labels, err = readNpyFile(opts.LabelsFile); err != nil {
			return nil, err
		}
		featName, labelName = path, opts.LabelsFile
	case ".pkl", ".pickle":
		data, err := readFileAtMost(path, maxArrayBytes)
		if err != nil {
			return nil, err
		}
		d, err := pickleDict(path, data)
		if err != nil {
			return nil, err
		}
		names := d.keyNames()
		get := func(want string, usual []string, what string) (*npArray, string, error) {
			return pickArray(path, names, func(n string) (*npArray, bool) {
				if _, ok := d.get(n); !ok {
					return nil, false
				}
				a, err := dictArray(path, d, n)
				return a, err == nil
			}, want, usual, what)
		}
		if feats, featName, err = get(opts.Features, featureNames, "features"); err != nil {
			return nil, err
		}
		if labels, labelName, err = get(opts.Labels, labelNames, "labels"); err != nil {
			return nil, err
		}
		leo = labelName == "keys"
	default:
		return nil, fmt.Errorf("datasets: %s: embeddings are read from .npz, .npy or .pkl files, not %q", path, ext)
	}
	where := func(name string) string {
		if name == path || name == opts.LabelsFile {
			return name
		}
		return fmt.Sprintf("%s: %q", path, name)
	}
	rows, cols, f, err := feats.floatMatrix(where(featName))
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	if rows == 0 || cols == 0 {
		return nil, fmt.Errorf("datasets: %s holds no features (shape %s)", where(featName), feats.shapeString())
	}
	lab, err := labels.labels(where(labelName))
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	if len(lab) != rows {
		return nil, fmt.Errorf("datasets: %s has %d labels for %d feature vectors", where(labelName), len(lab), rows)
	}
	if leo {
		for i, k := range lab {
			if lab[i], err = leoClass(k); err != nil {
				return nil, fmt.Errorf("datasets: %s[%d] = %q: %w", where(labelName), i, k, err)
			}
		}
	}
	if opts.Normalize {
		normalizeRows(f, cols)
	}
	return newEmbeddingSet(split, path, cols, f, lab, time.Since(start)), nil
}

var (
	featureNames = []string{"features", "embeddings", "feats", "x", "X", "data"}
	labelNames   = []string{"labels", "targets", "y", "Y", "keys"}
)

// pickArray finds the array called want, or else the one of the usual
// names present; two usual names present is ambiguous.
func pickArray(path string, names []string, get func(string) (*npArray, bool), want string, usual []string, what string) (*npArray, string, error) {
	if want != "" {
		a, ok := get(want)
		if !ok {
			return nil, "", fmt.Errorf("datasets: %s has no array %q (it has %s)", path, want, strings.Join(names, ", "))
		}
		return a, want, nil
	}
	var found []string
	for _, n := range usual {
		if _, ok := get(n); ok {
			found = append(found, n)
		}
	}
	// LEO's files hold both 'labels' and 'keys'; the keys carry the class
	// names, the labels only LEO-internal numbers.
	if len(found) == 2 && found[0] == "labels" && found[1] == "keys" {
		found = found[1:]
	}
	switch len(found) {
	case 1:
		a, _ := get(found[0])
		return a, found[0], nil
	case 0:
		return nil, "", fmt.Errorf("datasets: %s has no %s array (looked for %s; it has %s)", path, what, strings.Join(usual, ", "), strings.Join(names, ", "))
	}
	return nil, "", fmt.Errorf("datasets: %s has several candidate %s arrays (%s); name one in the options", path, what, strings.Join(found, ", "))
}

// leoClass returns the class of a LEO key "<index>-<class>-<file>", where
// the file name starts with the class and an underscore.
func leoClass(key string) (string, error) {
	parts := strings.Split(key, "-")
	if len(parts) != 3 || parts[1] == "" {
		return "", fmt.Errorf("not a LEO key <index>-<class>-<file>")
	}
	if prefix, _, _ := strings.Cut(parts[2], "_"); prefix != parts[1] {
		return "", fmt.Errorf("the file %s is not of class %s", parts[2], parts[1])
	}
	return parts[1], nil
}

// normalizeRows scales each row of m (cols wide) to unit length; an
// all-zero row stays zero.
func normalizeRows(m []float32, cols int) {
	for r := 0; r < len(m); r += cols {
		row := m[r : r+cols]
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		if s == 0 {
			continue
		}
		inv := 1 / math.Sqrt(s)
		for i, v := range row {
			row[i] = float32(float64(v) * inv)
		}
	}
}

// newEmbeddingSet groups the rows of f by label, classes in order of first
// appearance.
func newEmbeddingSet(split, source string, dim int, f []float32, labels []string, elapsed time.Duration) *EmbeddingSet {
	index := map[string]int{}
	var classes []EmbeddingClass
	for _, l := range labels {
		c, ok := index[l]
		if !ok {
			c = len(classes)
			index[l] = c
			classes = append(classes, EmbeddingClass{Name: l})
		}
		classes[c].Examples++
	}
	next := make([]int, len(classes))
	n := 0
	for c := range classes {
		classes[c].first = n
		next[c] = n
		n += classes[c].Examples
	}
	out := make([]float32, len(f))
	for r, l := range labels {
		c := index[l]
		copy(out[next[c]*dim:], f[r*dim:(r+1)*dim])
		next[c]++
	}
	return &EmbeddingSet{name: split, source: source, dim: dim, classes: classes, feats: out, elapsed: elapsed}
}
