package datasets

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Meta-Dataset's dataset_spec.json, read without TensorFlow. The three kinds
// and their fields are those of the reference's data/dataset_spec.py
// (DatasetSpecification, BiLevelDatasetSpecification,
// HierarchicalDatasetSpecification); the records they describe are written
// by dataset_conversion/dataset_to_records.py.

// MDSpecFile is the name of a source's specification in its records folder.
const MDSpecFile = "dataset_spec.json"

// Split names, in the order class ids are allotted (dataset_spec.py,
// get_classes: TRAIN is [0, n_train), VALID follows, then TEST).
const (
	MDTrain = "train"
	MDValid = "valid"
	MDTest  = "test"
)

// mdSplitKeys are the spec's keys for the splits, in MDTrain, MDValid,
// MDTest order.
var mdSplitKeys = [3]string{"TRAIN", "VALID", "TEST"}

// mdSplitIndex maps a split name to 0, 1, 2, or -1. "val" is accepted for
// "valid" because mkbench's other data sets call that split "val".
func mdSplitIndex(split string) int {
	switch split {
	case MDTrain:
		return 0
	case MDValid, "val":
		return 1
	case MDTest:
		return 2
	}
	return -1
}

// MDKind is a spec's __class__: how its classes are grouped.
type MDKind int

const (
	MDPlain        MDKind = iota // DatasetSpecification: a flat list of classes
	MDBiLevel                    // BiLevelDatasetSpecification: superclasses (Omniglot's alphabets)
	MDHierarchical               // HierarchicalDatasetSpecification: a WordNet DAG per split (ILSVRC)
)

var mdKindNames = [...]string{"DatasetSpecification", "BiLevelDatasetSpecification", "HierarchicalDatasetSpecification"}

// String is the kind's __class__ name.
func (k MDKind) String() string {
	if k >= 0 && int(k) < len(mdKindNames) {
		return mdKindNames[k]
	}
	return "MDKind(" + strconv.Itoa(int(k)) + ")"
}

// The two file patterns dataset_spec.py's initialize accepts: one file per
// class, or several per class (shards, or the train/valid/test pools).
const (
	mdPatternOne    = "{}.tfrecords"
	mdPatternShards = "{}_{}.tfrecords"
)

// MDSpec is one Meta-Dataset source as its dataset_spec.json describes it:
// its classes by split, the images of each class and the record files that
// hold them. Class ids are the spec's (absolute, contiguous per split).
// An MDSpec is read-only once loaded and safe for concurrent use.
type MDSpec struct {
	Name string
	Kind MDKind
	// Dir is the records folder; the spec's own path field is stale and
	// ignored, as the reference's loader ignores it.
	Dir string
	// File is the specification file read, for messages.
	File string
	// FilePattern is "{}.tfrecords" (one file per class, every released
	// source) or "{}_{}.tfrecords" (Sharded: several files per class,
	// merged into one pool).
	FilePattern string
	Sharded     bool

	images []int    // by class id, pools summed
	names  []string // by class id; "" where class_names has none
	first  [3]int   // first class id of each split
	count  [3]int   // classes in each split
	supers [3][]MDSuperclass
	dags   [3]*MDDAG

	shardOnce sync.Once
	shards    map[int][]string
}

// MDSuperclass is a bi-level spec's superclass: its classes are the
// contiguous ids First … First+Classes−1 (dataset_spec.py,
// get_class_ids_from_superclass_subclass_inds).
type MDSuperclass struct {
	ID      int
	Name    string
	First   int
	Classes int
}

// ClassIDs lists the superclass's class ids.
func (s MDSuperclass) ClassIDs() []int {
	ids := make([]int, s.Classes)
	for i := range ids {
		ids[i] = s.First + i
	}
	return ids
}

// LoadMetaDatasetSpec reads dir/dataset_spec.json, the specification of the
// Meta-Dataset source whose records are in dir.
func LoadMetaDatasetSpec(dir string) (*MDSpec, error) {
	return LoadMetaDatasetSpecFile(filepath.Join(dir, MDSpecFile), dir)
}

