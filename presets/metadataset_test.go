package presets

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

const mdFixtures = "../datasets/testdata/metadataset"

func TestMetaDatasetSources(t *testing.T) {
	_, cfg, err := Spec{Preset: "metadataset-5w1s", Overrides: Overrides{"image_size": 32, "query": 2, "eval_query": 2,
		"test_sources": []string{"tiny_hier", "tiny_bilevel"}}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := NewSources("metadataset", cfg, mdFixtures)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range srcs.TestBy {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "tiny_hier,tiny_bilevel" || srcs.Val == nil || srcs.Train.InDim() != 32*32*3 {
		t.Errorf("test sources %v, val %v, in dim %d", names, srcs.Val, srcs.Train.InDim())
	}
	// Default test sources: those with way classes or more.
	cfg.TestSources = nil
	srcs, err = NewSources("metadataset", cfg, mdFixtures)
	if err != nil || len(srcs.TestBy) != 2 {
		t.Errorf("default test sources: %v, %v", srcs.TestBy, err)
	}
	cfg.TestSources = []string{"tiny_plain"}
	if _, err := NewSources("metadataset", cfg, mdFixtures); err == nil || !strings.Contains(err.Error(), `5-way episodes need 5 classes, metadataset split "tiny_plain/test" has 3`) {
		t.Errorf("a test source with too few classes: %v", err)
	}
	cfg.Sources, cfg.TestSources = []string{"ilsvrc_2012"}, nil
	if _, err := NewSources("metadataset", cfg, mdFixtures); err == nil || !strings.Contains(err.Error(), `no Meta-Dataset source "ilsvrc_2012"`) {
		t.Errorf("a missing source: %v", err)
	}
	if _, err := NewSources("metadataset", cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "--data") {
		t.Errorf("no data: %v", err)
	}
	_, sine, _ := Spec{Preset: "sine-5shot", Overrides: Overrides{"sources": []string{"x"}}}.Config()
	if _, err := NewSources("sine", sine, ""); err == nil || !strings.Contains(err.Error(), "apply to the Meta-Dataset presets") {
		t.Errorf("sources on sine: %v", err)
	}
}

// npz writes an uncompressed .npz of a float32 features array (n × dim)
// and an int64 labels array, as numpy.savez does.
func npz(feats []float32, n, dim int, labels []int64) []byte {
	npy := func(descr string, shape string, data []byte) []byte {
		h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
		for (10+len(h)+1)%64 != 0 {
			h += " "
		}
		h += "\n"
		var b bytes.Buffer
		b.WriteString("\x93NUMPY\x01\x00")
		binary.Write(&b, binary.LittleEndian, uint16(len(h)))
		b.WriteString(h)
		b.Write(data)
		return b.Bytes()
	}
	fd := make([]byte, 4*len(feats))
	for i, v := range feats {
		binary.LittleEndian.PutUint32(fd[4*i:], math.Float32bits(v))
	}
	ld := make([]byte, 8*len(labels))
	for i, v := range labels {
		binary.LittleEndian.PutUint64(ld[8*i:], uint64(v))
	}
	var out bytes.Buffer
	z := zip.NewWriter(&out)
	for name, data := range map[string][]byte{
		"features.npy": npy("<f4", fmt.Sprintf("(%d, %d)", n, dim), fd),
		"labels.npy":   npy("<i8", fmt.Sprintf("(%d,)", n), ld),
	} {
		w, _ := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		w.Write(data)
	}
	z.Close()
	return out.Bytes()
}

func TestMetaDatasetEmbeddingSources(t *testing.T) {
	dir := t.TempDir()
	for s, src := range []string{"birds", "fungi"} {
		for sp, split := range []string{"train", "test"} {
			classes, per, dim := 6+sp, 16, 8
			var feats []float32
			var labels []int64
			for c := 0; c < classes; c++ {
				for k := 0; k < per; k++ {
					for d := 0; d < dim; d++ {
						feats = append(feats, float32(c*d+s+k%3))
					}
					labels = append(labels, int64(c))
				}
			}
			if err := os.MkdirAll(filepath.Join(dir, src), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, src, split+".npz"), npz(feats, classes*per, dim, labels), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, cfg, err := Spec{Preset: "metadataset-embed-5w5s"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := NewSources("mdembed", cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	if srcs.Train.InDim() != 8 || srcs.Train.Name() != "mdembed" || len(srcs.TestBy) != 2 || srcs.TestBy[1].Name != "fungi" || srcs.Val != nil {
		t.Errorf("in dim %d, family %q, tests %v, val %v", srcs.Train.InDim(), srcs.Train.Name(), srcs.TestBy, srcs.Val)
	}

	// The variable episodes on features: the sampler's plain rules over
	// training split's 6 classes (ways 5 and 6).
	_, cfg, err = Spec{Preset: "metadataset-embed"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if srcs, err = NewSources("mdembed", cfg, dir); err != nil {
		t.Fatal(err)
	}
	v, ok := srcs.Train.(task.Varying)
	if !ok || srcs.Train.OutDim() != 50 {
		t.Fatalf("training source %T, out %d: want variable episodes of up to 50 ways", srcs.Train, srcs.Train.OutDim())
	}
	ways := map[int]bool{}
	for i := 0; i < 50; i++ {
		var b task.Batch
		v.SampleVarying(task.Stream(1, 1, uint64(i)), &b)
		if b.OutDim < 5 || b.OutDim > 6 || b.NS < b.OutDim || b.NQ != b.OutDim*8 { // 16 images a class: ⌊16/2⌋ queries
			t.Fatalf("episode %d: way %d, support %d, query rows %d", i, b.OutDim, b.NS, b.NQ)
		}
		ways[b.OutDim] = true
	}
	if len(ways) != 2 {
		t.Errorf("ways drawn: %v", ways)
	}
}
