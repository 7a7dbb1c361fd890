package datasets

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// ErrNoFolder is wrapped by the errors LoadFolder returns for a folder that
// is missing or holds no class folders.
var ErrNoFolder = errors.New("datasets: image folder not found")

// FolderSplits are the split names of a folder family, in order.
var FolderSplits = []string{"train", "val", "test"}

// FolderOptions tunes LoadFolder.
type FolderOptions struct {
	ImageOptions // Side must be set (the model's input size); SplitDir is unused
	// Fractions of the classes that go to train, val and test when the
	// folder has no split folders; the zero value is 0.6, 0.2, 0.2.
	Fractions [3]float64
	// SplitSeed seeds that division (the classes, sorted by name, are
	// shuffled with it), so the split does not move with a run's seed.
	SplitSeed uint64
	// Need lists what the episodes to be drawn from the folder need.
	// LoadFolder checks them against the class folders' listings before
	// it reads any image, so a folder too small is refused at once rather
	// than after its images are decoded.
	Need []FolderNeed
}

// FolderNeed is what the episodes of one split of a folder need: Way
// classes, each with Examples images (shots and queries).
type FolderNeed struct {
	Split         string // "train", "val", "test" or "all"; other names are not checked
	Way, Examples int
}

// imageExts are the file types a class folder's images may have.
var imageExts = []string{".png", ".jpg", ".jpeg"}