// LoadMetaDatasetSpecFile reads the specification file, for records in dir
// (which need not exist: see MissingFiles).
func LoadMetaDatasetSpecFile(file, dir string) (*MDSpec, error) {
	data, err := runfile.ReadBounded(file, runfile.MaxUserText)
	if err != nil {
		return nil, fmt.Errorf("datasets: meta-dataset spec: %w", err)
	}
	return parseMDSpec(data, file, dir)
}

// mdParser decodes one spec file's fields, naming the file and the field
// in every error.
type mdParser struct {
	file   string
	fields map[string]json.RawMessage
	// size is the file's length in bytes, the bound of every count it
	// holds: each class and superclass a count claims needs an entry of
	// its own in the file, so a count past its size is refused before
	// anything is sized by it.
	size int
}

// countOK refuses a count that the file is too small to list.
func (p *mdParser) countOK(field, what string, n int) error {
	if n > p.size {
		return p.errf(field, "%d %s, more than a spec of %d bytes can list", n, what, p.size)
	}
	return nil
}

func (p *mdParser) errf(field, format string, args ...any) error {
	return fmt.Errorf("datasets: meta-dataset spec %s: field %s: %s", p.file, field, fmt.Sprintf(format, args...))
}

// mdGet decodes a field; a missing one is an error only when required.
func mdGet[T any](p *mdParser, field string, required bool) (T, error) {
	var v T
	raw, ok := p.fields[field]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		if required {
			return v, p.errf(field, "missing")
		}
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, p.errf(field, "%v", err)
	}
	return v, nil
}

// mdSplitCounts reads a map of TRAIN, VALID and TEST to counts.
func mdSplitCounts(p *mdParser, field string) (out [3]int, err error) {
	m, err := mdGet[map[string]int](p, field, true)
	for k, v := range m {
		i := slices.Index(mdSplitKeys[:], k)
		if i < 0 || v < 0 {
			return out, p.errf(field, "%q: %d (want TRAIN, VALID and TEST, none negative)", k, v)
		}
		if err := p.countOK(field, "in split "+k, v); err != nil {
			return out, err
		}
		out[i] = v
	}
	for _, k := range mdSplitKeys {
		if _, ok := m[k]; !ok && err == nil {
			err = p.errf(field, "split %s missing", k)
		}
	}
	return out, err
}

// mdByID turns a map keyed by decimal ids into a slice indexed by id,
// requiring the ids 0 … n−1 (all of them when complete).
//
// Nothing of size n is allocated before the map's keys are known to fill
// it: n comes from counts elsewhere in the file, which may claim more ids
// than the field lists.
func mdByID[T any](p *mdParser, field string, m map[string]T, n int, what string, complete bool) ([]T, error) {
	if err := p.countOK(field, what+" ids", n); err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(m))
	for k := range m {
		id, err := strconv.Atoi(k)
		if err != nil || strconv.Itoa(id) != k {
			return nil, p.errf(field, "key %q is not a %s id", k, what)
		}
		if id < 0 || id >= n {
			return nil, p.errf(field, "%s id %d outside the splits (ids 0 to %d)", what, id, n-1)
		}
		ids = append(ids, id)
	}
	if complete && len(ids) < n {
		// Ids are distinct (map keys in canonical form): the first gap
		// in their order is the first missing.
		slices.Sort(ids)
		i := 0
		for i < len(ids) && ids[i] == i {
			i++
		}
		return nil, p.errf(field, "%s %d missing (the splits hold ids 0 to %d)", what, i, n-1)
	}
	out := make([]T, n)
	for k, v := range m {
		id, _ := strconv.Atoi(k)
		out[id] = v
	}
	return out, nil
}

// mdIDField reads a field keyed by ids 0 … n−1 (all of them when
// required).
func mdIDField[T any](p *mdParser, field string, n int, what string, required bool) ([]T, error) {
	m, err := mdGet[map[string]T](p, field, required)
	if err != nil {
		return nil, err
	}
	return mdByID(p, field, m, n, what, required)
}

