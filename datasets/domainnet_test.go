package datasets

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// fakeDomainNet is a DomainNet tree: dir/<domain>/<category>/<file>.jpg and
// the lists dir/<domain>_{train,test}.txt with "path label" lines, as
// distributed. Category c is cat_<c> with label c; every domain renders a
// category in its colour, each domain with its own style (brightness and
// gradient), so categories are recognisable across domains.
type fakeDomainNet struct {
	dir        string
	domains    []string
	categories int
	train      int // images per category in each _train list
	test       int
	photo      func(c, k, w, h int) *image.RGBA
}

func fakeCategory(c int) string { return fmt.Sprintf("cat_%02d", c) }

func (f fakeDomainNet) file(dom string, c, k int) string {
	return fmt.Sprintf("%s/%s/%s_%03d_%06d.jpg", dom, fakeCategory(c), dom, c, k)
}

// domainPhoto renders image k of category c in domain d: the class photo
// lightened or darkened per domain.
func (f fakeDomainNet) domainPhoto(d, c, k int) image.Image {
	w, h := photoSize(c, k)
	img := f.photo(c, k+100*d, w, h)
	shift := []int{0, 25, -25, 40, -40, 10}[d%6]
	for i := 0; i < len(img.Pix); i += 4 {
		for ch := 0; ch < 3; ch++ {
			img.Pix[i+ch] = uint8(min(max(int(img.Pix[i+ch])+shift, 0), 255))
		}
	}
	if d == 3 { // a grey domain, as quickdraw is
		g := image.NewGray(img.Bounds())
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				g.Set(x, y, color.GrayModel.Convert(img.At(x, y)))
			}
		}
		return g
	}
	return img
}

func newFakeDomainNet(t testing.TB, domains []string, categories, train, test int) fakeDomainNet {
	t.Helper()
	return newFakeDomainNetWith(t, domains, categories, train, test, fixturePhoto)
}

