package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/testutil"
)

// realOmniglot returns the real Omniglot zips, by name, from where
// mkbench finds them (../shared/data/omniglot in a developer checkout);
// without them the test skips, or fails under CI=true.
func realOmniglot(t *testing.T) map[string][]byte {
	t.Helper()
	dir := omniglotDir(t)
	files := map[string][]byte{}
	for _, n := range []string{"images_background.zip", "images_evaluation.zip"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	return files
}

// omniglotDir is the folder of the real zips.
func omniglotDir(t *testing.T) string {
	return testutil.Data(t, "omniglot", "images_background.zip", "images_evaluation.zip")
}

func omniglot(t *testing.T) *Family {
	t.Helper()
	f, err := Lookup("omniglot")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mirror is a test server for files: it honours Range (http.ServeContent)
// unless told otherwise, and records each request's path and Range.
type mirror struct {
	files map[string][]byte
	mu    sync.Mutex
	log   []string
	// handle, when set, answers instead of ServeContent; it returns false
	// to fall back to it.
	handle func(w http.ResponseWriter, r *http.Request, body []byte) bool
}

func (m *mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.log = append(m.log, r.URL.Path+" "+r.Header.Get("Range")+" "+r.Header.Get("User-Agent"))
	h := m.handle
	m.mu.Unlock()
	body, ok := m.files[filepath.Base(r.URL.Path)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if h != nil && h(w, r, body) {
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func (m *mirror) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

func serve(t *testing.T, m *mirror) string {
	t.Helper()
	s := httptest.NewServer(m)
	t.Cleanup(s.Close)
	return s.URL + "/python/"
}

// get runs Get of the omniglot family from base into dir.
func get(t *testing.T, base, dir string, opts Options) ([]Result, error) {
	t.Helper()
	opts.Dir = dir
	if opts.From == "" {
		opts.From = base
	}
	if opts.Stall == 0 {
		opts.Stall = 5 * time.Second
	}
	return Get(context.Background(), omniglot(t), opts)
}

func sameFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	for n, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s differs from the served file", n)
		}
		if _, err := os.Stat(filepath.Join(dir, n+partSuffix)); err == nil {
			t.Fatalf("%s%s left behind", n, partSuffix)
		}
	}
}

func TestGetDownloadsVerifiesAndKeeps(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files}
	base := serve(t, m)
	dir := filepath.Join(t.TempDir(), "omniglot")
	var prog bytes.Buffer
	rs, err := get(t, base, dir, Options{Progress: &prog, UserAgent: "mkbench/test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].State != Downloaded || rs[1].State != Downloaded {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].Digest.Where != omniglotRepack {
		t.Errorf("matched %q, want the repack's digest", rs[0].Digest.Where)
	}
	sameFiles(t, dir, files)
	for _, r := range m.requests() {
		if !strings.HasSuffix(r, "mkbench/test") {
			t.Errorf("request %q without the User-Agent", r)
		}
	}
	if !strings.Contains(prog.String(), "images_background.zip  8.0 MB in") || strings.Contains(prog.String(), "\r") {
		t.Errorf("plain progress:\n%s", prog.String())
	}
	// A second get finds both and asks the server nothing.
	n := len(m.requests())
	rs, err = get(t, base, dir, Options{})
	if err != nil || rs[0].State != AlreadyHere || rs[1].State != AlreadyHere {
		t.Fatalf("second get: %+v, %v", rs, err)
	}
	if len(m.requests()) != n {
		t.Errorf("second get made requests: %v", m.requests()[n:])
	}
}

// cutAt answers the first request for name with its Content-Length but
// only the first cut bytes, then closes: a connection lost mid-file.
func cutAt(name string, cut int) func(http.ResponseWriter, *http.Request, []byte) bool {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if filepath.Base(r.URL.Path) != name {
			return false
		}
		done := false
		once.Do(func() {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(http.StatusOK)
			w.Write(body[:cut])
			done = true
		})
		return done
	}
}

func TestGetResumesACutDownload(t *testing.T) {
	files := realOmniglot(t)
	const name = "images_background.zip"
	half := len(files[name]) / 2
	m := &mirror{files: files, handle: cutAt(name, half)}
	base := serve(t, m)
	dir := t.TempDir()
	_, err := get(t, base, dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
		t.Fatalf("cut download: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		t.Fatal("a cut download was placed under its name")
	}
	part, err := os.ReadFile(filepath.Join(dir, name+partSuffix))
	if err != nil || len(part) != half || !bytes.Equal(part, files[name][:half]) {
		t.Fatalf("the part holds %d bytes (%v), want the %d sent", len(part), err, half)
	}
	if _, err := get(t, base, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dir, files)
	want := fmt.Sprintf("/python/%s bytes=%d-", name, half)
	found := false
	for _, r := range m.requests() {
		found = found || strings.HasPrefix(r, want)
	}
	if !found {
		t.Errorf("no request %q in %v", want, m.requests())
	}
}

func TestGetRestartsWhenTheServerIgnoresRange(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Write(body) // 200 and the whole file, whatever Range says
		return true
	}}
	base := serve(t, m)
	dir := t.TempDir()
	const name = "images_evaluation.zip"
	if err := os.WriteFile(filepath.Join(dir, name+partSuffix), files[name][:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, base, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dir, files)
}

func TestGetRedownloadsAResumedPartWithADamagedStart(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files}
	base := serve(t, m)
	dir := t.TempDir()
	const name = "images_background.zip"
	bad := bytes.Clone(files[name][:4096])
	bad[100] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, name+partSuffix), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, base, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dir, files)
	var ranged, whole int
	for _, r := range m.requests() {
		if strings.HasPrefix(r, "/python/"+name+" bytes=4096-") {
			ranged++
		}
		if strings.HasPrefix(r, "/python/"+name+"  ") {
			whole++
		}
	}
	if ranged != 1 || whole != 1 {
		t.Errorf("want one resumed and one fresh request: %v", m.requests())
	}
}

