package datasets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// CIFAR-100 geometry: 32×32 RGB, stored per image as the 1,024 red, then
// green, then blue values, rows top to bottom.
const (
	CIFARSide   = 32
	cifarPixels = CIFARSide * CIFARSide * 3
)

// ErrNoCIFAR is wrapped by the errors LoadCIFARFS returns when the folder
// or the CIFAR-100 files in it are missing, so that a command line can add
// its own hint (for mkbench: the --data flag).
var ErrNoCIFAR = errors.New("datasets: CIFAR-100 data not found")

// The CIFAR-FS class split of Bertinetto et al. as published with
// Torchmeta (MIT, see splits/cifarfs/LICENSE): lists of
// [coarse_label_name, fine_label_name] pairs.
//
//go:embed splits/cifarfs/train.json splits/cifarfs/val.json splits/cifarfs/test.json splits/cifarfs/LICENSE
var cifarfsSplits embed.FS

// CIFARFSSplitLicense is the license of the embedded split lists.
func CIFARFSSplitLicense() string { return embeddedText(cifarfsSplits, "splits/cifarfs/LICENSE") }

// DefaultCIFARFSDir is where mkbench looks for CIFAR-100 when the user names
// no folder: $MKBENCH_DATA/cifarfs, else ./data/cifarfs if it exists, else
// ../shared/data/cifarfs if that exists, else ./data/cifarfs.
func DefaultCIFARFSDir() string { return defaultDataDir("cifarfs") }

// cifarPart is one of CIFAR-100's two files (train: 50,000 images, test:
// 10,000): planar pixels and the labels of each image.
type cifarPart struct {
	pix          []byte // n·3072, planar per image
	fine, coarse []int64
}

// cifar100 is the data set as read, before it is grouped by class.
type cifar100 struct {
	source       string
	fine, coarse []string // label names
	parts        [2]cifarPart
}

// LoadCIFARFS reads CIFAR-100 from dir as its authors distribute it, in
// either version: the python version (cifar-100-python/{train,test,meta},
// pickles written by Python 2) or the binary version
// (cifar-100-binary/{train.bin,test.bin,fine_label_names.txt,
// coarse_label_names.txt}), each as the unpacked folder, as the .tar.gz
// archive it is downloaded as, or with dir being the folder itself.
//
// Classes are the 100 fine classes in label order, each with its 600
// images: its 500 training images, then its 100 test images, in file
// order (CIFAR-FS draws on both). Images are 32×32 RGB. Splits are the
// CIFAR-FS class split (64, 16 and 20 classes; "trainval" is train then
// val), embedded, or the train.json, val.json and test.json of
// opts.SplitDir; each entry's coarse class is checked against the data.
//
// Nothing is cached: the data are stored undecoded, and reading them
// (180 MB) costs what reading a cache would.
func LoadCIFARFS(dir string, opts ImageOptions) (*ImageSet, error) {
	start := time.Now()
	if opts.Side != 0 && opts.Side != CIFARSide {
		return nil, fmt.Errorf("datasets: CIFAR-FS images are %d×%d; side %d is not supported", CIFARSide, CIFARSide, opts.Side)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: folder %s does not exist (it should hold cifar-100-python/ or cifar-100-python.tar.gz)", ErrNoCIFAR, dir)
	}
	d, err := readCIFAR100(dir)
	if err != nil {
		return nil, err
	}
	set, err := d.imageSet()
	if err != nil {
		return nil, err
	}
	if err := addCIFARFSSplits(set, d, opts.SplitDir); err != nil {
		return nil, err
	}
	set.info = ImageLoadInfo{Sources: []string{d.source}, Elapsed: time.Since(start)}
	return set, nil
}

