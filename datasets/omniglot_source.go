package datasets

import (
	"archive/zip"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mkbench/mkbench/internal/runfile"
)

// maxDrawingBytes bounds what one PNG entry may occupy once inflated. The
// real drawings are under 1 KB; the bound keeps a damaged or hostile zip
// (a "zip bomb") from exhausting memory.
const maxDrawingBytes = 1 << 20

// omniglotSource is one half of the data set, zipped or unpacked.
type omniglotSource struct {
	set  string // "images_background" or "images_evaluation"
	path string // the zip file or the folder
	fp   [32]byte
	file *os.File    // zip only
	zr   *zip.Reader // zip only
	// walked holds an unpacked folder's drawings, listed while
	// fingerprinting so that the tree is walked once.
	walked []folderDrawing
}

type folderDrawing struct{ rel, abs string }

func openOmniglotSource(dir, set string) (*omniglotSource, error) {
	zipPath := filepath.Join(dir, set+".zip")
	if fi, err := os.Stat(zipPath); err == nil && !fi.IsDir() {
		s := &omniglotSource{set: set, path: zipPath}
		if err := s.openZip(); err != nil {
			s.close()
			return nil, err
		}
		return s, nil
	}
	folder := filepath.Join(dir, set)
	if fi, err := os.Stat(folder); err == nil && fi.IsDir() {
		s := &omniglotSource{set: set, path: folder}
		if err := s.walkFolder(); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: %s holds neither %s.zip nor the unpacked folder %s/", ErrNoOmniglot, dir, set, set)
}

func (s *omniglotSource) close() {
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
}

// openZip hashes the whole archive (14 MB for both halves, a few tens of
// milliseconds) because the hash is the cache key: anything cheaper, like
// size and modification time, would trust a cache across an edited zip.
func (s *omniglotSource) openZip() error {
	f, err := runfile.OpenRegular(s.path)
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	s.file = f
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("datasets: reading %s: %w", s.path, err)
	}
	h.Sum(s.fp[:0])
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("datasets: %s is not a valid zip archive: %w", s.path, err)
	}
	s.zr = zr
	return nil
}

// walkFolder fingerprints an unpacked half by its file names, sizes and
// modification times: hashing 32,460 files' contents would cost most of
// what the cache saves.
func (s *omniglotSource) walkFolder() error {
	h := sha256.New()
	err := walkFiles(s.path, func(p string, _ fs.DirEntry) error {
		rel, err := filepath.Rel(s.path, p)
		if err != nil {
			return err
		}
		rel = s.set + "/" + filepath.ToSlash(rel)
		fi, err := os.Stat(p) // follows links, unlike the DirEntry
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			// A FIFO would block the decoder forever.
			return fmt.Errorf("%s is not a regular file", p)
		}
		h.Write([]byte(rel))
		hashFileState(h, fi.Size(), fi.ModTime().UnixNano())
		s.walked = append(s.walked, folderDrawing{rel: rel, abs: p})
		return nil
	})
	if err != nil {
		return fmt.Errorf("datasets: reading folder %s: %w", s.path, err)
	}
	h.Sum(s.fp[:0])
	return nil
}

// list returns the half's characters sorted by alphabet and character name,
// and their drawings in the same order, each character's sorted by file name.
func (s *omniglotSource) list(background bool) ([]OmniglotCharacter, []drawingFile, error) {
	var names []string
	reads := map[string]func() ([]byte, error){}
	add := func(name string, read func() ([]byte, error)) error {
		if _, dup := reads[name]; dup {
			return fmt.Errorf("datasets: %s appears twice", s.where(name))
		}
		reads[name] = read
		names = append(names, name)
		return nil
	}
	if s.zr != nil {
		for _, f := range s.zr.File {
			if strings.HasSuffix(f.Name, "/") || zipLitter(f.Name) {
				continue
			}
			if err := add(f.Name, zipEntryReader(s.where(f.Name), f)); err != nil {
				return nil, nil, err
			}
		}
	} else {
		for _, d := range s.walked {
			if err := add(d.rel, folderFileReader(d.abs)); err != nil {
				return nil, nil, err
			}
		}
	}
	return s.groupDrawings(background, names, reads)
}