func TestGetKeepsABodyThatEndsShort(t *testing.T) {
	files := realOmniglot(t)
	const name = "images_background.zip"
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if filepath.Base(r.URL.Path) != name {
			return false
		}
		w.Write(body[:len(body)-10]) // a clean end, 10 bytes short, no Content-Length
		w.(http.Flusher).Flush()
		return true
	}}
	dir := t.TempDir()
	_, err := get(t, serve(t, m), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "stopped at") {
		t.Fatalf("short body: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, name+partSuffix)); err != nil || st.Size() != int64(len(files[name])-10) {
		t.Fatalf("the part should keep the bytes that came: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		t.Fatal("a short download was placed")
	}
}

func TestGetDiscardsAWrongChecksum(t *testing.T) {
	files := realOmniglot(t)
	const name = "images_background.zip"
	m := &mirror{files: map[string][]byte{name: bytes.Clone(files[name]), "images_evaluation.zip": files["images_evaluation.zip"]}}
	m.files[name][len(files[name])/3] ^= 1
	dir := t.TempDir()
	_, err := get(t, serve(t, m), dir, Options{})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), name) {
		t.Fatalf("wrong checksum: %v", err)
	}
	for _, p := range []string{name, name + partSuffix} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s exists after a wrong checksum", p)
		}
	}
}

func TestGetReportsAServerError(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		http.Error(w, "boom", http.StatusInternalServerError)
		return true
	}}
	dir := t.TempDir()
	_, err := get(t, serve(t, m), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("server error: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("%s left after a server error", e.Name())
		}
	}
}

func TestGetBoundsWhatAServerSends(t *testing.T) {
	files := realOmniglot(t)
	limit := omniglot(t).Files[0].maxSize()
	for _, tc := range []struct {
		name   string
		handle func(http.ResponseWriter, *http.Request, []byte) bool
		want   string
	}{
		{"endless", func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			chunk := make([]byte, 1<<20)
			for i := 0; i < 64; i++ { // 64 MB, far past the file
				if _, err := w.Write(chunk); err != nil {
					break
				}
			}
			return true
		}, "sent more than"},
		{"announced", func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			w.Header().Set("Content-Length", "1099511627776")
			w.WriteHeader(http.StatusOK)
			return true
		}, "offers 1099511627776 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mirror{files: files, handle: tc.handle}
			dir := t.TempDir()
			_, err := get(t, serve(t, m), dir, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if st, err := os.Stat(filepath.Join(dir, "images_background.zip"+partSuffix)); err == nil && st.Size() > limit {
				t.Fatalf("the part grew to %d bytes, past %d", st.Size(), limit)
			}
		})
	}
}

