package datasets

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MiniImageNetSide is the side of miniImageNet images as every few-shot
// paper uses them (Vinyals et al.; Ravi & Larochelle).
const MiniImageNetSide = 84

// ErrNoMiniImageNet is wrapped by the errors LoadMiniImageNet returns when
// the data folder is missing or holds none of the listed images, so that a
// command line can add its own hint (for mkbench: the --data flag).
var ErrNoMiniImageNet = errors.New("datasets: miniImageNet data not found")

// The Ravi & Larochelle split as published with Prototypical Networks (MIT,
// see splits/ravi/LICENSE), gzipped: 1.9 MB of CSV become 155 KB, and a
// user needs only the images.
//
//go:embed splits/ravi/train.csv.gz splits/ravi/val.csv.gz splits/ravi/test.csv.gz splits/ravi/LICENSE
var raviSplits embed.FS

// MiniImageNetSplitLicense is the license of the embedded split lists, for
// a program's notices.
func MiniImageNetSplitLicense() string { return embeddedText(raviSplits, "splits/ravi/LICENSE") }

// DefaultMiniImageNetDir is where mkbench looks for miniImageNet when the
// user names no folder: $MKBENCH_DATA/miniimagenet, else
// ./data/miniimagenet if it exists, else ../shared/data/miniimagenet if
// that exists, else ./data/miniimagenet.
func DefaultMiniImageNetDir() string { return defaultDataDir("miniimagenet") }

// miniSplitFiles are the split files in the order their classes are
// numbered.
var miniSplitFiles = [3]string{"train", "val", "test"}

// LoadMiniImageNet reads miniImageNet from dir: the 60,000 images of the
// Ravi & Larochelle split, anywhere under dir (typically dir/images/, as
// the widely shared copy unpacks), found by their file names
// (n0153282900000005.jpg). The split lists are the embedded ones, or
// train.csv, val.csv and test.csv of opts.SplitDir. Images are decoded
// (JPEG or PNG), converted to RGB and area-filtered to opts.Side (84)
// square, the aspect ratio not kept, as PIL's resize((84, 84)) does.
//
// Classes are numbered as they first appear in train.csv, val.csv,
// test.csv (64, 16 and 20 classes), each class's images in list order.
// Splits: "train", "val", "test" and "trainval" (train then val).
//
// The decoded images (1.27 GB at 84×84) are cached in a file named by a key
// over the split lists and each listed file's name, size and modification
// time, so a second start reads one file instead of decoding 60,000 JPEGs.
// A damaged cache is ignored and rewritten; failing to write it is
// reported in Info, not as an error.
func LoadMiniImageNet(dir string, opts ImageOptions) (*ImageSet, error) {
	start := time.Now()
	side := opts.Side
	if side == 0 {
		side = MiniImageNetSide
	}
	if side < 1 || side > 1024 {
		return nil, fmt.Errorf("datasets: miniImageNet side %d, want 1 to 1024", side)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: folder %s does not exist (it should hold the 60,000 images, e.g. in %s)", ErrNoMiniImageNet, dir, filepath.Join(dir, "images"))
	}
	lists, err := readMiniSplits(opts.SplitDir)
	if err != nil {
		return nil, err
	}
	// Classes in order of first appearance; a class in two split files
	// would leak test classes into training.
	type entry struct {
		row  csvRow
		file string
	}
	var classes []ImageClass
	classOf := map[string]int{}
	splitOf := map[string]string{}
	byClass := [][]entry{}
	seen := map[string]string{}
	splitNames := map[string][]string{}
	var listed int
	for i, rows := range lists.rows {
		file := lists.files[i]
		for _, r := range rows {
			where := fmt.Sprintf("%s:%d", file, r.line)
			if prev, dup := seen[r.name]; dup {
				return nil, fmt.Errorf("datasets: %s: image %s already listed at %s", where, r.name, prev)
			}
			seen[r.name] = where
			c, ok := classOf[r.label]
			if !ok {
				c = len(classes)
				classOf[r.label] = c
				splitOf[r.label] = file
				classes = append(classes, ImageClass{Name: r.label})
				byClass = append(byClass, nil)
				splitNames[miniSplitFiles[i]] = append(splitNames[miniSplitFiles[i]], r.label)
			} else if splitOf[r.label] != file {
				return nil, fmt.Errorf("datasets: %s: class %s is also in %s; splits must not share classes", where, r.label, splitOf[r.label])
			}
			byClass[c] = append(byClass[c], entry{r, file})
			listed++
		}
	}
	found, err := findImageFiles(dir, seen)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "mkbench miniimagenet v%d %d\n", imageCacheVersion, side)
	h.Write(lists.sum[:])
	files := make([]drawingFile, 0, listed)
	var missing []string
	for c, entries := range byClass {
		classes[c].Images = len(entries)
		for _, e := range entries {
			f, ok := found[e.row.name]
			if !ok {
				if len(missing) < 3 {
					missing = append(missing, fmt.Sprintf("%s (%s:%d)", e.row.name, e.file, e.row.line))
				}
				continue
			}
			h.Write([]byte(e.row.name))
			hashFileState(h, f.size, f.mtime)
			files = append(files, imageFile(f.path))
		}
	}
	if n := listed - len(files); n > 0 {
		err := fmt.Errorf("datasets: %d of the %d images listed in the split files are missing under %s, e.g. %s", n, listed, dir, strings.Join(missing, ", "))
		if len(files) == 0 {
			err = fmt.Errorf("%w: %s holds none of the %d images of the split files (e.g. %s)", ErrNoMiniImageNet, dir, listed, missing[0])
		}
		return nil, err
	}
	job := imageJob{family: "miniimagenet", title: "miniImageNet", side: side, classes: classes, files: files, sources: []string{dir}}
	h.Sum(job.key[:0])
	set, err := loadImages(job, opts, start)
	if err != nil {
		return nil, err
	}
	for _, sp := range miniSplitFiles {
		if err := set.addSplit(sp, sp+".csv", splitNames[sp]); err != nil {
			return nil, err
		}
	}
	set.addUnion("trainval", "train", "val")
	return set, nil
}

