package datasets

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// FuzzMetaDatasetSpec reads arbitrary bytes as a source's
// dataset_spec.json, seeded with the released specs and the fixtures' (a
// spec is a file a user hands mkbench): no input may panic, hang or
// allocate far past its own size; an error names the file; a spec that
// loads is consistent (its splits' classes are its classes, each with a
// count of images).
func FuzzMetaDatasetSpec(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(mdFixtures, "*", MDSpecFile))
	more, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "metadataset", "specs", "*_dataset_spec.json"))
	seeds = append(seeds, more...)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil && len(b) < 100<<10 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"__class__": "BiLevelDatasetSpecification", "name": "x", "file_pattern": "{}.tfrecords",
		"superclasses_per_split": {"TRAIN": 1000000000, "VALID": 0, "TEST": 0}, "classes_per_superclass": {"0": 1}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, MDSpecFile)
		writeFile(t, file, data)
		var s *MDSpec
		var err error
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s, err = LoadMetaDatasetSpecFile(file, dir)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("LoadMetaDatasetSpecFile did not return within 10s")
		}
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, 16<<20+256*uint64(len(data)); got > limit {
			t.Fatalf("LoadMetaDatasetSpecFile allocated %d bytes for a file of %d", got, len(data))
		}
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		n := 0
		for _, split := range []string{MDTrain, MDValid, MDTest} {
			for _, id := range s.Classes(split) {
				if id < 0 || id >= s.NumClasses() || s.Images(id) < 0 {
					t.Fatalf("split %s has class %d of %d (%d images)", split, id, s.NumClasses(), s.Images(id))
				}
				n++
			}
		}
		if n != s.NumClasses() {
			t.Fatalf("the splits hold %d classes, the spec %d", n, s.NumClasses())
		}
	})
}