// readCIFAR100 finds and reads whichever version dir holds.
func readCIFAR100(dir string) (*cifar100, error) {
	isDir := func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
	isFile := func(p string) bool { fi, err := os.Stat(p); return err == nil && !fi.IsDir() }
	switch {
	case isDir(filepath.Join(dir, "cifar-100-python")):
		return readCIFARFolder(filepath.Join(dir, "cifar-100-python"), true)
	case isDir(filepath.Join(dir, "cifar-100-binary")):
		return readCIFARFolder(filepath.Join(dir, "cifar-100-binary"), false)
	case isFile(filepath.Join(dir, "cifar-100-python.tar.gz")):
		return readCIFARTar(filepath.Join(dir, "cifar-100-python.tar.gz"), true)
	case isFile(filepath.Join(dir, "cifar-100-binary.tar.gz")):
		return readCIFARTar(filepath.Join(dir, "cifar-100-binary.tar.gz"), false)
	case isFile(filepath.Join(dir, "meta")) && isFile(filepath.Join(dir, "train")):
		return readCIFARFolder(dir, true)
	case isFile(filepath.Join(dir, "train.bin")):
		return readCIFARFolder(dir, false)
	}
	return nil, fmt.Errorf("%w: %s holds neither cifar-100-python/ nor cifar-100-binary/ (nor their .tar.gz archives)", ErrNoCIFAR, dir)
}

// cifarFiles are the files each version needs, relative to its folder.
func cifarFiles(python bool) []string {
	if python {
		return []string{"train", "test", "meta"}
	}
	return []string{"train.bin", "test.bin", "fine_label_names.txt", "coarse_label_names.txt"}
}

// maxCIFARBytes bounds one file of the data set (the python train file is
// 160 MB).
const maxCIFARBytes = 512 << 20

func readCIFARFolder(folder string, python bool) (*cifar100, error) {
	files := map[string][]byte{}
	labels := map[string]string{}
	for _, name := range cifarFiles(python) {
		p := filepath.Join(folder, name)
		data, err := readFileAtMost(p, maxCIFARBytes)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s is missing", ErrNoCIFAR, p)
			}
			return nil, err
		}
		files[name] = data
		labels[name] = p
	}
	return parseCIFAR(folder, python, files, labels)
}

// readCIFARTar reads the needed members of a downloaded archive; members
// are named cifar-100-python/train etc. as in the original archives.
func readCIFARTar(path string, python bool) (*cifar100, error) {
	f, err := runfile.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s is not a gzip archive: %w", path, err)
	}
	folder := "cifar-100-binary/"
	if python {
		folder = "cifar-100-python/"
	}
	want := map[string]bool{}
	for _, n := range cifarFiles(python) {
		want[folder+n] = true
	}
	files := map[string][]byte{}
	labels := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("datasets: %s is not a valid .tar.gz archive: %w", path, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if !want[name] || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > maxCIFARBytes {
			return nil, fmt.Errorf("datasets: %s: member %s is %d bytes, more than CIFAR-100 holds", path, name, h.Size)
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil || int64(len(data)) != h.Size {
			return nil, fmt.Errorf("datasets: %s: member %s is truncated: %v", path, name, err)
		}
		base := strings.TrimPrefix(name, folder)
		files[base] = data
		labels[base] = fmt.Sprintf("%s: member %s", path, name)
	}
	for _, n := range cifarFiles(python) {
		if _, ok := files[n]; !ok {
			return nil, fmt.Errorf("datasets: %s has no member %s%s", path, folder, n)
		}
	}
	return parseCIFAR(path, python, files, labels)
}

func parseCIFAR(source string, python bool, files map[string][]byte, labels map[string]string) (*cifar100, error) {
	d := &cifar100{source: source}
	var err error
	partLabels := [2]string{labels["train.bin"], labels["test.bin"]}
	if python {
		partLabels = [2]string{labels["train"], labels["test"]}
		if d.fine, d.coarse, err = parseCIFARMeta(labels["meta"], files["meta"]); err != nil {
			return nil, err
		}
		for i, name := range []string{"train", "test"} {
			if d.parts[i], err = parseCIFARPickle(labels[name], files[name]); err != nil {
				return nil, err
			}
		}
	} else {
		if d.fine, err = parseLabelNames(labels["fine_label_names.txt"], files["fine_label_names.txt"]); err != nil {
			return nil, err
		}
		if d.coarse, err = parseLabelNames(labels["coarse_label_names.txt"], files["coarse_label_names.txt"]); err != nil {
			return nil, err
		}
		for i, name := range []string{"train.bin", "test.bin"} {
			if d.parts[i], err = parseCIFARBinary(labels[name], files[name]); err != nil {
				return nil, err
			}
		}
	}
	for i, p := range d.parts {
		for k := range p.fine {
			if p.fine[k] < 0 || p.fine[k] >= int64(len(d.fine)) || p.coarse[k] < 0 || p.coarse[k] >= int64(len(d.coarse)) {
				return nil, fmt.Errorf("datasets: %s: image %d has labels fine %d, coarse %d; the data set names %d fine and %d coarse classes",
					partLabels[i], k, p.fine[k], p.coarse[k], len(d.fine), len(d.coarse))
			}
		}
	}
	return d, nil
}

