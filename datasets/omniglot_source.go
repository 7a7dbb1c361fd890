package datasets

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

// drawingFile is one PNG to decode; label names it in errors (see where).
type drawingFile struct {
	label string
	read  func() ([]byte, error)
}

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
	f, err := os.Open(s.path)
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
	var num [8]byte
	err := filepath.WalkDir(s.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != s.path && ignoredEntry(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.path, p)
		if err != nil {
			return err
		}
		rel = s.set + "/" + filepath.ToSlash(rel)
		fi, err := os.Stat(p) // follows links, unlike d.Info
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			// A FIFO would block the decoder forever.
			return fmt.Errorf("%s is not a regular file", p)
		}
		h.Write([]byte(rel))
		binary.LittleEndian.PutUint64(num[:], uint64(fi.Size()))
		h.Write(num[:])
		binary.LittleEndian.PutUint64(num[:], uint64(fi.ModTime().UnixNano()))
		h.Write(num[:])
		s.walked = append(s.walked, folderDrawing{rel: rel, abs: p})
		return nil
	})
	if err != nil {
		return fmt.Errorf("datasets: reading folder %s: %w", s.path, err)
	}
	h.Sum(s.fp[:0])
	return nil
}

// ignoredEntry says whether a file or folder is operating-system litter that
// archivers and file managers add (macOS resource forks, .DS_Store,
// Thumbs.db) rather than part of the data set.
func ignoredEntry(base string) bool {
	return strings.HasPrefix(base, ".") || base == "__MACOSX" || base == "Thumbs.db"
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

// zipLitter is ignoredEntry for any component of a zip entry's path.
func zipLitter(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if ignoredEntry(part) {
			return true
		}
	}
	return false
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

func validPart(p string) bool { return p != "" && p != "." && p != ".." && !strings.Contains(p, "\\") }

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
		f, err := os.Open(p)
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

var errTooLarge = errors.New("larger than any Omniglot drawing")

// readAtMost reads r to the end unless it holds more than limit bytes: a
// zip entry's declared size can lie, so the bound is enforced on the bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// decodeDrawings decodes files[i] into pix[i·784:] on workers goroutines.
// Results land by index, so the order never depends on scheduling, and the
// error returned is the one of the first failing file in list order:
// indices are handed out in increasing order, so every file before a
// failure has been decoded when the workers stop.
func decodeDrawings(files []drawingFile, pix []uint8, workers int) error {
	if workers > len(files) {
		workers = len(files)
	}
	errs := make([]error, len(files))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch drawingScratch
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				data, err := files[i].read()
				if err == nil {
					err = decodeDrawing(files[i].label, data, pix[i*OmniglotPixels:(i+1)*OmniglotPixels], &scratch)
				}
				if err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