func TestGetStopsAStalledDownload(t *testing.T) {
	files := realOmniglot(t)
	const name = "images_background.zip"
	release := make(chan struct{})
	defer close(release)
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:1000])
		w.(http.Flusher).Flush()
		<-release
		return true
	}}
	dir := t.TempDir()
	_, err := get(t, serve(t, m), dir, Options{Stall: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "nothing received for 200ms") {
		t.Fatalf("stalled: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, name+partSuffix)); err != nil || st.Size() != 1000 {
		t.Fatalf("the part should keep the 1000 bytes that came: %v", err)
	}
}

func TestGetFollowsFewRedirects(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		http.Redirect(w, r, r.URL.Path, http.StatusFound) // to itself, forever
		return true
	}}
	_, err := get(t, serve(t, m), t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
}

// offline is a client that fails any request: --from a local copy must
// not need the network.
var offline = &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
	return nil, errors.New("offline")
})}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestGetFromALocalFolderOrFile(t *testing.T) {
	files := realOmniglot(t)
	dir := t.TempDir()
	rs, err := get(t, "", dir, Options{From: omniglotDir(t), Client: offline})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].State != Copied || rs[1].State != Copied {
		t.Fatalf("results %+v", rs)
	}
	sameFiles(t, dir, files)

	// One file under another name is known by its checksum; only it is placed.
	renamed := filepath.Join(t.TempDir(), "eval-copy.zip")
	if err := os.WriteFile(renamed, files["images_evaluation.zip"], 0o644); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	rs, err = get(t, "", dir2, Options{From: renamed, Client: offline})
	if err != nil || len(rs) != 1 || rs[0].File != "images_evaluation.zip" {
		t.Fatalf("single file: %+v, %v", rs, err)
	}
	sameFiles(t, dir2, map[string][]byte{"images_evaluation.zip": files["images_evaluation.zip"]})

	// A file that is none of the family's is refused before anything is written.
	junk := filepath.Join(t.TempDir(), "images_background.zip")
	os.WriteFile(junk, []byte("not omniglot"), 0o644)
	dir3 := t.TempDir()
	if _, err := get(t, "", dir3, Options{From: junk, Client: offline}); err == nil || !strings.Contains(err.Error(), "none of omniglot's files") {
		t.Fatalf("junk file: %v", err)
	}
	if entries, _ := os.ReadDir(dir3); len(entries) != 0 {
		t.Fatalf("a refused --from wrote %v", entries)
	}
}

func TestGetFromAMirrorPrefixOrOneURL(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files}
	s := httptest.NewServer(m)
	defer s.Close()
	dir := t.TempDir()
	if _, err := get(t, "", dir, Options{From: s.URL + "/mirror/omniglot"}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dir, files)
	if r := m.requests()[0]; !strings.HasPrefix(r, "/mirror/omniglot/images_background.zip") {
		t.Errorf("first request %q", r)
	}
	dir2 := t.TempDir()
	rs, err := get(t, "", dir2, Options{From: s.URL + "/elsewhere/images_evaluation.zip"})
	if err != nil || len(rs) != 1 || rs[0].File != "images_evaluation.zip" {
		t.Fatalf("one URL: %+v, %v", rs, err)
	}
}

func TestGetNeverReplacesAFileItDidNotWrite(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files}
	base := serve(t, m)
	dir := t.TempDir()
	const name = "images_background.zip"
	mine := []byte("the user's own file")
	target := filepath.Join(dir, name)
	os.WriteFile(target, mine, 0o644)
	_, err := get(t, base, dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a wrong file in the way: %v", err)
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, mine) {
		t.Fatal("the user's file was changed")
	}
	rs, err := get(t, base, dir, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Aside != target+".old" {
		t.Fatalf("moved aside to %q", rs[0].Aside)
	}
	if b, _ := os.ReadFile(target + ".old"); !bytes.Equal(b, mine) {
		t.Fatal("the user's file was not kept aside")
	}
	sameFiles(t, dir, files)
}

