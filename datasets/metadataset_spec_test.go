package datasets

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
)

// mdSpecsDir is the folder of Meta-Dataset's ten released spec files
// (<source>_dataset_spec.json); without it the tests that read them skip
// (fail with CI=true).
func mdSpecsDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(testutil.Data(tb, "metadataset"), "specs")
}

// mdSources are the ten sources, in the notes' order.
var mdSources = []string{"ilsvrc_2012", "omniglot", "aircraft", "cu_birds", "dtd", "quickdraw", "fungi", "vgg_flower", "traffic_sign", "mscoco"}

var mdRealSpecs struct {
	sync.Mutex
	m map[string]*MDSpec
}

// realMDSpec loads a released spec once per test binary, its records
// folder one that does not exist.
func realMDSpec(tb testing.TB, name string) *MDSpec {
	tb.Helper()
	dir := mdSpecsDir(tb)
	mdRealSpecs.Lock()
	defer mdRealSpecs.Unlock()
	if s := mdRealSpecs.m[name]; s != nil {
		return s
	}
	s, err := LoadMetaDatasetSpecFile(filepath.Join(dir, name+"_dataset_spec.json"), filepath.Join("no-records", name))
	if err != nil {
		tb.Fatal(err)
	}
	if mdRealSpecs.m == nil {
		mdRealSpecs.m = map[string]*MDSpec{}
	}
	mdRealSpecs.m[name] = s
	return s
}

// TestMetaDatasetSpecsReal checks every released spec against the notes'
// table: kind, classes per split (contiguous, TRAIN first), images.
func TestMetaDatasetSpecsReal(t *testing.T) {
	mdSpecsDir(t) // one skip (or CI failure) for the test, not one per source
	for _, c := range []struct {
		name    string
		kind    MDKind
		classes [3]int
		images  int
		fewest  int
	}{
		{"ilsvrc_2012", MDHierarchical, [3]int{712, 158, 130}, 1280764, 732},
		{"omniglot", MDBiLevel, [3]int{883, 81, 659}, 32460, 20},
		{"aircraft", MDPlain, [3]int{70, 15, 15}, 10000, 100},
		{"cu_birds", MDPlain, [3]int{140, 30, 30}, 11788, 41},
		{"dtd", MDPlain, [3]int{33, 7, 7}, 5640, 120},
		{"quickdraw", MDPlain, [3]int{241, 52, 52}, 50426266, 113613},
		{"fungi", MDPlain, [3]int{994, 200, 200}, 89760, 6},
		{"vgg_flower", MDPlain, [3]int{71, 15, 16}, 8189, 40},
		{"traffic_sign", MDPlain, [3]int{0, 0, 43}, 39209, 210},
		{"mscoco", MDPlain, [3]int{0, 40, 40}, 860001, 198},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := realMDSpec(t, c.name)
			if s.Name != c.name || s.Kind != c.kind || s.FilePattern != "{}.tfrecords" || s.Sharded {
				t.Fatalf("name %q kind %v pattern %q sharded %v, want %q %v {}.tfrecords", s.Name, s.Kind, s.FilePattern, s.Sharded, c.name, c.kind)
			}
			next, images, fewest := 0, 0, int(^uint(0)>>1)
			for i, split := range []string{MDTrain, MDValid, MDTest} {
				ids := s.Classes(split)
				if len(ids) != c.classes[i] {
					t.Errorf("%s: %d classes, want %d", split, len(ids), c.classes[i])
				}
				for _, id := range ids {
					if id != next {
						t.Fatalf("%s: class %d where %d was due", split, id, next)
					}
					next++
					images += s.Images(id)
					fewest = min(fewest, s.Images(id))
				}
			}
			if next != s.NumClasses() || images != c.images || fewest != c.fewest {
				t.Errorf("%d of %d classes, %d images (fewest %d), want %d (fewest %d)", next, s.NumClasses(), images, fewest, c.images, c.fewest)
			}
			if s.ClassName(0) == "" {
				t.Error("class 0 has no name")
			}
			if got, want := s.ClassFiles(0), []string{filepath.Join("no-records", c.name, "0.tfrecords")}; !slices.Equal(got, want) {
				t.Errorf("ClassFiles(0) = %q, want %q", got, want)
			}
			if got := s.MissingFiles(); len(got) != s.NumClasses() {
				t.Errorf("%d missing files of %d classes without records", len(got), s.NumClasses())
			}
			if s.Classes("nonsense") != nil || s.ClassFiles(-1) != nil || s.ClassFiles(s.NumClasses()) != nil {
				t.Error("an unknown split or class gave something")
			}
		})
	}
}

