package datasets

import (
	"embed"
	"fmt"
	"io"
	"strings"
)

// The Vinyals et al. character split as published with Prototypical
// Networks (MIT, see splits/vinyals/LICENSE). It is small (200 KB), so it
// ships inside the binary and a user needs only the image zips.
//
//go:embed splits/vinyals/train.txt splits/vinyals/val.txt splits/vinyals/test.txt splits/vinyals/LICENSE
var vinyalsSplits embed.FS

// VinyalsSplitLicense is the license of the embedded split lists, for a
// program's notices.
func VinyalsSplitLicense() string { return embeddedText(vinyalsSplits, "splits/vinyals/LICENSE") }

// OmniglotSplitNames lists the splits Split accepts. trainval is train
// followed by val, for a final model trained on both.
func OmniglotSplitNames() []string { return []string{"train", "val", "test", "trainval"} }

// OmniglotClass is one class of a split: a character turned
// counter-clockwise by Rotation degrees (0, 90, 180 or 270). Each rotation
// of a character is a separate class.
type OmniglotClass struct {
	Character int // index into Omniglot.Character
	Rotation  int // degrees counter-clockwise
}

// ClassSet is the classes of one split, each with OmniglotDrawings images.
// It is immutable and safe for concurrent use.
type ClassSet struct {
	name    string
	data    *Omniglot
	classes []OmniglotClass
}

// Name is the split's name, e.g. "train".
func (s *ClassSet) Name() string { return s.name }

// NumClasses is 4,112, 688, 1,692 and 4,800 for the Vinyals train, val,
// test and trainval splits.
func (s *ClassSet) NumClasses() int { return len(s.classes) }

// ImagesPerClass is OmniglotDrawings (20).
func (s *ClassSet) ImagesPerClass() int { return OmniglotDrawings }

// Class returns class i in split-file order.
func (s *ClassSet) Class(i int) OmniglotClass { return s.classes[i] }

// Data is the data set the classes index into.
func (s *ClassSet) Data() *Omniglot { return s.data }

// Image writes image k (0..19) of class i into dst[:784], strokes 1 on
// background 0.
func (s *ClassSet) Image(i, k int, dst []float64) {
	c := s.classes[i]
	s.data.Drawing(c.Character, k, c.Rotation/90, dst)
}

// Split returns one of the Vinyals splits: "train" (4,112 classes), "val"
// (688), "test" (1,692) or "trainval" (train then val, 4,800). Lines name
// characters of both halves of the data set.
func (o *Omniglot) Split(name string) (*ClassSet, error) {
	var files []string
	switch name {
	case "train", "val", "test":
		files = []string{name}
	case "trainval":
		files = []string{"train", "val"}
	default:
		return nil, fmt.Errorf("datasets: unknown Omniglot split %q (want %s)", name, strings.Join(OmniglotSplitNames(), ", "))
	}
	set := &ClassSet{name: name, data: o}
	seen := map[splitEntry]string{}
	for _, f := range files {
		file := "splits/vinyals/" + f + ".txt"
		data, err := vinyalsSplits.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("datasets: %w", err) // unreachable: the files are embedded
		}
		if err := o.addSplitLines(set, file, data, seen); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// SplitFrom builds a class set from a split list in the Vinyals format read
// from r; file names the list in error messages.
func (o *Omniglot) SplitFrom(name, file string, r io.Reader) (*ClassSet, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("datasets: reading %s: %w", file, err)
	}
	set := &ClassSet{name: name, data: o}
	if err := o.addSplitLines(set, file, data, map[splitEntry]string{}); err != nil {
		return nil, err
	}
	return set, nil
}

func (o *Omniglot) addSplitLines(set *ClassSet, file string, data []byte, seen map[splitEntry]string) error {
	entries, err := parseSplit(file, data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		where := fmt.Sprintf("%s:%d", file, e.line)
		if prev, dup := seen[e.splitEntry]; dup {
			return fmt.Errorf("datasets: %s: class %s already listed at %s", where, e, prev)
		}
		seen[e.splitEntry] = where
		c, ok := o.index[e.char]
		if !ok {
			return fmt.Errorf("datasets: %s: %q names character %s, which is in neither images_background nor images_evaluation", where, e.String(), e.char)
		}
		set.classes = append(set.classes, OmniglotClass{Character: c, Rotation: e.rot})
	}
	if len(set.classes) == 0 {
		return fmt.Errorf("datasets: %s lists no classes", file)
	}
	return nil
}

type splitEntry struct {
	char string // "Alphabet/characterNN"
	rot  int    // degrees
}

func (e splitEntry) String() string { return fmt.Sprintf("%s/rot%03d", e.char, e.rot) }

type splitLine struct {
	splitEntry
	line int
}

// parseSplit reads lines "Alphabet/characterNN/rotDDD" with DDD one of 000,
// 090, 180, 270. Blank lines are skipped and surrounding white space
// (including a Windows line end) is ignored; anything else is an error
// naming the file and line.
func parseSplit(file string, data []byte) ([]splitLine, error) {
	var out []splitLine
	err := forEachLine(data, func(n int, line string) error {
		parts := strings.Split(line, "/")
		bad := func(why string) error {
			return malformedLine(file, n, "split", line, 80, why+" (want alphabet/character/rotDDD, e.g. Angelic/character01/rot090)")
		}
		if len(parts) != 3 {
			return bad(fmt.Sprintf("%d fields", len(parts)))
		}
		if !validPart(parts[0]) || !validPart(parts[1]) || strings.ContainsAny(parts[0]+parts[1], " \t\r") {
			return bad("empty or invalid alphabet or character")
		}
		var rot int
		switch parts[2] {
		case "rot000":
			rot = 0
		case "rot090":
			rot = 90
		case "rot180":
			rot = 180
		case "rot270":
			rot = 270
		default:
			return bad("rotation must be rot000, rot090, rot180 or rot270")
		}
		out = append(out, splitLine{splitEntry{parts[0] + "/" + parts[1], rot}, n})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