// miniLists is the three split lists with their file names for messages
// and a hash of their contents for the cache key.
type miniLists struct {
	files [3]string
	rows  [3][]csvRow
	sum   [32]byte
}

// readMiniSplits reads train.csv, val.csv and test.csv from dir, or the
// embedded copies when dir is "".
func readMiniSplits(dir string) (miniLists, error) {
	var l miniLists
	h := sha256.New()
	for i, name := range miniSplitFiles {
		var data []byte
		var err error
		if dir == "" {
			l.files[i] = "splits/ravi/" + name + ".csv"
			data, err = gunzipEmbedded(raviSplits, l.files[i]+".gz")
		} else {
			l.files[i] = filepath.Join(dir, name+".csv")
			data, err = readFileAtMost(l.files[i], 64<<20)
		}
		if err != nil {
			return l, err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
		if l.rows[i], err = parseMiniCSV(l.files[i], data); err != nil {
			return l, err
		}
	}
	h.Sum(l.sum[:0])
	return l, nil
}

func gunzipEmbedded(fsys embed.FS, name string) ([]byte, error) {
	z, err := fsys.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err) // unreachable: the files are embedded
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", name, err)
	}
	return io.ReadAll(r)
}

// csvRow is one image of a split list.
type csvRow struct {
	name, label string
	line        int
}

// parseMiniCSV reads a Ravi & Larochelle split list: the header
// "filename,label", then one "file,label" line per image, e.g.
// "n0153282900000005.jpg,n01532829". Blank lines are skipped and
// surrounding white space (a Windows line end, a byte-order mark) is
// ignored; anything else is an error naming the file and line.
func parseMiniCSV(file string, data []byte) ([]csvRow, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []csvRow
	header := false
	err := forEachLine(data, func(n int, line string) error {
		bad := func(why string) error { return malformedLine(file, n, "split", line, 80, why) }
		if !header {
			if line != "filename,label" {
				return bad(`the first line must be the header "filename,label"`)
			}
			header = true
			return nil
		}
		name, label, ok := strings.Cut(line, ",")
		switch {
		case !ok || strings.Contains(label, ","):
			return bad("want two fields, file,label (e.g. n0153282900000005.jpg,n01532829)")
		case !validPart(name) || strings.ContainsAny(name, "/ \t\r"):
			return bad("the file must be a plain file name")
		case !validPart(label) || strings.ContainsAny(label, "/ \t\r"):
			return bad("the label must be a class name without spaces or slashes")
		}
		out = append(out, csvRow{name: name, label: label, line: n})
		return nil
	})
	return listed(out, err, file, "images")
}

// foundFile is an image file found under the data folder.
type foundFile struct {
	path        string
	size, mtime int64
}

// findImageFiles walks dir for the files whose base names are keys of
// want; a wanted name found twice is an error, since either could be
// meant. Operating-system litter (dot files, __MACOSX) is skipped.
func findImageFiles(dir string, want map[string]string) (map[string]foundFile, error) {
	found := make(map[string]foundFile, len(want))
	err := walkFiles(dir, func(p string, d fs.DirEntry) error {
		if _, ok := want[d.Name()]; !ok {
			return nil
		}
		if prev, dup := found[d.Name()]; dup {
			return fmt.Errorf("%s and %s have the same name; remove one", prev.path, p)
		}
		fi, err := os.Stat(p) // follows links, unlike the DirEntry
		if err != nil {
			return err
		}
		found[d.Name()] = foundFile{path: p, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("datasets: reading folder %s: %w", dir, err)
	}
	return found, nil
}
