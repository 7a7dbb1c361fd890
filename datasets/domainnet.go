package datasets

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/task"
)

// DomainNetSide is the side DomainNet images are resized to for the
// few-shot domain generalization protocol (84, as for miniImageNet).
const DomainNetSide = 84

// DomainNetDomains are the six domains of DomainNet (Peng et al., 2019).
var DomainNetDomains = []string{"clipart", "infograph", "painting", "quickdraw", "real", "sketch"}

// DefaultDomainNetTarget is the held-out domain of the paper's DomainNet
// table.
const DefaultDomainNetTarget = "quickdraw"

// ErrNoDomainNet is wrapped by the errors LoadDomainNet returns when the
// folder or its image lists are missing.
var ErrNoDomainNet = errors.New("datasets: DomainNet data not found")

// DefaultDomainNetDir is where mkbench looks for DomainNet when the user
// names no folder: $MKBENCH_DATA/domainnet, else ./data/domainnet if it
// exists, else ../shared/data/domainnet if that exists, else
// ./data/domainnet.
func DefaultDomainNetDir() string { return defaultDataDir("domainnet") }

// DomainNetOptions tunes LoadDomainNet.
type DomainNetOptions struct {
	ImageOptions
	// Lists names the image lists to load, e.g. "clipart_train"; nil
	// loads every <domain>_train.txt and <domain>_test.txt in the folder.
	Lists []string
	// MaxPerClass keeps at most this many images of each category of each
	// list, the first in list order; 0 keeps all. The full data set is
	// 586,575 images, 12.4 GB decoded at 84×84, so a cap is the practical
	// way to fit it in memory (100 per class: 345 categories × 12 lists ×
	// 100 ≈ 410,000 images at most, fewer where categories are small).
	MaxPerClass int
}

// DomainNet is the decoded DomainNet: one ImageSet per image list
// ("clipart_train", ...), whose classes are the list's categories in label
// order. It is immutable and safe for concurrent use.
type DomainNet struct {
	dir        string
	lists      map[string]*ImageSet
	categories []string // by label
}

// Lists returns the names of the loaded lists, sorted.
func (d *DomainNet) Lists() []string { return sortedNames(d.lists) }

// List returns the images of a list, e.g. List("clipart_train").
func (d *DomainNet) List(name string) (*ImageSet, bool) {
	s, ok := d.lists[name]
	return s, ok
}

// Categories returns the category names by label (345 in DomainNet).
func (d *DomainNet) Categories() []string { return slices.Clone(d.categories) }