// newFakeDomainNetWith draws the images with photo.
func newFakeDomainNetWith(t testing.TB, domains []string, categories, train, test int, photo func(c, k, w, h int) *image.RGBA) fakeDomainNet {
	t.Helper()
	f := fakeDomainNet{dir: t.TempDir(), domains: domains, categories: categories, train: train, test: test, photo: photo}
	for _, dom := range domains {
		d := indexOf(DomainNetDomains, dom)
		for pi, part := range []string{"train", "test"} {
			var list bytes.Buffer
			for c := 0; c < categories; c++ {
				n := []int{train, test}[pi]
				for k := 0; k < n; k++ {
					idx := pi*1000 + k
					rel := f.file(dom, c, idx)
					fmt.Fprintf(&list, "%s %d\n", rel, c)
					writeFile(t, filepath.Join(f.dir, filepath.FromSlash(rel)), encodeJPEG(f.domainPhoto(d, c, idx)))
				}
			}
			writeFile(t, filepath.Join(f.dir, dom+"_"+part+".txt"), list.Bytes())
		}
	}
	return f
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestDomainNetLoads(t *testing.T) {
	f := newFakeDomainNet(t, []string{"clipart", "quickdraw", "real"}, 4, 5, 3)
	cache := t.TempDir()
	load := func(opts DomainNetOptions) *DomainNet {
		t.Helper()
		opts.CacheDir = cache
		d, err := LoadDomainNet(f.dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := load(DomainNetOptions{ImageOptions: ImageOptions{Side: 16}})
	if got := strings.Join(d.Lists(), " "); got != "clipart_test clipart_train quickdraw_test quickdraw_train real_test real_train" {
		t.Fatalf("lists %s", got)
	}
	if got := strings.Join(d.Categories(), " "); got != "cat_00 cat_01 cat_02 cat_03" {
		t.Fatalf("categories %s", got)
	}
	s, _ := d.List("quickdraw_train")
	if s.NumClasses() != 4 || s.NumImages() != 20 || s.InDim() != 16*16*3 || s.Info().FromCache {
		t.Fatalf("quickdraw_train: %d classes, %d images, InDim %d, info %+v", s.NumClasses(), s.NumImages(), s.InDim(), s.Info())
	}
	// Grey images become R = G = B.
	px := s.Pixels(2, 1)
	for i := 0; i < len(px); i += 3 {
		if px[i] != px[i+1] || px[i] != px[i+2] {
			t.Fatalf("quickdraw pixel %d is %v, want grey", i/3, px[i:i+3])
		}
	}
	again := load(DomainNetOptions{ImageOptions: ImageOptions{Side: 16}})
	s2, _ := again.List("quickdraw_train")
	if !s2.Info().FromCache || !bytes.Equal(s.pix, s2.pix) {
		t.Fatalf("second load: info %+v, same pixels %v", s2.Info(), bytes.Equal(s.pix, s2.pix))
	}
	// A cap keeps the first images of each category; its own cache.
	capped := load(DomainNetOptions{ImageOptions: ImageOptions{Side: 16}, MaxPerClass: 2, Lists: []string{"real_test"}})
	r, _ := capped.List("real_test")
	full, _ := d.List("real_test")
	if r.Info().FromCache || r.NumImages() != 8 || !bytes.Equal(r.Pixels(1, 1), full.Pixels(1, 1)) {
		t.Fatalf("capped: %d images, from cache %v", r.NumImages(), r.Info().FromCache)
	}
	if _, ok := capped.List("real_train"); ok {
		t.Fatal("an unrequested list was loaded")
	}
}

// Cross-domain episodes: support and query rows of a task come from two
// different domains, every label's rows from one category, each image once.
func TestDomainEpisodesCrossDomains(t *testing.T) {
	f := newFakeDomainNet(t, []string{"clipart", "painting", "quickdraw"}, 5, 4, 3)
	d, err := LoadDomainNet(f.dir, DomainNetOptions{ImageOptions: ImageOptions{Side: 6, NoCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	type id struct {
		list  string
		class int
		image int
	}
	images := map[string]id{}
	img := make([]float64, 6*6*3)
	for _, name := range d.Lists() {
		s, _ := d.List(name)
		for c := 0; c < s.NumClasses(); c++ {
			for k := 0; k < s.Class(c).Images; k++ {
				s.Image(c, k, img)
				key := imageKey(img)
				if prev, dup := images[key]; dup {
					t.Fatalf("fixture: %s %d/%d equals %v", name, c, k, prev)
				}
				images[key] = id{name, c, k}
			}
		}
	}
	train := DomainSplit{Name: "train", Support: []string{"clipart_train", "painting_train"}, Query: []string{"clipart_train", "painting_train"}}
	const way, shot, query, tasks = 3, 2, 3, 40
	e, err := d.Episodes(train, way, shot, query)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "domainnet" || e.InDim() != 108 || e.OutDim() != way {
		t.Fatalf("Name %q, InDim %d", e.Name(), e.InDim())
	}
	var b task.Batch
	b.Resize(tasks, way*shot, way*query, e.InDim(), way)
	e.Sample(rand.New(rand.NewPCG(5, 5)), &b)
	pairs := map[string]int{}
	for task := 0; task < tasks; task++ {
		lists := map[string]string{} // "support"/"query" → list
		catOf := map[int]int{}
		used := map[id]bool{}
		for _, part := range []struct {
			name string
			x, y []float64
			n    int
		}{{"support", b.XS[task*way*shot*108:], b.YS[task*way*shot*way:], shot}, {"query", b.XQ[task*way*query*108:], b.YQ[task*way*query*way:], query}} {
			for row := 0; row < way*part.n; row++ {
				got, ok := images[imageKey(part.x[row*108:(row+1)*108])]
				if !ok {
					t.Fatalf("task %d %s row %d is no image", task, part.name, row)
				}
				if l, seen := lists[part.name]; seen && l != got.list {
					t.Fatalf("task %d: %s rows from %s and %s", task, part.name, l, got.list)
				}
				lists[part.name] = got.list
				label := row / part.n
				if part.y[row*way+label] != 1 {
					t.Fatalf("task %d %s row %d: target %v", task, part.name, row, part.y[row*way:(row+1)*way])
				}
				if c, seen := catOf[label]; seen && c != got.class {
					t.Fatalf("task %d: label %d is categories %d and %d", task, label, c, got.class)
				}
				catOf[label] = got.class
				if used[got] {
					t.Fatalf("task %d: %v drawn twice", task, got)
				}
				used[got] = true
			}
		}
		if domainOf(lists["support"]) == domainOf(lists["query"]) {
			t.Fatalf("task %d: support and query both from %s", task, lists["support"])
		}
		pairs[lists["support"]+">"+lists["query"]]++
	}
	if len(pairs) != 2 {
		t.Fatalf("list pairs %v, want both directions", pairs)
	}
	// The protocol's test tasks query the target only.
	_, _, test, err := DomainNetProtocol("quickdraw", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(test.Support, test.Query); got != "[clipart_test infograph_test painting_test real_test sketch_test] [quickdraw_test]" {
		t.Fatalf("test split %s", got)
	}
	test.Support = []string{"clipart_test", "painting_test"}
	if _, err := d.Episodes(test, way, shot, query); err != nil {
		t.Fatal(err)
	}
}

func TestDomainNetErrors(t *testing.T) {
	_, err := LoadDomainNet(filepath.Join(t.TempDir(), "nowhere"), DomainNetOptions{})
	checkErr(t, err, "nowhere does not exist")
	if !errors.Is(err, ErrNoDomainNet) {
		t.Fatal("missing folder is not ErrNoDomainNet")
	}
	_, err = LoadDomainNet(t.TempDir(), DomainNetOptions{})
	checkErr(t, err, "holds no image lists")
	cases := []struct {
		name string
		edit func(f fakeDomainNet)
		want []string
	}{
		{"wrong domain", func(f fakeDomainNet) {
			appendLine(t, filepath.Join(f.dir, "real_test.txt"), f.file("clipart", 0, 0)+" 0")
		}, []string{"real_test.txt:7", `domain "clipart"`}},
		{"label conflict", func(f fakeDomainNet) {
			appendLine(t, filepath.Join(f.dir, "real_test.txt"), "real/cat_00/x.jpg 1")
		}, []string{"real_test.txt:7: category cat_00 has label 1, but 0 at"}},
		{"no label", func(f fakeDomainNet) { appendLine(t, filepath.Join(f.dir, "real_test.txt"), "real/cat_00/x.jpg") }, []string{"real_test.txt:7", "1 fields"}},
		{"missing image", func(f fakeDomainNet) {
			os.Remove(filepath.Join(f.dir, filepath.FromSlash(f.file("real", 1, 1000))))
		}, []string{"real_test.txt:4", "no such file"}},
		{"damaged image", func(f fakeDomainNet) {
			os.WriteFile(filepath.Join(f.dir, filepath.FromSlash(f.file("clipart", 1, 1))), []byte("GIF89a"), 0o644)
		}, []string{filepath.FromSlash("clipart/cat_01/clipart_001_000001.jpg: not a JPEG or PNG")}},
		{"duplicate", func(f fakeDomainNet) {
			appendLine(t, filepath.Join(f.dir, "real_test.txt"), f.file("real", 0, 1000)+" 0")
		}, []string{"real_test.txt:7", "already listed at line 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeDomainNet(t, []string{"clipart", "real"}, 2, 2, 3)
			c.edit(f)
			_, err := LoadDomainNet(f.dir, DomainNetOptions{ImageOptions: ImageOptions{NoCache: true, Side: 4}})
			checkErr(t, err, c.want...)
			t.Log(err)
		})
	}
	f := newFakeDomainNet(t, []string{"clipart", "real"}, 2, 2, 3)
	d, err := LoadDomainNet(f.dir, DomainNetOptions{ImageOptions: ImageOptions{NoCache: true, Side: 4}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Episodes(DomainSplit{Name: "train", Support: []string{"sketch_train"}}, 2, 1, 1)
	checkErr(t, err, "needs the list sketch_train")
	_, err = d.Episodes(DomainSplit{Name: "train", Support: []string{"real_train"}}, 3, 1, 1)
	checkErr(t, err, "share 2 categories", "3-way tasks need 3")
	_, err = d.Episodes(DomainSplit{Name: "train", Support: []string{"real_train"}}, 2, 1, 2)
	checkErr(t, err, "share 0 categories")
	_, err = d.Episodes(DomainSplit{Name: "x", Support: []string{"real_train"}, Query: []string{"real_test"}}, 2, 1, 1)
	checkErr(t, err, "no query list of a domain other than the support's")
	_, _, _, err = DomainNetProtocol("photos", false)
	checkErr(t, err, `unknown DomainNet domain "photos"`)
}