// TestMetaDatasetSpecOmniglot checks the bi-level layout: 25/5/20
// alphabets, the first class of alphabet s the count of classes before it,
// a split's classes its alphabets' in order.
func TestMetaDatasetSpecOmniglot(t *testing.T) {
	s := realMDSpec(t, "omniglot")
	first := 0
	for i, c := range []struct {
		split        string
		superclasses int
		name0        string
	}{{MDTrain, 25, "Anglo-Saxon_Futhorc"}, {MDValid, 5, "Blackfoot_(Canadian_Aboriginal_Syllabics)"}, {MDTest, 20, "Angelic"}} {
		sc := s.Superclasses(c.split)
		if len(sc) != c.superclasses || sc[0].Name != c.name0 {
			t.Fatalf("%s: %d superclasses, first %q; want %d, %q", c.split, len(sc), sc[0].Name, c.superclasses, c.name0)
		}
		var ids []int
		for j, x := range sc {
			if x.First != first || (i == 0 && x.ID != j) {
				t.Errorf("%s superclass %d (id %d) starts at class %d, want %d", c.split, j, x.ID, x.First, first)
			}
			first += x.Classes
			ids = append(ids, x.ClassIDs()...)
		}
		if !slices.Equal(ids, s.Classes(c.split)) {
			t.Errorf("%s: the superclasses' classes are not the split's", c.split)
		}
	}
	if s.DAG(MDTrain) != nil || realMDSpec(t, "aircraft").Superclasses(MDTrain) != nil {
		t.Error("a DAG for a bi-level spec, or superclasses for a plain one")
	}
}

// TestMetaDatasetSpecILSVRC checks the DAGs against counts computed from
// the JSON independently (Python): nodes, leaves and eligible nodes
// (internal, spanning 5 to 392 leaves) per split.
func TestMetaDatasetSpecILSVRC(t *testing.T) {
	s := realMDSpec(t, "ilsvrc_2012")
	for _, c := range []struct {
		split                    string
		nodes, eligible, maxSpan int
		root                     string
	}{
		{MDTrain, 1011, 113, 392, "n00001740"},
		{MDValid, 200, 18, 158, "n02075296"},
		{MDTest, 180, 15, 130, "n03183080"},
	} {
		d := s.DAG(c.split)
		classes := s.Classes(c.split)
		if len(d.Nodes) != c.nodes || len(d.Eligible) != c.eligible {
			t.Errorf("%s: %d nodes, %d eligible; want %d, %d", c.split, len(d.Nodes), len(d.Eligible), c.nodes, c.eligible)
		}
		if root := d.Node(c.root); root == nil || len(root.Parents) != 0 || !slices.Equal(mdSorted(root.Leaves), classes) {
			t.Errorf("%s: root %s does not span the split's classes", c.split, c.root)
		}
		if !slices.IsSortedFunc(d.Nodes, func(a, b MDNode) int { return strings.Compare(a.WNID, b.WNID) }) || !slices.IsSorted(d.Eligible) {
			t.Errorf("%s: nodes or eligible nodes not in wn_id order", c.split)
		}
		covered := map[int]bool{}
		maxSpan := 0
		for _, e := range d.Eligible {
			nd := d.Nodes[e]
			if len(nd.Children) == 0 || len(nd.Leaves) < 5 || len(nd.Leaves) > 392 {
				t.Fatalf("%s: %s is eligible with %d children, %d leaves", c.split, nd.WNID, len(nd.Children), len(nd.Leaves))
			}
			maxSpan = max(maxSpan, len(nd.Leaves))
			for _, l := range nd.Leaves {
				covered[l] = true
			}
		}
		if len(covered) != len(classes) || maxSpan != c.maxSpan {
			t.Errorf("%s: eligible nodes reach %d of %d classes, widest %d (want all, %d)", c.split, len(covered), len(classes), maxSpan, c.maxSpan)
		}
		for _, nd := range d.Nodes {
			images := 0
			for _, l := range nd.Leaves {
				images += s.Images(l)
			}
			if images != nd.Images {
				t.Fatalf("%s: %s spans %d images, says %d", c.split, nd.WNID, images, nd.Images)
			}
			wn := make([]string, len(nd.Leaves))
			for i, l := range nd.Leaves {
				wn[i] = s.ClassName(l)
			}
			if !slices.IsSorted(wn) {
				t.Fatalf("%s: leaves of %s not in wn_id order", c.split, nd.WNID)
			}
			if len(nd.Children) == 0 && (nd.Class < 0 || s.ClassName(nd.Class) != nd.WNID || !slices.Equal(nd.Leaves, []int{nd.Class})) {
				t.Fatalf("%s: leaf %s is class %d named %q", c.split, nd.WNID, nd.Class, s.ClassName(nd.Class))
			}
		}
	}
}

func mdSorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestMetaDatasetSpecDir loads dir/dataset_spec.json (with its stale path)
// and lists exactly the record files that are missing.
func TestMetaDatasetSpecDir(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(mdSpecsDir(t), "dtd_dataset_spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, MDSpecFile), data)
	for id := range 47 {
		if id != 3 && id != 40 {
			writeFile(t, filepath.Join(dir, strconv.Itoa(id)+".tfrecords"), nil)
		}
	}
	s, err := LoadMetaDatasetSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "3.tfrecords"), filepath.Join(dir, "40.tfrecords")}
	if s.Dir != dir || s.File != filepath.Join(dir, MDSpecFile) || !slices.Equal(s.MissingFiles(), want) {
		t.Errorf("dir %q file %q missing %q; want %q, %q", s.Dir, s.File, s.MissingFiles(), dir, want)
	}
}

func mdJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMetaDatasetSpecSharded reads the pool form of images_per_class and
// the {}_{} pattern: a class's shards, numbers first in numeric order,
// then the pools.
func TestMetaDatasetSpecSharded(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, MDSpecFile), []byte(`{"__class__": "DatasetSpecification", "name": "toy",
		"classes_per_split": {"TRAIN": 2, "VALID": 0, "TEST": 1}, "file_pattern": "{}_{}.tfrecords",
		"images_per_class": {"0": {"train": 5, "test": 3}, "1": 7, "2": {"0": 1, "1": 2}}, "path": "/stale"}`))
	for _, f := range []string{"0_10", "0_2", "0_0", "1_test", "1_train", "12_0", "0_x"} {
		writeFile(t, filepath.Join(dir, f+".tfrecords"), nil)
	}
	s, err := LoadMetaDatasetSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Sharded || s.Images(0) != 8 || s.Images(1) != 7 || s.Images(2) != 3 {
		t.Errorf("sharded %v, images %d %d %d; want true, 8 7 3", s.Sharded, s.Images(0), s.Images(1), s.Images(2))
	}
	files := func(names ...string) []string {
		for i, n := range names {
			names[i] = filepath.Join(dir, n+".tfrecords")
		}
		return names
	}
	if got, want := s.ClassFiles(0), files("0_0", "0_2", "0_10"); !slices.Equal(got, want) {
		t.Errorf("ClassFiles(0) = %q, want %q", got, want)
	}
	if got, want := s.ClassFiles(1), files("1_train", "1_test"); !slices.Equal(got, want) {
		t.Errorf("ClassFiles(1) = %q, want %q", got, want)
	}
	if got, want := s.MissingFiles(), []string{filepath.Join(dir, "2_*.tfrecords")}; !slices.Equal(got, want) {
		t.Errorf("MissingFiles = %q, want %q", got, want)
	}
}