// LoadDomainNet reads DomainNet from dir as distributed: the six domain
// folders (clipart/<category>/<file>.jpg, ...) and the image lists beside
// them, <domain>_train.txt and <domain>_test.txt, with lines
// "clipart/aircraft_carrier/clipart_001_000018.jpg 0" (path, label).
// Images are decoded, converted to RGB and area-filtered to opts.Side (84)
// square. Each list's decoded images are cached in their own file, keyed
// by the list's contents and each listed file's name, size and
// modification time (as for miniImageNet), so lists can be added or
// dropped without decoding the others again.
func LoadDomainNet(dir string, opts DomainNetOptions) (*DomainNet, error) {
	side := opts.Side
	if side == 0 {
		side = DomainNetSide
	}
	if side < 1 || side > 1024 || opts.MaxPerClass < 0 {
		return nil, fmt.Errorf("datasets: DomainNet side %d and max per class %d: want a side of 1 to 1024 and a cap ≥ 0", side, opts.MaxPerClass)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: folder %s does not exist (it should hold the domain folders and <domain>_train.txt, <domain>_test.txt)", ErrNoDomainNet, dir)
	}
	names := opts.Lists
	if names == nil {
		for _, dom := range DomainNetDomains {
			for _, part := range []string{"train", "test"} {
				if fi, err := os.Stat(filepath.Join(dir, dom+"_"+part+".txt")); err == nil && !fi.IsDir() {
					names = append(names, dom+"_"+part)
				}
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: %s holds no image lists (<domain>_train.txt, <domain>_test.txt for the domains %s)", ErrNoDomainNet, dir, strings.Join(DomainNetDomains, ", "))
		}
	}
	d := &DomainNet{dir: dir, lists: map[string]*ImageSet{}}
	labelOf := map[string]int{} // category → label, across all lists
	where := map[string]string{}
	parsed := map[string][]listLine{}
	for _, name := range names {
		dom, _, ok := strings.Cut(name, "_")
		if !ok || !slices.Contains(DomainNetDomains, dom) || (name != dom+"_train" && name != dom+"_test") {
			return nil, fmt.Errorf("datasets: %q is not a DomainNet list (want <domain>_train or <domain>_test, domains %s)", name, strings.Join(DomainNetDomains, ", "))
		}
		if _, dup := parsed[name]; dup {
			return nil, fmt.Errorf("datasets: DomainNet list %s named twice", name)
		}
		file := filepath.Join(dir, name+".txt")
		data, err := readFileAtMost(file, 256<<20)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s is missing", ErrNoDomainNet, file)
			}
			return nil, err
		}
		lines, err := parseDomainList(file, dom, data)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			at := fmt.Sprintf("%s:%d", file, l.line)
			if prev, ok := labelOf[l.category]; ok && prev != l.label {
				return nil, fmt.Errorf("datasets: %s: category %s has label %d, but %d at %s", at, l.category, l.label, prev, where[l.category])
			}
			labelOf[l.category] = l.label
			where[l.category] = at
		}
		parsed[name] = lines
	}
	byLabel := map[int]string{}
	for c, l := range labelOf {
		if prev, ok := byLabel[l]; ok {
			return nil, fmt.Errorf("datasets: label %d names both %s (%s) and %s (%s)", l, prev, where[prev], c, where[c])
		}
		byLabel[l] = c
	}
	maxLabel := 0
	for l := range byLabel {
		maxLabel = max(maxLabel, l)
	}
	d.categories = make([]string, maxLabel+1)
	for l, c := range byLabel {
		d.categories[l] = c
	}
	for _, name := range names {
		set, err := loadDomainList(dir, name, parsed[name], side, opts)
		if err != nil {
			return nil, err
		}
		d.lists[name] = set
	}
	return d, nil
}

// listLine is one image of a DomainNet list.
type listLine struct {
	path, category string
	label, line    int
}

// parseDomainList reads "domain/category/file label" lines; the domain must
// be the list's. Blank lines are skipped, surrounding white space ignored;
// anything else is an error naming the file and line.
func parseDomainList(file, domain string, data []byte) ([]listLine, error) {
	var out []listLine
	seen := map[string]int{}
	err := forEachLine(data, func(n int, line string) error {
		bad := func(why string) error { return malformedLine(file, n, "list", line, 100, why) }
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return bad(fmt.Sprintf("%d fields, want path and label (e.g. %s/aircraft_carrier/%s_001_000018.jpg 0)", len(fields), domain, domain))
		}
		parts := strings.Split(fields[0], "/")
		if len(parts) != 3 || !validPart(parts[1]) || !validPart(parts[2]) {
			return bad("the path must be domain/category/file")
		}
		if parts[0] != domain {
			return bad(fmt.Sprintf("the image is in domain %q, the list is %s's", parts[0], domain))
		}
		label, err := strconv.Atoi(fields[1])
		if err != nil || label < 0 || label > 1<<16 || fields[1] != strconv.Itoa(label) {
			return bad("the label must be a non-negative integer")
		}
		if prev, dup := seen[fields[0]]; dup {
			return bad(fmt.Sprintf("image already listed at line %d", prev))
		}
		seen[fields[0]] = n
		out = append(out, listLine{path: fields[0], category: parts[1], label: label, line: n})
		return nil
	})
	return listed(out, err, file, "images")
}

