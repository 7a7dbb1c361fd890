package tfrecord

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"
)

// The fixtures were written by Node packages (see the gen.mjs next to each),
// so these tests check our reading of someone else's bytes, not a round
// trip through our own writer.

func TestThreeFromNode(t *testing.T) {
	var want []struct {
		Label       int64     `json:"label"`
		Name        *string   `json:"name"`
		Weight      []float32 `json:"weight"`
		Offsets     []int64   `json:"offsets"`
		RecordLen   int       `json:"record_len"`
		ImageLen    int       `json:"image_len"`
		ImageSHA256 string    `json:"image_sha256"`
		Width       int       `json:"image_width"`
		Height      int       `json:"image_height"`
		Gray        bool      `json:"image_gray"`
	}
	readJSON(t, "testdata/three.json", &want)
	recs, err := ReadFile("testdata/three.tfrecords")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if len(recs[i]) != w.RecordLen {
			t.Errorf("record %d: %d bytes, want %d", i, len(recs[i]), w.RecordLen)
		}
		e, err := DecodeExample(recs[i])
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if label, err := e.OneInt64("label"); err != nil || label != w.Label {
			t.Errorf("record %d: label %d, %v; want %d", i, label, err, w.Label)
		}
		if !reflect.DeepEqual(e.Float["weight"], w.Weight) {
			t.Errorf("record %d: weight %v, want %v", i, e.Float["weight"], w.Weight)
		}
		if w.Offsets != nil && !reflect.DeepEqual(e.Int64["offsets"], w.Offsets) {
			t.Errorf("record %d: offsets %v, want %v", i, e.Int64["offsets"], w.Offsets)
		}
		if name, err := e.OneBytes("name"); w.Name != nil && (err != nil || string(name) != *w.Name) {
			t.Errorf("record %d: name %q, %v; want %q", i, name, err, *w.Name)
		}
		img, err := e.OneBytes("image")
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		sum := sha256.Sum256(img)
		if len(img) != w.ImageLen || hex.EncodeToString(sum[:]) != w.ImageSHA256 {
			t.Errorf("record %d: image of %d bytes, sha256 %x; want %d, %s", i, len(img), sum, w.ImageLen, w.ImageSHA256)
		}
		m, err := png.Decode(bytes.NewReader(img))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		_, gray := m.(*image.Gray)
		if b := m.Bounds(); b.Dx() != w.Width || b.Dy() != w.Height || gray != w.Gray {
			t.Errorf("record %d: %dx%d %T, want %dx%d gray=%v", i, b.Dx(), b.Dy(), m, w.Width, w.Height, w.Gray)
		}
	}
}

// fixtureImage is one record's entry in datasets/testdata/metadataset/manifest.json.
type fixtureImage struct {
	Format string `json:"format"`
	W      int    `json:"w"`
	H      int    `json:"h"`
	Gray   bool   `json:"gray"`
	SHA256 string `json:"sha256"` // first 16 hex digits
	Probe  [5]int `json:"probe"`  // x, y, r, g, b inside the class mark
}

const metaDatasetDir = "../../datasets/testdata/metadataset"

func TestMetaDatasetFixtures(t *testing.T) {
	var manifest map[string]map[string][]fixtureImage
	readJSON(t, filepath.Join(metaDatasetDir, "manifest.json"), &manifest)
	wantSources := []string{"tiny_bilevel", "tiny_hier", "tiny_plain"}
	if got := sortedKeys(manifest); !reflect.DeepEqual(got, wantSources) {
		t.Fatalf("manifest sources %v, want %v", got, wantSources)
	}
	for _, source := range wantSources {
		t.Run(source, func(t *testing.T) {
			dir := filepath.Join(metaDatasetDir, source)
			counts := specCounts(t, filepath.Join(dir, "dataset_spec.json"))
			files, _ := filepath.Glob(filepath.Join(dir, "*.tfrecords"))
			if len(files) != len(counts) || len(manifest[source]) != len(counts) {
				t.Fatalf("%d record files and %d manifest classes for %d classes", len(files), len(manifest[source]), len(counts))
			}
			for id, n := range counts {
				path := filepath.Join(dir, fmt.Sprintf("%d.tfrecords", id))
				images := manifest[source][strconv.Itoa(id)]
				got := 0
				err := Scan(path, func(i int, rec []byte) error {
					got++
					if i >= len(images) {
						return fmt.Errorf("record %d is beyond the manifest", i)
					}
					return checkRecord(rec, int64(id), images[i])
				})
				if err != nil {
					t.Errorf("%s: %v", path, err)
				}
				if got != n || len(images) != n {
					t.Errorf("%s: %d records, %d in the manifest, spec says %d", path, got, len(images), n)
				}
			}
		})
	}
}