func parseMDSpec(data []byte, file, dir string) (*MDSpec, error) {
	p := &mdParser{file: file, size: len(data)}
	if err := json.Unmarshal(data, &p.fields); err != nil {
		return nil, fmt.Errorf("datasets: meta-dataset spec %s: %v", file, err)
	}
	s := &MDSpec{Dir: dir, File: file}
	class, err := mdGet[string](p, "__class__", true)
	if err != nil {
		return nil, err
	}
	k := slices.Index(mdKindNames[:], class)
	if k < 0 {
		return nil, p.errf("__class__", "unknown kind %q (want %s)", class, strings.Join(mdKindNames[:], ", "))
	}
	s.Kind = MDKind(k)
	if s.Name, err = mdGet[string](p, "name", true); err == nil && s.Name == "" {
		err = p.errf("name", "empty")
	}
	if err != nil {
		return nil, err
	}
	if s.FilePattern, err = mdGet[string](p, "file_pattern", true); err != nil {
		return nil, err
	}
	if s.Sharded = s.FilePattern == mdPatternShards; !s.Sharded && s.FilePattern != mdPatternOne {
		return nil, p.errf("file_pattern", "%q (want %q or %q)", s.FilePattern, mdPatternOne, mdPatternShards)
	}
	var counts [3]int
	switch s.Kind {
	case MDPlain:
		counts, err = mdSplitCounts(p, "classes_per_split")
	case MDBiLevel:
		counts, err = s.parseSuperclasses(p)
	case MDHierarchical:
		if err := s.parseHierarchical(p); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	n := s.setSplits(counts)
	if err := s.parseImages(p, n); err != nil {
		return nil, err
	}
	if s.names, err = mdIDField[string](p, "class_names", n, "class", false); err != nil {
		return nil, err
	}
	return s, nil
}

// setSplits lays the splits' classes out contiguously, TRAIN first
// (dataset_spec.py, get_classes), and returns the number of classes.
func (s *MDSpec) setSplits(counts [3]int) int {
	n := 0
	for i, c := range counts {
		s.first[i], s.count[i] = n, c
		n += c
	}
	return n
}

// parseSuperclasses reads a bi-level spec's superclasses and returns the
// classes of each split.
func (s *MDSpec) parseSuperclasses(p *mdParser) (counts [3]int, err error) {
	supers, err := mdSplitCounts(p, "superclasses_per_split")
	if err != nil {
		return counts, err
	}
	n := supers[0] + supers[1] + supers[2]
	sizes, err := mdIDField[int](p, "classes_per_superclass", n, "superclass", true)
	if err != nil {
		return counts, err
	}
	names, err := mdIDField[string](p, "superclass_names", n, "superclass", false)
	if err != nil {
		return counts, err
	}
	// Superclasses are contiguous per split and their classes contiguous
	// in superclass order, so a superclass's first class is the count of
	// all classes before it (dataset_spec.py,
	// _count_classes_in_superclasses).
	id, first := 0, 0
	for split, ns := range supers {
		for range ns {
			if sizes[id] < 0 {
				return counts, p.errf("classes_per_superclass", "superclass %d has %d classes", id, sizes[id])
			}
			// Each class is at most the file's size, so the sums below
			// stay far from overflowing.
			if err := p.countOK("classes_per_superclass", fmt.Sprintf("classes in superclass %d", id), sizes[id]); err != nil {
				return counts, err
			}
			s.supers[split] = append(s.supers[split], MDSuperclass{ID: id, Name: names[id], First: first, Classes: sizes[id]})
			counts[split] += sizes[id]
			first += sizes[id]
			id++
		}
	}
	return counts, nil
}

// parseImages reads images_per_class for n classes, each a count or a map
// of pool to count (summed: the pools are merged into one).
func (s *MDSpec) parseImages(p *mdParser, n int) error {
	const field = "images_per_class"
	vals, err := mdIDField[json.RawMessage](p, field, n, "class", true)
	if err != nil {
		return err
	}
	s.images = make([]int, n)
	for id, v := range vals {
		var c int
		if json.Unmarshal(v, &c) != nil {
			var pools map[string]int
			if err := json.Unmarshal(v, &pools); err != nil || len(pools) == 0 {
				return p.errf(field, "class %d: %s is neither a count nor a map of pools to counts", id, v)
			}
			for pool, pc := range pools {
				if pc < 0 {
					return p.errf(field, "class %d: pool %q has %d images", id, pool, pc)
				}
				c += pc
			}
		}
		if c < 0 {
			return p.errf(field, "class %d has %d images", id, c)
		}
		s.images[id] = c
	}
	return nil
}

// NumClasses is the number of classes in all splits.
func (s *MDSpec) NumClasses() int { return len(s.images) }

// Classes lists the class ids of a split ("train", "valid" or "test"), in
// order; nil for an unknown split.
func (s *MDSpec) Classes(split string) []int {
	i := mdSplitIndex(split)
	if i < 0 {
		return nil
	}
	ids := make([]int, s.count[i])
	for j := range ids {
		ids[j] = s.first[i] + j
	}
	return ids
}

// Images is the number of images of a class (all its pools together).
func (s *MDSpec) Images(class int) int { return s.images[class] }

// ClassName is class_names' entry for a class (the wn_id for ILSVRC).
func (s *MDSpec) ClassName(class int) string { return s.names[class] }

// Superclasses lists a bi-level spec's superclasses of a split; nil for the
// other kinds.
func (s *MDSpec) Superclasses(split string) []MDSuperclass {
	if i := mdSplitIndex(split); i >= 0 {
		return s.supers[i]
	}
	return nil
}

// DAG is a hierarchical spec's graph of a split; nil for the other kinds.
func (s *MDSpec) DAG(split string) *MDDAG {
	if i := mdSplitIndex(split); i >= 0 {
		return s.dags[i]
	}
	return nil
}

// ClassFiles lists the record files of a class: Dir/<id>.tfrecords, or for
// the sharded pattern the files Dir/<id>_<shard>.tfrecords found there
// (shard a number, or one of train, valid, test; numbers first), read from
// the folder once, at the first call. It checks nothing else on disk.
func (s *MDSpec) ClassFiles(class int) []string {
	if class < 0 || class >= len(s.images) {
		return nil
	}
	if !s.Sharded {
		return []string{filepath.Join(s.Dir, strconv.Itoa(class)+".tfrecords")}
	}
	s.shardOnce.Do(func() { s.shards = s.listShards() })
	return slices.Clone(s.shards[class])
}

// listShards maps class ids to their files <id>_<shard>.tfrecords, shards
// that are numbers first, in numeric order, then train, valid, test. The
// reference's reader (reader.py, construct_class_datasets) refuses sharded
// files; the notes merge a class's files into one pool.
func (s *MDSpec) listShards() map[int][]string {
	entries, _ := os.ReadDir(s.Dir)
	type shard struct {
		id, key int
		path    string
	}
	var all []shard
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".tfrecords")
		head, tail, ok2 := strings.Cut(base, "_")
		id, err := strconv.Atoi(head)
		if !ok || !ok2 || err != nil || strconv.Itoa(id) != head || id >= len(s.images) || e.IsDir() {
			continue
		}
		key := slices.Index([]string{"train", "valid", "test"}, tail)
		if key >= 0 {
			key += 1 << 40
		} else if key, err = strconv.Atoi(tail); err != nil || strings.Trim(tail, "0123456789") != "" {
			continue
		}
		all = append(all, shard{id, key, filepath.Join(s.Dir, e.Name())})
	}
	slices.SortFunc(all, func(a, b shard) int { return cmp.Or(a.id-b.id, a.key-b.key) })
	out := map[int][]string{}
	for _, f := range all {
		out[f.id] = append(out[f.id], f.path)
	}
	return out
}

// MissingFiles lists, by class id, the record files the spec names that do
// not exist (for the sharded pattern, Dir/<id>_*.tfrecords for a class with
// none). Nil means every class has its records.
func (s *MDSpec) MissingFiles() []string {
	var missing []string
	for id := range s.images {
		files := s.ClassFiles(id)
		if s.Sharded && len(files) == 0 {
			missing = append(missing, filepath.Join(s.Dir, strconv.Itoa(id)+"_*.tfrecords"))
		}
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				missing = append(missing, f)
			}
		}
	}
	return missing
}