// loadDomainList decodes (or reads from the cache) the images of one list,
// grouped by category in label order, each category's images in list
// order, at most opts.MaxPerClass of each.
func loadDomainList(dir, name string, lines []listLine, side int, opts DomainNetOptions) (*ImageSet, error) {
	start := time.Now()
	byLabel := map[int][]listLine{}
	for _, l := range lines {
		if opts.MaxPerClass > 0 && len(byLabel[l.label]) == opts.MaxPerClass {
			continue
		}
		byLabel[l.label] = append(byLabel[l.label], l)
	}
	labels := make([]int, 0, len(byLabel))
	for l := range byLabel {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	h := sha256.New()
	fmt.Fprintf(h, "mkbench domainnet v%d %s %d %d\n", imageCacheVersion, name, side, opts.MaxPerClass)
	var classes []ImageClass
	var files []drawingFile
	for _, l := range labels {
		ls := byLabel[l]
		classes = append(classes, ImageClass{Name: ls[0].category, Images: len(ls)})
		for _, e := range ls {
			p := filepath.Join(dir, filepath.FromSlash(e.path))
			fi, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("datasets: %s:%d: %w", filepath.Join(dir, name+".txt"), e.line, err)
			}
			fmt.Fprintf(h, "%s %d\n", e.path, l)
			hashFileState(h, fi.Size(), fi.ModTime().UnixNano())
			files = append(files, imageFile(p))
		}
	}
	job := imageJob{family: "domainnet", title: "DomainNet " + name, side: side, classes: classes, files: files, sources: []string{filepath.Join(dir, name+".txt")}}
	h.Sum(job.key[:0])
	return loadImages(job, opts.ImageOptions, start)
}

// DomainSplit says where the episodes of one phase come from: each task
// draws its support set from one of the Support lists, chosen uniformly,
// and its query set from the same list (Query nil: the task stays in one
// domain) or from one of the Query lists of another domain, chosen
// uniformly (the task crosses domains). Classes restricts the categories
// (nil: every category present).
type DomainSplit struct {
	Name           string
	Support, Query []string
	Classes        []string
}

// DomainNetProtocol returns the train, validation and test splits of
// few-shot domain generalization with target held out (the paper's
// DomainNet table, after MetaNorm, Du et al. 2021): tasks of the five
// source domains for training (their _train lists) and validation (their
// _test lists), and tasks whose queries come from target's _test list for
// testing, so the target domain is never seen in training.
//
// With sameDomain false — our reading of the paper's "we test the model on
// tasks in a query set, which come from a different domain than the
// support set" — every task's support and query sets come from two
// different domains: training and validation tasks from two source
// domains, test tasks with support from a source domain (its _test list)
// and queries from the target. With sameDomain true, every task stays in
// one domain: a source domain in training and validation, the target at
// test time (support and query from target's _test list). Every split uses
// all categories, the label space DomainNet's domains share.
func DomainNetProtocol(target string, sameDomain bool) (train, val, test DomainSplit, err error) {
	if target == "" {
		target = DefaultDomainNetTarget
	}
	if !slices.Contains(DomainNetDomains, target) {
		return train, val, test, fmt.Errorf("datasets: unknown DomainNet domain %q (want one of %s)", target, strings.Join(DomainNetDomains, ", "))
	}
	var srcTrain, srcTest []string
	for _, d := range DomainNetDomains {
		if d != target {
			srcTrain = append(srcTrain, d+"_train")
			srcTest = append(srcTest, d+"_test")
		}
	}
	train = DomainSplit{Name: "train", Support: srcTrain}
	val = DomainSplit{Name: "val", Support: srcTest}
	test = DomainSplit{Name: "test", Support: []string{target + "_test"}}
	if !sameDomain {
		train.Query, val.Query = srcTrain, srcTest
		test = DomainSplit{Name: "test", Support: srcTest, Query: []string{target + "_test"}}
	}
	return train, val, test, nil
}

// DomainEpisodes draws N-way k-shot tasks across DomainNet's domains (see
// DomainSplit) with the episodic protocol of ClassEpisodes: way distinct
// categories chosen uniformly among those every chosen list holds with
// enough images, shot support and query query images of each without
// replacement, labels in a random order, one-hot targets, rows
// class-major. A task consumes the rng in a fixed order: the (support,
// query) list pair, the way categories, then for each label its support
// draws and its query draws. It implements task.Source and is safe
// for concurrent use.
type DomainEpisodes struct {
	name             string
	way, shot, query int
	in               int
	// pairs are the (support list, query list) combinations, with the
	// categories each can draw as class indices in each list.
	pairs []episodePool
}