// LoadFolder reads a user's own image classes: dir/<class>/*.png|jpg|jpeg,
// or dir/{train,val,test}/<class>/… (valid is taken for val). Each image is
// decoded to RGB and area-resized to opts.Side square, as the other colour
// sets are, and cached the same way. Its splits are "train", "val",
// "test" (those with classes) and "all" (every class). Without split
// folders the classes, sorted by name, are shuffled with opts.SplitSeed
// and divided by opts.Fractions; a class is named "<class>", or
// "<split>/<class>" with split folders. An empty class folder, an image
// that cannot be decoded, or a folder without classes is an error naming
// the path; so are, before any image is decoded, a folder short of what
// opts.Need asks and an image file that is not a regular file or is
// larger than 64 MB, and an image whose decode would pass the budget of
// the package's Image memory.
func LoadFolder(dir string, opts FolderOptions) (*ImageSet, error) {
	start := time.Now()
	if opts.Side < 1 || opts.Side > 1024 {
		return nil, fmt.Errorf("datasets: image size %d, want 1 to 1024", opts.Side)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a folder (want DIR/<class>/*.png|jpg, or DIR/train/<class>/…)", ErrNoFolder, dir)
	}
	layout, err := folderLayout(dir, opts)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "mkbench folder v%d %d\n", imageCacheVersion, opts.Side)
	var classes []ImageClass
	classPaths := make([][]string, len(layout.classes))
	for i, c := range layout.classes {
		paths, err := classImages(filepath.Join(dir, c))
		if err != nil {
			return nil, err
		}
		classPaths[i] = paths
		classes = append(classes, ImageClass{Name: filepath.ToSlash(c), Images: len(paths)})
	}
	if err := checkFolderNeeds(dir, layout, classes, opts.Need); err != nil {
		return nil, err
	}
	var files []drawingFile
	for i, c := range classes {
		fmt.Fprintf(h, "class %s %d\n", c.Name, c.Images)
		for _, p := range classPaths[i] {
			f := imageFile(p)
			fi, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("datasets: %w", err)
			}
			// Refused here, before anything is decoded, and for
			// good: reading a FIFO or device could block or
			// never end.
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("datasets: %s is not a regular file (%s); keep only image files in the class folders", f.label, fileKind(fi.Mode()))
			}
			if fi.Size() > maxImageBytes {
				return nil, fmt.Errorf("datasets: %s is %s, more than the %s an image file may be; downscale it", f.label, runfile.Size(fi.Size()), runfile.Size(maxImageBytes))
			}
			h.Write([]byte(filepath.Base(p)))
			hashFileState(h, fi.Size(), fi.ModTime().UnixNano())
			files = append(files, f)
		}
	}
	var key [32]byte
	h.Sum(key[:0])
	job := imageJob{family: "folder", title: "folder " + dir, side: opts.Side, classes: classes, files: files, key: key, sources: []string{dir}}
	s, err := loadImages(job, opts.ImageOptions, start)
	if err != nil {
		return nil, err
	}
	for _, sp := range FolderSplits {
		if names := layout.splits[sp]; len(names) > 0 {
			if err := s.addSplit(sp, dir, names); err != nil {
				return nil, err
			}
		}
	}
	s.addUnion("all", s.order...)
	return s, nil
}

// checkFolderNeeds refuses a folder whose splits cannot give the episodes
// needs asks for, from its listing alone. A split the folder has no
// folder for has no classes.
func checkFolderNeeds(dir string, layout folderLayoutOf, classes []ImageClass, needs []FolderNeed) error {
	images := make(map[string]int, len(classes))
	for _, c := range classes {
		images[c.Name] = c.Images
	}
	for _, n := range needs {
		names := layout.splits[n.Split]
		if !slices.Contains(FolderSplits, n.Split) && n.Split != "all" {
			continue // not a folder's split: Split will say so
		}
		if n.Split == "all" {
			names = nil
			for _, c := range classes {
				names = append(names, c.Name)
			}
		}
		if len(names) < n.Way {
			return fmt.Errorf("datasets: %s: %d-way episodes need %d classes, its %s split has %d; add class folders or lower way", runfile.Printable(dir), n.Way, n.Way, n.Split, len(names))
		}
		for _, c := range names {
			if images[c] < n.Examples {
				return fmt.Errorf("datasets: %s: episodes need %d images a class (shots and queries), class %s of its %s split has %d; add images or lower shot or query", runfile.Printable(dir), n.Examples, runfile.Printable(c), n.Split, images[c])
			}
		}
	}
	return nil
}

// folderLayoutOf is a folder's classes (relative paths) and splits.
type folderLayoutOf struct {
	classes []string
	splits  map[string][]string // split → class names (slash form)
}

// folderLayout finds the classes of dir and their splits.
func folderLayout(dir string, opts FolderOptions) (folderLayoutOf, error) {
	out := folderLayoutOf{splits: map[string][]string{}}
	top, err := subdirs(dir)
	if err != nil {
		return out, err
	}
	isSplit := func(n string) string {
		switch n {
		case "train", "test":
			return n
		case "val", "valid", "validation":
			return "val"
		}
		return ""
	}
	var splitDirs []string
	for _, d := range top {
		if isSplit(d) != "" {
			splitDirs = append(splitDirs, d)
		}
	}
	if len(splitDirs) > 0 {
		if len(splitDirs) != len(top) {
			return out, fmt.Errorf("datasets: %s mixes split folders (%s) with class folders; put every class under train/, val/ or test/", dir, strings.Join(splitDirs, ", "))
		}
		for _, sd := range splitDirs {
			cls, err := subdirs(filepath.Join(dir, sd))
			if err != nil {
				return out, err
			}
			if len(cls) == 0 {
				return out, fmt.Errorf("%w: %s has no class folders", ErrNoFolder, filepath.Join(dir, sd))
			}
			for _, c := range cls {
				rel := filepath.Join(sd, c)
				out.classes = append(out.classes, rel)
				out.splits[isSplit(sd)] = append(out.splits[isSplit(sd)], filepath.ToSlash(rel))
			}
		}
		return out, nil
	}
	if len(top) == 0 {
		return out, fmt.Errorf("%w: %s has no class folders (want DIR/<class>/*.png|jpg)", ErrNoFolder, dir)
	}
	out.classes = top
	fr := opts.Fractions
	if fr == [3]float64{} {
		fr = [3]float64{0.6, 0.2, 0.2}
	}
	if fr[0] < 0 || fr[1] < 0 || fr[2] < 0 || fr[0]+fr[1]+fr[2] <= 0 {
		return out, fmt.Errorf("datasets: split fractions %v, want three non-negative numbers with a positive sum", fr)
	}
	shuffled := slices.Clone(top)
	rng := rand.New(rand.NewPCG(opts.SplitSeed, 0x5eed))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sum := fr[0] + fr[1] + fr[2]
	n := len(shuffled)
	nTrain := int(float64(n) * fr[0] / sum)
	nVal := int(float64(n) * fr[1] / sum)
	out.splits["train"] = shuffled[:nTrain]
	out.splits["val"] = shuffled[nTrain : nTrain+nVal]
	out.splits["test"] = shuffled[nTrain+nVal:]
	return out, nil
}

// subdirs lists the folders in dir, sorted, skipping hidden ones.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.IsDir() {
			out = append(out, e.Name())
		} else if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
			out = append(out, e.Name()) // a link to a folder
		}
	}
	return out, nil
}

// classImages lists a class folder's images, sorted by name.
func classImages(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(imageExts, strings.ToLower(filepath.Ext(e.Name()))) && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("datasets: class folder %s has no images (.png, .jpg, .jpeg); add some or remove the folder", runfile.Printable(dir))
	}
	return out, nil
}

// PixelMode says how a model reads images: the channels it takes (3: RGB;
// 1: the mean of R, G and B), Ink for Omniglot's convention (1 − grey:
// strokes 1 on background 0), Signed for values in [−1, 1] (Meta-Dataset's
// 2·(x − 0.5)) instead of [0, 1].
type PixelMode struct {
	Channels int
	Ink      bool
	Signed   bool
}

// Converted is a class set of colour images as a model with mode reads
// them, under the family name family (a folder evaluated by an Omniglot
// model is presented as Omniglot episodes: same size, channels and pixel
// convention).
type Converted struct {
	*ImageClasses
	mode   PixelMode
	family string
}

// Convert returns c read with mode as family ("" keeps c's family).
func Convert(c *ImageClasses, mode PixelMode, family string) (*Converted, error) {
	if mode.Channels != 1 && mode.Channels != 3 {
		return nil, fmt.Errorf("datasets: %d channels, want 1 or 3", mode.Channels)
	}
	if mode.Ink && mode.Channels != 1 {
		return nil, errors.New("datasets: ink images have one channel")
	}
	if family == "" {
		family = c.Family()
	}
	return &Converted{ImageClasses: c, mode: mode, family: family}, nil
}

func (c *Converted) Family() string { return c.family }
func (c *Converted) InDim() int     { return c.set.h * c.set.w * c.mode.Channels }

// Image writes example k of class i as the mode reads it; safe for
// concurrent use, as ImageClasses is.
func (c *Converted) Image(i, k int, dst []float64) {
	src := c.set.Pixels(c.classes[i], k)
	if c.mode.Channels == 3 {
		for j, v := range src {
			dst[j] = c.scale(inkLevels[v])
		}
		return
	}
	for p := 0; p < len(src)/3; p++ {
		g := (inkLevels[src[3*p]] + inkLevels[src[3*p+1]] + inkLevels[src[3*p+2]]) / 3
		if c.mode.Ink {
			g = 1 - g
		}
		dst[p] = c.scale(g)
	}
}

func (c *Converted) scale(v float64) float64 {
	if c.mode.Signed {
		return 2*v - 1
	}
	return v
}

// FolderChannels says how many channels the first image of a folder
// family has (1 for a grey PNG or JPEG, else 3), the default of a folder
// preset's channels.
func FolderChannels(dir string) (int, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return 0, fmt.Errorf("%w: %s is not a folder (want DIR/<class>/*.png|jpg, or DIR/train/<class>/…)", ErrNoFolder, dir)
	}
	layout, err := folderLayout(dir, FolderOptions{})
	if err != nil {
		return 0, err
	}
	paths, err := classImages(filepath.Join(dir, layout.classes[0]))
	if err != nil {
		return 0, err
	}
	data, err := readFileAtMost(paths[0], maxImageBytes)
	if err != nil {
		return 0, err
	}
	return imageChannelsOf(paths[0], data)
}

// imageChannelsOf is 1 for a grey image, else 3, read from the header.
func imageChannelsOf(label string, data []byte) (int, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, fmt.Errorf("datasets: %s: not a JPEG or PNG image: %v", label, err)
	}
	switch cfg.ColorModel {
	case color.GrayModel, color.Gray16Model:
		return 1, nil
	}
	return 3, nil
}