// TestMetaDatasetSpecErrors feeds broken specs: each error names the file
// and the field at fault.
func TestMetaDatasetSpecErrors(t *testing.T) {
	plain := `"__class__": "DatasetSpecification", "name": "toy", "file_pattern": "{}.tfrecords"`
	split := `"classes_per_split": {"TRAIN": 2, "VALID": 0, "TEST": 1}`
	hier := `"__class__": "HierarchicalDatasetSpecification", "name": "toy", "file_pattern": "{}.tfrecords"`
	node := func(id string, children, parents []string) string {
		return mdJSON(map[string]any{"wn_id": id, "words": id, "children_ids": children, "parents_ids": parents})
	}
	// A DAG per split: TRAIN root r over leaves a, b; VALID and TEST one
	// leaf each.
	graphs := func(train string) string {
		return `"split_subgraphs": {"TRAIN": [` + train + `], "VALID": [` + node("v", nil, nil) + `], "TEST": [` + node("t", nil, nil) + `]}`
	}
	trainOK := node("r", []string{"a", "b"}, nil) + "," + node("a", nil, []string{"r"}) + "," + node("b", nil, []string{"r"})
	images := `"images_per_class": {"TRAIN": {"r": 5, "a": 2, "b": 3}, "VALID": {"v": 1}, "TEST": {"t": 1}}`
	names := `"class_names": {"0": "a", "1": "b", "2": "v", "3": "t"}`
	for _, c := range []struct{ name, json, field, msg string }{
		{"not JSON", `{"__class__": `, "", "unexpected end"},
		{"no kind", `{"name": "toy"}`, "__class__", "missing"},
		{"unknown kind", `{"__class__": "FancySpecification"}`, "__class__", "unknown kind"},
		{"bad pattern", `{"__class__": "DatasetSpecification", "name": "toy", "file_pattern": "{}.tfrecord"}`, "file_pattern", `"{}.tfrecord"`},
		{"split missing", `{` + plain + `, "classes_per_split": {"TRAIN": 2, "TEST": 1}}`, "classes_per_split", "VALID missing"},
		{"class outside", `{` + plain + `, ` + split + `, "images_per_class": {"0": 1, "1": 1, "2": 1, "3": 1}}`, "images_per_class", "class id 3 outside the splits"},
		{"class missing", `{` + plain + `, ` + split + `, "images_per_class": {"0": 1, "2": 1}}`, "images_per_class", "class 1 missing"},
		{"bad count", `{` + plain + `, ` + split + `, "images_per_class": {"0": 1, "1": "many", "2": 1}}`, "images_per_class", "class 1"},
		{"name outside", `{` + plain + `, ` + split + `, "images_per_class": {"0": 1, "1": 1, "2": 1}, "class_names": {"7": "x"}}`, "class_names", "class id 7 outside"},
		{"superclass missing", `{"__class__": "BiLevelDatasetSpecification", "name": "toy", "file_pattern": "{}.tfrecords",
			"superclasses_per_split": {"TRAIN": 1, "VALID": 0, "TEST": 1}, "classes_per_superclass": {"0": 2}}`, "classes_per_superclass", "superclass 1 missing"},
		{"leaf without class", `{` + hier + `, ` + graphs(trainOK) + `, ` + images + `, "class_names": {"0": "a", "1": "z", "2": "v", "3": "t"}}`, "class_names", "leaf b"},
		{"class outside split", `{` + hier + `, ` + graphs(trainOK) + `, ` + images + `, "class_names": {"0": "a", "1": "v", "2": "b", "3": "t"}}`, "class_names", "whose class ids are 0 to 1"},
		{"child elsewhere", `{` + hier + `, ` + graphs(node("r", []string{"a", "q"}, nil)+","+node("a", nil, []string{"r"})) + `, ` + images + `, ` + names + `}`, "split_subgraphs", "q, not a node"},
		{"one-sided edge", `{` + hier + `, ` + graphs(node("r", []string{"a", "b"}, nil)+","+node("a", nil, []string{"r"})+","+node("b", nil, nil)) + `, ` + images + `, ` + names + `}`, "split_subgraphs", "does not list it as a parent"},
		{"cycle", `{` + hier + `, ` + graphs(node("r", []string{"s"}, []string{"s"})+","+node("s", []string{"r"}, []string{"r"})) + `, ` + images + `, ` + names + `}`, "split_subgraphs", "cycle"},
		{"inconsistent count", `{` + hier + `, ` + graphs(trainOK) + `, "images_per_class": {"TRAIN": {"r": 9, "a": 2, "b": 3}, "VALID": {"v": 1}, "TEST": {"t": 1}}, ` + names + `}`, "images_per_class", "spans 5 images, its count says 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, MDSpecFile)
			writeFile(t, file, []byte(c.json))
			_, err := LoadMetaDatasetSpec(dir)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "datasets: ") || !strings.Contains(msg, file) || !strings.Contains(msg, c.field) || !strings.Contains(msg, c.msg) {
				t.Errorf("error %q does not name %s, field %q and %q", msg, file, c.field, c.msg)
			}
		})
	}
	// The same toy hierarchy, unbroken, loads.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, MDSpecFile), []byte(`{`+hier+`, `+graphs(trainOK)+`, `+images+`, `+names+`}`))
	s, err := LoadMetaDatasetSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.DAG(MDTrain).Node("r"); r == nil || !slices.Equal(r.Leaves, []int{0, 1}) || r.Images != 5 || s.Images(1) != 3 || len(s.Classes(MDTest)) != 1 {
		t.Errorf("toy hierarchy read as %+v", r)
	}
	if _, err := LoadMetaDatasetSpec(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "absent") {
		t.Errorf("a missing spec gave %v", err)
	}
}