// parseCIFARPickle reads the python version's train or test file: a dict
// with 'data' (a uint8 array of n × 3072), 'fine_labels' and
// 'coarse_labels' (n ints each); 'filenames' and 'batch_label' are not
// needed.
func parseCIFARPickle(label string, data []byte) (cifarPart, error) {
	var p cifarPart
	d, err := pickleDict(label, data)
	if err != nil {
		return p, err
	}
	pix, err := dictArray(label, d, "data")
	if err != nil {
		return p, err
	}
	if pix.kind != 'u' || pix.size != 1 || len(pix.shape) != 2 || pix.shape[1] != cifarPixels || pix.shape[0] == 0 || pix.fortran {
		return p, fmt.Errorf("datasets: %s: 'data' is a %s array of shape %s, want uint8 of shape (n, 3072) in C order", label, pix.dtype(), pix.shapeString())
	}
	p.pix = pix.data
	n := pix.shape[0]
	for _, l := range []struct {
		key string
		dst *[]int64
	}{{"fine_labels", &p.fine}, {"coarse_labels", &p.coarse}} {
		a, err := dictArray(label, d, l.key)
		if err != nil {
			return p, err
		}
		if *l.dst, err = a.ints(fmt.Sprintf("%s: %q", label, l.key)); err != nil {
			return p, fmt.Errorf("datasets: %w", err)
		}
		if len(*l.dst) != n {
			return p, fmt.Errorf("datasets: %s: %d %s for %d images", label, len(*l.dst), l.key, n)
		}
	}
	return p, nil
}

// parseCIFARMeta reads the python version's meta file: a dict with
// 'fine_label_names' and 'coarse_label_names', lists of names.
func parseCIFARMeta(label string, data []byte) (fine, coarse []string, err error) {
	d, err := pickleDict(label, data)
	if err != nil {
		return nil, nil, err
	}
	names := func(key string) ([]string, error) {
		v, ok := d.get(key)
		if !ok {
			return nil, fmt.Errorf("datasets: %s has no %q entry (it has %s)", label, key, strings.Join(d.keyNames(), ", "))
		}
		l, ok := v.(*pyList)
		if !ok || len(l.items) == 0 {
			return nil, fmt.Errorf("datasets: %s: %q is a %s, want a list of names", label, key, pyTypeName(v))
		}
		out := make([]string, len(l.items))
		for i, it := range l.items {
			s, ok := pyText(it)
			if !ok || !validLabelName(s) {
				return nil, fmt.Errorf("datasets: %s: %q[%d] is not a class name", label, key, i)
			}
			out[i] = s
		}
		return out, nil
	}
	if fine, err = names("fine_label_names"); err != nil {
		return nil, nil, err
	}
	coarse, err = names("coarse_label_names")
	return fine, coarse, err
}

// validLabelName accepts CIFAR's names (lower case, digits, '_' and '-')
// and anything else printable without spaces or slashes.
func validLabelName(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsAny(s, " /\\\t\r\n\x00")
}

// parseLabelNames reads the binary version's fine_label_names.txt or
// coarse_label_names.txt: one name per line; blank lines (the files end in
// some) are skipped.
func parseLabelNames(label string, data []byte) ([]string, error) {
	var out []string
	err := forEachLine(data, func(n int, s string) error {
		if !validLabelName(s) {
			return fmt.Errorf("datasets: %s:%d: %q is not a class name", label, n, clip(s, 80))
		}
		out = append(out, s)
		return nil
	})
	return listed(out, err, label, "class names")
}

