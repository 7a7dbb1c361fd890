package experiments

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// The engine refuses to write a run into an experiment's directory by the
// name this package gives its manifest: the run would sit beside the
// experiment's runs and take the directory from mkbench runs' listing.
func TestEngineRefusesAnExperimentsDirectory(t *testing.T) {
	if !slices.Contains(engine.GroupFiles, FileExperiment) {
		t.Fatalf("engine.GroupFiles %v lacks %s", engine.GroupFiles, FileExperiment)
	}
	dir := t.TempDir()
	if err := writeJSON(dir+"/"+FileExperiment, Manifest{}); err != nil {
		t.Fatal(err)
	}
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := presets.NewSources(p.Source, p.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.Run(context.Background(), p.Config, srcs.Train, engine.RunOptions{Dir: dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "is a sweep's or an experiment's directory") {
		t.Fatalf("a run into an experiment's directory: %v", err)
	}
}