// Counts in a spec are checked against the file before anything is sized
// by them: superclasses_per_split of 10⁹ (8 GB of class ids and a
// gigabyte of flags before its error, once) or classes_per_split of 2⁶²
// are refused for claiming more than the file can list, allocating about
// what parsing the file takes.
func TestMetaDatasetSpecCountsBounded(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(mdSpecsDir(t), "omniglot_dataset_spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(orig, &spec); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, field string
		edit        func(m map[string]any)
	}{
		{"superclasses 1e9", "superclasses_per_split", func(m map[string]any) {
			m["superclasses_per_split"].(map[string]any)["TRAIN"] = 1e9
		}},
		{"superclasses 2^62", "superclasses_per_split", func(m map[string]any) {
			m["superclasses_per_split"].(map[string]any)["VALID"] = 1 << 62
		}},
		{"classes of a superclass", "classes_per_superclass", func(m map[string]any) {
			m["classes_per_superclass"].(map[string]any)["3"] = 1 << 62
		}},
		{"classes 1e9", "classes_per_split", func(m map[string]any) {
			m["__class__"] = "DatasetSpecification"
			m["classes_per_split"] = map[string]any{"TRAIN": 1e9, "VALID": 1, "TEST": 1}
		}},
		{"classes that sum past the file", "images_per_class", func(m map[string]any) {
			m["__class__"] = "DatasetSpecification"
			m["classes_per_split"] = map[string]any{"TRAIN": 40000, "VALID": 40000, "TEST": 40000}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{}
			for k, v := range spec {
				m[k] = v
			}
			sps := map[string]any{}
			for k, v := range spec["superclasses_per_split"].(map[string]any) {
				sps[k] = v
			}
			cps := map[string]any{}
			for k, v := range spec["classes_per_superclass"].(map[string]any) {
				cps[k] = v
			}
			m["superclasses_per_split"], m["classes_per_superclass"] = sps, cps
			c.edit(m)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, MDSpecFile), data)
			allocBound(t, 1<<20+64*uint64(len(data)), "LoadMetaDatasetSpec", func() { _, err = LoadMetaDatasetSpec(dir) })
			if err == nil || !strings.Contains(err.Error(), "field "+c.field) {
				t.Fatalf("got %v, want an error about %s", err, c.field)
			}
		})
	}
}

// A spec file past runfile.MaxUserText is refused by its size, unread.
func TestMetaDatasetSpecTooLarge(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, MDSpecFile)
	writeFile(t, file, []byte(`{"__class__": "DatasetSpecification"}`))
	if err := os.Truncate(file, runfile.MaxUserText+1); err != nil {
		t.Fatal(err)
	}
	var err error
	allocBound(t, 1<<20, "LoadMetaDatasetSpec", func() { _, err = LoadMetaDatasetSpec(dir) })
	if !errors.Is(err, runfile.ErrTooLarge) || !strings.Contains(err.Error(), file) {
		t.Fatalf("got %v", err)
	}
}