// where names an entry as the user would look for it: inside the zip, or
// as a path on disk.
func (s *omniglotSource) where(name string) string {
	if s.zr != nil {
		return fmt.Sprintf("%s: entry %q", s.path, name)
	}
	return filepath.Join(filepath.Dir(s.path), filepath.FromSlash(name))
}

// groupDrawings checks the layout <set>/<alphabet>/<character>/<drawing>.png
// of every entry and groups the drawings by character.
func (s *omniglotSource) groupDrawings(background bool, names []string, reads map[string]func() ([]byte, error)) ([]OmniglotCharacter, []drawingFile, error) {
	set := s.set
	byChar := map[OmniglotCharacter][]string{}
	for _, name := range names {
		parts := strings.Split(name, "/")
		if len(parts) != 4 || parts[0] != set || !validPart(parts[1]) || !validPart(parts[2]) || !validPart(parts[3]) {
			return nil, nil, fmt.Errorf("datasets: %s is not in the layout %s/<alphabet>/<character>/<drawing>.png", s.where(name), set)
		}
		if !strings.EqualFold(path.Ext(name), ".png") {
			return nil, nil, fmt.Errorf("datasets: %s is not a PNG file", s.where(name))
		}
		c := OmniglotCharacter{Background: background, Alphabet: parts[1], Name: parts[2]}
		byChar[c] = append(byChar[c], name)
	}
	if len(byChar) == 0 {
		return nil, nil, fmt.Errorf("datasets: %s holds no drawings (want %s/<alphabet>/<character>/<drawing>.png)", s.path, set)
	}
	chars := make([]OmniglotCharacter, 0, len(byChar))
	for c := range byChar {
		chars = append(chars, c)
	}
	sort.Slice(chars, func(i, j int) bool {
		if chars[i].Alphabet != chars[j].Alphabet {
			return chars[i].Alphabet < chars[j].Alphabet
		}
		return chars[i].Name < chars[j].Name
	})
	files := make([]drawingFile, 0, len(chars)*OmniglotDrawings)
	for _, c := range chars {
		drawings := byChar[c]
		if len(drawings) != OmniglotDrawings {
			folder := filepath.Join(filepath.Dir(s.path), set, c.Alphabet, c.Name)
			if s.zr != nil {
				folder = s.path + ": " + set + "/" + c.ID()
			}
			return nil, nil, fmt.Errorf("datasets: %s has %d drawings, want %d", folder, len(drawings), OmniglotDrawings)
		}
		sort.Strings(drawings)
		for _, name := range drawings {
			files = append(files, drawingFile{label: s.where(name), read: reads[name]})
		}
	}
	return chars, files, nil
}

func zipEntryReader(where string, f *zip.File) func() ([]byte, error) {
	return func() ([]byte, error) {
		if f.UncompressedSize64 > maxDrawingBytes {
			return nil, fmt.Errorf("datasets: %s is %d bytes, far more than a 105×105 drawing", where, f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", where, err)
		}
		defer rc.Close()
		data, err := readAtMost(rc, maxDrawingBytes)
		if err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", where, err)
		}
		return data, nil
	}
}

func folderFileReader(p string) func() ([]byte, error) {
	return func() ([]byte, error) {
		f, err := runfile.OpenRegular(p)
		if err != nil {
			return nil, fmt.Errorf("datasets: %w", err)
		}
		defer f.Close()
		data, err := readAtMost(f, maxDrawingBytes)
		if err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", p, err)
		}
		return data, nil
	}
}

// decodeDrawings decodes files[i] into pix[i·784:] on workers goroutines
// (see decodeFiles).
func decodeDrawings(files []drawingFile, pix []uint8, workers int) error {
	return decodeFiles(files, workers, func(i int, data []byte, s *drawingScratch) error {
		return decodeDrawing(files[i].label, data, pix[i*OmniglotPixels:(i+1)*OmniglotPixels], s)
	})
}