// parseCIFARBinary reads train.bin or test.bin: records of a coarse label
// byte, a fine label byte and 3,072 pixel bytes.
func parseCIFARBinary(label string, data []byte) (cifarPart, error) {
	const rec = 2 + cifarPixels
	var p cifarPart
	if len(data) == 0 || len(data)%rec != 0 {
		return p, fmt.Errorf("datasets: %s is %d bytes, not a whole number of %d-byte records", label, len(data), rec)
	}
	n := len(data) / rec
	p.pix = make([]byte, n*cifarPixels)
	p.fine = make([]int64, n)
	p.coarse = make([]int64, n)
	for i := 0; i < n; i++ {
		r := data[i*rec:]
		p.coarse[i], p.fine[i] = int64(r[0]), int64(r[1])
		copy(p.pix[i*cifarPixels:], r[2:rec])
	}
	return p, nil
}

// imageSet groups the images by fine class, training images first, and
// turns the planar pixels into interleaved RGB.
func (d *cifar100) imageSet() (*ImageSet, error) {
	count := make([]int, len(d.fine))
	for _, p := range d.parts {
		for _, f := range p.fine {
			count[f]++
		}
	}
	classes := make([]ImageClass, len(d.fine))
	for i, name := range d.fine {
		if count[i] == 0 {
			return nil, fmt.Errorf("datasets: %s: fine class %d (%s) has no images", d.source, i, name)
		}
		classes[i] = ImageClass{Name: name, Images: count[i]}
	}
	set, err := newImageSet("cifarfs", "CIFAR-100", CIFARSide, CIFARSide, classes, [32]byte{}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, d.source)
	}
	next := make([]int, len(d.fine))
	for c := range next {
		next[c] = classes[c].first
	}
	const plane = CIFARSide * CIFARSide
	for _, p := range d.parts {
		for k, f := range p.fine {
			src := p.pix[k*cifarPixels:][:cifarPixels]
			dst := set.pix[next[f]*cifarPixels:][:cifarPixels]
			next[f]++
			for i := 0; i < plane; i++ {
				dst[3*i], dst[3*i+1], dst[3*i+2] = src[i], src[plane+i], src[2*plane+i]
			}
		}
	}
	return set, nil
}

// coarseOf returns each fine class's coarse class, which every image of it
// must agree on.
func (d *cifar100) coarseOf() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range d.parts {
		for k, f := range p.fine {
			fine, coarse := d.fine[f], d.coarse[p.coarse[k]]
			if prev, ok := out[fine]; ok && prev != coarse {
				return nil, fmt.Errorf("datasets: %s: fine class %s has images in coarse classes %s and %s", d.source, fine, prev, coarse)
			}
			out[fine] = coarse
		}
	}
	return out, nil
}

// addCIFARFSSplits registers train, val, test and trainval from the
// embedded lists or dir's JSON files.
func addCIFARFSSplits(set *ImageSet, d *cifar100, dir string) error {
	coarse, err := d.coarseOf()
	if err != nil {
		return err
	}
	for _, name := range miniSplitFiles {
		var data []byte
		var file string
		if dir == "" {
			file = "splits/cifarfs/" + name + ".json"
			data, err = cifarfsSplits.ReadFile(file)
		} else {
			file = filepath.Join(dir, name+".json")
			data, err = readFileAtMost(file, 16<<20)
		}
		if err != nil {
			return fmt.Errorf("datasets: %w", err)
		}
		pairs, err := parseCIFARFSSplit(file, data)
		if err != nil {
			return err
		}
		names := make([]string, len(pairs))
		for i, p := range pairs {
			if got, ok := coarse[p[1]]; ok && got != p[0] {
				return fmt.Errorf("datasets: %s: entry %d [%q, %q]: in %s, %s is in coarse class %s", file, i, p[0], p[1], d.source, p[1], got)
			}
			names[i] = p[1]
		}
		if err := set.addSplit(name, file, names); err != nil {
			return err
		}
	}
	set.addUnion("trainval", "train", "val")
	return nil
}

// parseCIFARFSSplit reads a JSON list of [coarse, fine] name pairs.
func parseCIFARFSSplit(file string, data []byte) ([][2]string, error) {
	var raw [][]string
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("datasets: %s is not a JSON list of [coarse, fine] name pairs: %v", file, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("datasets: %s: text after the list", file)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("datasets: %s lists no classes", file)
	}
	out := make([][2]string, len(raw))
	for i, p := range raw {
		if len(p) != 2 || !validLabelName(p[0]) || !validLabelName(p[1]) {
			return nil, fmt.Errorf("datasets: %s: entry %d is %q, want [coarse_label_name, fine_label_name]", file, i, p)
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}