func TestGetRefusesALinkedPart(t *testing.T) {
	files := realOmniglot(t)
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	if err := os.Symlink(victim, filepath.Join(dir, "images_background.zip"+partSuffix)); err != nil {
		t.Skip("no symbolic links here")
	}
	_, err := get(t, serve(t, &mirror{files: files}), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("linked part: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatal("a download wrote through a link")
	}
}

func TestGetUsesWhatIsAlreadyFound(t *testing.T) {
	from := omniglotDir(t)
	root := t.TempDir()
	t.Setenv("MKBENCH_DATA", root)
	// Nothing there: the default install folder is $MKBENCH_DATA/omniglot.
	rs, err := Get(context.Background(), omniglot(t), Options{From: from, Client: offline})
	if err != nil || rs[0].Path != filepath.Join(root, "omniglot", "images_background.zip") {
		t.Fatalf("%+v, %v", rs, err)
	}
	rs, err = Get(context.Background(), omniglot(t), Options{Client: offline})
	if err != nil || rs[0].State != AlreadyHere {
		t.Fatalf("second get, offline: %+v, %v", rs, err)
	}
}

func TestGetExplainsFamiliesItCannotFetch(t *testing.T) {
	for name, want := range map[string]string{
		"miniimagenet": "sign-in needed",
		"metadataset":  "sign-ins",
		"domainnet":    "cannot verify",
		"embeddings":   "cannot verify",
		"folder":       "--data DIR",
		"sine":         "needs no data",
	} {
		f, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Get(context.Background(), f, Options{Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", name, err, want)
		}
	}
}

func TestCatalogChecksumsNameTheirEvidence(t *testing.T) {
	for _, f := range Families {
		if f.Downloadable() != (f.Manual == "" && f.Name != "sine") {
			t.Errorf("%s: a family is downloadable or says how to get it", f.Name)
		}
		for _, file := range f.Files {
			for _, d := range file.Accept {
				if len(d.SHA256) != 64 || d.Size <= 0 || d.Where == "" {
					t.Errorf("%s/%s: digest %+v", f.Name, file.Name, d)
				}
			}
		}
	}
}

// The repack's digests in the catalog are those of the files measured.
func TestCatalogMatchesTheRealZips(t *testing.T) {
	realOmniglot(t)
	for _, file := range omniglot(t).Files {
		d, err := verify(filepath.Join(omniglotDir(t), file.Name), file)
		if err != nil || d.Where != omniglotRepack {
			t.Errorf("%s: %+v, %v", file.Name, d, err)
		}
	}
}

// A failed get leaves no folder it made: an empty ./data/omniglot would
// hide ../shared/data/omniglot from the loaders.
func TestGetLeavesNoEmptyFolderBehind(t *testing.T) {
	files := realOmniglot(t)
	m := &mirror{files: files, handle: func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		http.Error(w, "gone", http.StatusGone)
		return true
	}}
	base := serve(t, m)
	root := t.TempDir()
	t.Setenv("MKBENCH_DATA", root)
	if _, err := Get(context.Background(), omniglot(t), Options{From: base}); err == nil || !strings.Contains(err.Error(), "410 Gone") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "omniglot")); err == nil {
		t.Fatal("the failed get left its folder")
	}
}

// Files already right are reported without writing anything (not even
// the folder's lock): a shared copy is read-only.
func TestGetWritesNothingForFilesAlreadyRight(t *testing.T) {
	files := realOmniglot(t)
	dir := t.TempDir()
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o444)
	}
	rs, err := get(t, "", dir, Options{Client: offline})
	if err != nil || rs[0].State != AlreadyHere || rs[1].State != AlreadyHere {
		t.Fatalf("%+v, %v", rs, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("the folder holds %d entries, want the 2 files only", len(entries))
	}
}
