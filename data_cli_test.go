package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/testutil"
)

// runData runs mkbench data ARGS in-process (through the command table).
func runData(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return mkbench(t, append([]string{"data"}, args...)...)
}

// omniglotZips is the folder of the real Omniglot zips (skipped, or
// failed under CI=true, without them).
func omniglotZips(t *testing.T) string {
	return testutil.Data(t, "omniglot", "images_background.zip", "images_evaluation.zip")
}

func TestDataListsEveryFamilyAndWhereItIs(t *testing.T) {
	zips := omniglotZips(t)
	root := t.TempDir()
	t.Setenv("MKBENCH_DATA", root)
	if err := os.Mkdir(filepath.Join(root, "omniglot"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"images_background.zip", "images_evaluation.zip"} {
		if err := os.Symlink(filepath.Join(zips, n), filepath.Join(root, "omniglot", n)); err != nil {
			t.Skip("no symbolic links here")
		}
	}
	out, errOut, code := runData(t)
	if code != 0 || errOut != "" {
		t.Fatalf("rc %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"omniglot (presets omniglot-*)",
		"found     " + filepath.Join(root, "omniglot") + ": images_background.zip, images_evaluation.zip",
		"missing   get it with: mkbench data get cifarfs",
		"sign-in needed", // miniImageNet
		"Meta-Dataset's sources need sign-ins",
		"looks in  --data DIR only", // folder
		"sine (presets sine-*)",
		"looks in  --data DIR if given, else " + filepath.Join(root, "cifarfs") + " ($MKBENCH_DATA)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("mkbench data lacks %q:\n%s", want, out)
		}
	}
	for _, fam := range []string{"omniglot", "cifarfs", "miniimagenet", "domainnet", "embeddings", "metadataset", "folder", "sine"} {
		if !strings.Contains(out, "\n"+fam+" (presets") && !strings.HasPrefix(out, fam+" (presets") {
			t.Errorf("family %s not listed", fam)
		}
	}
}

func TestDataGetFromAMirrorPlacesWhereMkbenchLooks(t *testing.T) {
	zips := omniglotZips(t)
	s := httptest.NewServer(http.FileServer(http.Dir(zips)))
	defer s.Close()
	root := t.TempDir()
	t.Setenv("MKBENCH_DATA", root)
	out, errOut, code := runData(t, "get", "omniglot", "--from", s.URL+"/")
	if code != 0 {
		t.Fatalf("rc %d: %s", code, errOut)
	}
	dir := filepath.Join(root, "omniglot")
	for _, want := range []string{"images_background.zip: downloaded (8.0 MB, sha256 checked): " + filepath.Join(dir, "images_background.zip"),
		"omniglot is in " + dir + ", where mkbench looks for it"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// stderr is a file, not a terminal: plain lines, no redraws.
	if !strings.Contains(errOut, "images_evaluation.zip  5.5 MB in") || strings.Contains(errOut, "\r") {
		t.Errorf("progress on stderr:\n%q", errOut)
	}
	for _, n := range []string{"images_background.zip", "images_evaluation.zip"} {
		a, _ := os.ReadFile(filepath.Join(zips, n))
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs", n)
		}
	}
	// Again: already here, nothing fetched.
	s.Close()
	out, _, code = runData(t, "get", "omniglot")
	if code != 0 || strings.Count(out, "already here") != 2 {
		t.Fatalf("second get: rc %d\n%s", code, out)
	}
}

func TestDataGetRefusesWithOneLine(t *testing.T) {
	root := t.TempDir()
	t.Setenv("MKBENCH_DATA", root)
	os.MkdirAll(filepath.Join(root, "omniglot"), 0o755)
	os.WriteFile(filepath.Join(root, "omniglot", "images_background.zip"), []byte("mine"), 0o644)
	// A server that must not be reached: every refusal comes first.
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request %s", r.URL)
		time.Sleep(10 * time.Millisecond)
	}))
	defer s.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get"}, "name the data set first"},
		{[]string{"get", "omniglott"}, `no data family "omniglott"`},
		{[]string{"get", "miniimagenet"}, "sign-in needed"},
		{[]string{"get", "metadataset"}, "sign-ins"},
		{[]string{"get", "omniglot", "--from", s.URL + "/"}, "pass --force to have it moved aside"},
		{[]string{"get", "omniglot", "--from", filepath.Join(root, "nowhere")}, "no such file or directory"},
		{[]string{"get", "omniglot", "--bogus"}, "bogus"},
		{[]string{"fetch"}, `unknown subcommand "fetch"`},
	} {
		out, errOut, code := runData(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("mkbench data %s: rc %d, stdout %q, stderr %q; want one line with %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "omniglot", "images_background.zip")); string(b) != "mine" {
		t.Fatal("the user's file was changed")
	}
}
