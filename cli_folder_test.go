package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// writeShapes writes a folder family of classes × perClass small images:
// each class a colour and a bar at its own angle, each image shifted.
func writeShapes(t *testing.T, dir string, classes, perClass int, grey bool) {
	t.Helper()
	for c := 0; c < classes; c++ {
		cd := filepath.Join(dir, fmt.Sprintf("shape%02d", c))
		if err := os.MkdirAll(cd, 0o755); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < perClass; k++ {
			var img image.Image
			col := color.RGBA{uint8(40 * c % 256), uint8(255 - 30*c%256), uint8(90 + 17*k%160), 255}
			if grey {
				g := image.NewGray(image.Rect(0, 0, 24, 24))
				for i := range g.Pix {
					g.Pix[i] = 255
				}
				for i := 0; i < 24; i++ {
					x, y := (i+k)%24, (i*(c+1)/3+k)%24
					g.SetGray(x, y, color.Gray{})
				}
				img = g
			} else {
				m := image.NewRGBA(image.Rect(0, 0, 24, 24))
				for i := 0; i < 24*24; i++ {
					x, y := i%24, i/24
					if (x+y*c+k)%(c+2) == 0 {
						m.Set(x, y, col)
					} else {
						m.Set(x, y, color.White)
					}
				}
				img = m
			}
			var b bytes.Buffer
			if err := png.Encode(&b, img); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cd, fmt.Sprintf("%d.png", k)), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFolderPresetAndCrossDomainEval: a folder preset trains on a user's
// own images (channels read from them), and an Omniglot model is
// evaluated on a folder of grey images that are not Omniglot.
func TestFolderPresetAndCrossDomainEval(t *testing.T) {
	colour := t.TempDir()
	writeShapes(t, colour, 25, 6, false)
	run := filepath.Join(t.TempDir(), "folder-run")
	out, e, code := mkbench(t, "run", "--preset", "folder-5w1s", "--data", colour, "--iters", "3", "--image-size", "32",
		"--set", "conv_filters=4", "--set", "query=2", "--set", "eval_query=2", "--eval-tasks", "4", "--set", "val_every=0", "--out", run, "--quiet")
	if code != 0 || !strings.Contains(out, "accuracy") {
		t.Fatalf("folder run (exit %d): %s%s", code, out, e)
	}
	cfg, err := os.ReadFile(filepath.Join(run, "config.json"))
	if err != nil || !strings.Contains(string(cfg), `"channels": 3`) || !strings.Contains(string(cfg), `"height": 32`) {
		t.Errorf("config.json: %s", cfg)
	}

	grey := t.TempDir()
	writeShapes(t, grey, 6, 5, true)
	omni := filepath.Join(t.TempDir(), "omni-run")
	if out, e, code := mkbench(t, "run", "--preset", "omniglot-5w1s", "--data", testutil.Data(t, "omniglot"), "--iters", "2", "--set", "conv_filters=4", "--eval-tasks", "2",
		"--set", "val_every=0", "--out", omni, "--quiet"); code != 0 {
		t.Fatalf("omniglot run (exit %d): %s%s", code, out, e)
	}
	out, e, code = mkbench(t, "eval", "--run", omni, "--folder", grey, "--eval-tasks", "10", "--query", "3")
	if code != 0 || !strings.Contains(out, "accuracy") || !strings.Contains(out, "read as omniglot images") {
		t.Fatalf("cross-domain eval (exit %d): %s%s", code, out, e)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--run", omni, "--folder", grey, "--way", "7"}, "7-way episodes need 7 classes"},
		{[]string{"eval", "--run", omni, "--folder", grey, "--split", "val"}, `--split "val": want all or test`},
		{[]string{"eval", "--run", omni, "--split", "test"}, "--split applies to --folder DIR"},
		{[]string{"eval", "--run", omni, "--folder", filepath.Join(grey, "nope")}, "is not a folder"},
		{[]string{"run", "--preset", "folder-5w1s"}, "give --data DIR"},
	} {
		_, e, code := mkbench(t, c.args...)
		if code == 0 || !strings.Contains(e, c.want) || strings.Count(e, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want one line with %q", c.args, code, e, c.want)
		}
	}
}

// A folder too small for its episodes is refused for that, from its
// listing, before any image is decoded: the broken image in it is never
// reached (decoding first took minutes on a large folder, then refused).
func TestFolderTooSmallRefusedBeforeDecoding(t *testing.T) {
	data := t.TempDir()
	writeShapes(t, data, 3, 6, true)
	os.WriteFile(filepath.Join(data, "shape00", "broken.png"), []byte("not a png"), 0o644)
	_, se, code := mkbench(t, "run", "--preset", "folder-5w1s", "--data", data, "--iters", "2", "--out", filepath.Join(t.TempDir(), "r"), "--quiet")
	if code == 0 || !strings.Contains(se, "5-way episodes need 5 classes") || strings.Contains(se, "broken.png") {
		t.Fatalf("exit %d, %q: want the class count refused before any decode", code, se)
	}
	// eval --folder checks the split it evaluates on the same way.
	if _, se, code := mkbench(t, "eval", "--model", "omniglot-5w1s", "--folder", data, "--split", "all"); code == 0 || !strings.Contains(se, "5-way episodes need 5 classes") {
		t.Fatalf("eval --folder: exit %d, %q", code, se)
	}
}