func checkRecord(rec []byte, label int64, want fixtureImage) error {
	e, err := DecodeExample(rec)
	if err != nil {
		return err
	}
	if got, err := e.OneInt64("label"); err != nil || got != label {
		return fmt.Errorf("label %d (%v), want %d", got, err, label)
	}
	img, err := e.OneBytes("image")
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(img); hex.EncodeToString(sum[:8]) != want.SHA256 {
		return fmt.Errorf("image sha256 %x…, want %s…", sum[:8], want.SHA256)
	}
	var m image.Image
	tolerance := 0
	switch want.Format {
	case "png":
		m, err = png.Decode(bytes.NewReader(img))
	case "jpeg":
		m, err = jpeg.Decode(bytes.NewReader(img))
		tolerance = 32 // 4x4 marks at quality 90 bleed (24 at most here)
	default:
		return fmt.Errorf("manifest format %q", want.Format)
	}
	if err != nil {
		return fmt.Errorf("%s image: %v", want.Format, err)
	}
	if b := m.Bounds(); b.Dx() != want.W || b.Dy() != want.H {
		return fmt.Errorf("image %dx%d, want %dx%d", b.Dx(), b.Dy(), want.W, want.H)
	}
	if _, gray := m.(*image.Gray); gray != want.Gray {
		return fmt.Errorf("image is %T, want gray=%v", m, want.Gray)
	}
	c := color.NRGBAModel.Convert(m.At(want.Probe[0], want.Probe[1])).(color.NRGBA)
	for i, v := range []uint8{c.R, c.G, c.B} {
		if d := int(v) - want.Probe[2+i]; d > tolerance || d < -tolerance {
			return fmt.Errorf("pixel (%d,%d) = %v, want %v", want.Probe[0], want.Probe[1], c, want.Probe[2:])
		}
	}
	return nil
}

type specNode struct {
	WnID     string   `json:"wn_id"`
	Children []string `json:"children_ids"`
}

// specCounts returns the image count of every class in a Meta-Dataset spec,
// indexed by class id, checking the cross-field facts the fixtures promise
// (ids contiguous from 0, per-split totals as declared).
func specCounts(t *testing.T, path string) []int {
	t.Helper()
	var spec struct {
		Class           string                `json:"__class__"`
		ClassesPerSplit map[string]int        `json:"classes_per_split"`
		SuperPerSplit   map[string]int        `json:"superclasses_per_split"`
		ClassesPerSuper map[string]int        `json:"classes_per_superclass"`
		ImagesPerClass  json.RawMessage       `json:"images_per_class"`
		ClassNames      map[string]string     `json:"class_names"`
		SplitSubgraphs  map[string][]specNode `json:"split_subgraphs"`
	}
	readJSON(t, path, &spec)
	n := len(spec.ClassNames)
	counts := make([]int, n)
	switch spec.Class {
	case "DatasetSpecification", "BiLevelDatasetSpecification":
		var ipc map[string]int
		if err := json.Unmarshal(spec.ImagesPerClass, &ipc); err != nil {
			t.Fatal(err)
		}
		for id := range n {
			c, ok := ipc[strconv.Itoa(id)]
			if !ok {
				t.Fatalf("%s: class %d has no image count", path, id)
			}
			counts[id] = c
		}
		total := spec.ClassesPerSplit["TRAIN"] + spec.ClassesPerSplit["VALID"] + spec.ClassesPerSplit["TEST"]
		if spec.Class == "BiLevelDatasetSpecification" {
			total = 0
			for s := range spec.SuperPerSplit["TRAIN"] + spec.SuperPerSplit["VALID"] + spec.SuperPerSplit["TEST"] {
				total += spec.ClassesPerSuper[strconv.Itoa(s)]
			}
		}
		if total != n {
			t.Errorf("%s: splits hold %d classes, class_names %d", path, total, n)
		}
	case "HierarchicalDatasetSpecification":
		var ipc map[string]map[string]int
		if err := json.Unmarshal(spec.ImagesPerClass, &ipc); err != nil {
			t.Fatal(err)
		}
		id := 0
		for _, split := range []string{"TRAIN", "VALID", "TEST"} {
			var leaves []string
			for _, node := range spec.SplitSubgraphs[split] {
				if len(node.Children) == 0 {
					leaves = append(leaves, node.WnID)
				}
			}
			sort.Strings(leaves)
			for _, wn := range leaves {
				if spec.ClassNames[strconv.Itoa(id)] != wn {
					t.Fatalf("%s: class %d is %s, want leaf %s of %s", path, id, spec.ClassNames[strconv.Itoa(id)], wn, split)
				}
				counts[id] = ipc[split][wn]
				id++
			}
		}
		if id != n {
			t.Errorf("%s: %d leaves, %d class names", path, id, n)
		}
	default:
		t.Fatalf("%s: __class__ %q", path, spec.Class)
	}
	return counts
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