// setClasses gives an ImageSet the counts the sampler asks for.
type setClasses struct{ *ImageSet }

func (s setClasses) ImagesIn(c int) int { return s.classes[c].Images }

// Episodes returns the episode source of a split.
func (d *DomainNet) Episodes(sp DomainSplit, way, shot, query int) (*DomainEpisodes, error) {
	if err := checkShape(way, shot, query); err != nil {
		return nil, err
	}
	if len(sp.Support) == 0 {
		return nil, fmt.Errorf("datasets: DomainNet split %q names no support lists", sp.Name)
	}
	get := func(name string) (*ImageSet, error) {
		s, ok := d.lists[name]
		if !ok {
			return nil, fmt.Errorf("%w: split %q needs the list %s, which was not loaded from %s (loaded: %s)", ErrNoDomainNet, sp.Name, name, d.dir, strings.Join(d.Lists(), ", "))
		}
		return s, nil
	}
	var want map[string]bool
	if sp.Classes != nil {
		want = map[string]bool{}
		for _, c := range sp.Classes {
			if !slices.Contains(d.categories, c) {
				return nil, fmt.Errorf("datasets: DomainNet split %q names category %q, which no loaded list has", sp.Name, c)
			}
			want[c] = true
		}
	}
	e := &DomainEpisodes{name: sp.Name, way: way, shot: shot, query: query}
	for _, sn := range sp.Support {
		s, err := get(sn)
		if err != nil {
			return nil, err
		}
		qs := []string{sn}
		if sp.Query != nil {
			qs = nil
			for _, qn := range sp.Query {
				if domainOf(qn) != domainOf(sn) {
					qs = append(qs, qn)
				}
			}
		}
		for _, qn := range qs {
			q, err := get(qn)
			if err != nil {
				return nil, err
			}
			p := episodePool{support: setClasses{s}}
			if q != s {
				p.query = setClasses{q}
			}
			for i, c := range s.classes {
				if want != nil && !want[c.Name] {
					continue
				}
				j, ok := q.index[c.Name]
				if !ok {
					continue
				}
				if (s == q && c.Images < shot+query) || (s != q && (c.Images < shot || q.classes[j].Images < query)) {
					continue
				}
				p.classes = append(p.classes, [2]int32{int32(i), int32(j)})
			}
			if len(p.classes) < way {
				return nil, fmt.Errorf("datasets: DomainNet split %q: support from %s and queries from %s share %d categories with %d support and %d query images (%d when one list), %d-way tasks need %d",
					sp.Name, sn, qn, len(p.classes), shot, query, shot+query, way, way)
			}
			e.pairs = append(e.pairs, p)
			e.in = s.InDim()
		}
	}
	if len(e.pairs) == 0 {
		return nil, fmt.Errorf("datasets: DomainNet split %q: no query list of a domain other than the support's", sp.Name)
	}
	return e, nil
}

func domainOf(list string) string { d, _, _ := strings.Cut(list, "_"); return d }

func (e *DomainEpisodes) Name() string { return "domainnet" }
func (e *DomainEpisodes) InDim() int   { return e.in }
func (e *DomainEpisodes) OutDim() int  { return e.way }
func (e *DomainEpisodes) Way() int     { return e.way }
func (e *DomainEpisodes) Shot() int    { return e.shot }
func (e *DomainEpisodes) Query() int   { return e.query }

// Split is the name of the split the episodes come from.
func (e *DomainEpisodes) Split() string { return e.name }

// Sample fills b, which must be sized for this source (NS = way·shot,
// NQ = way·query, InDim, OutDim way), with b.T episodes.
func (e *DomainEpisodes) Sample(rng *rand.Rand, b *task.Batch) {
	checkBatch("DomainEpisodes", b, e.way, e.shot, e.query, e.in)
	var s episodeScratch
	for t := 0; t < b.T; t++ {
		s.draw(rng, b, t, &e.pairs[rng.IntN(len(e.pairs))], e.way, e.shot, e.query)
	}
}
