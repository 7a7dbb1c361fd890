package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Options says where Get puts a family and where it takes it from.
type Options struct {
	// Dir is the family's folder (the one --data names); "" is where
	// mkbench already finds it, else Family.InstallDir.
	Dir string
	// From replaces the canonical source: a URL prefix or a folder holding
	// the same file names, or the URL or path of one of the files. A local
	// From needs no network.
	From string
	// Force moves a file in the way whose checksum is wrong aside (to
	// NAME.old, NAME.old-2, …) instead of refusing; nothing is deleted.
	Force bool
	// Client makes the requests; nil is NewClient(UserAgent).
	Client    *http.Client
	UserAgent string
	// Stall ends a download that receives nothing for this long (0: one
	// minute); the bytes so far stay in NAME.part for the next try.
	Stall time.Duration
	// Progress, when not nil, gets a progress line per file (see
	// Progress); TTY redraws it in place instead of printing plain lines.
	Progress io.Writer
	TTY      bool
}

// State says what Get did with a file.
type State string

const (
	AlreadyHere State = "already here"
	Downloaded  State = "downloaded"
	Copied      State = "copied"
)

// Result is one file's outcome.
type Result struct {
	File   string // the file's name
	Path   string // where it is now
	State  State
	Digest Digest // the accepted form it matched
	Aside  string // with Force, where a wrong file in the way was moved
}

// partSuffix names the file a download grows in, beside its target. A
// file of that name is taken as an earlier download's part: resumed, and
// discarded once it is proven not to be the file (too long, or a wrong
// checksum).
const partSuffix = ".part"

// Get places the files of family f in its folder, verified: each file
// already there with an accepted size and SHA-256 is kept, a missing one
// is downloaded (or copied from a local From) into NAME.part, resumed
// from what an earlier try left there, checked, and only then linked to
// its name, so a file under its real name is always whole and right.
// It returns what it did with each file; on an error, the results of the
// files done before it.
func Get(ctx context.Context, f *Family, opts Options) ([]Result, error) {
	if !f.Downloadable() {
		if f.Manual == "" {
			return nil, fmt.Errorf("%s needs no data", f.Name)
		}
		if opts.From != "" {
			return nil, fmt.Errorf("mkbench has no checksums for %s, so it cannot check a copy either: pass --data DIR to the commands instead", f.Name)
		}
		return nil, errors.New(f.Manual)
	}
	src, err := resolveSource(f, opts.From)
	if err != nil {
		return nil, err
	}
	// Files already right need no lock and no write (the folder may be
	// read-only, as a shared copy is).
	dir := opts.Dir
	if dir == "" {
		if found, _, ok := f.Found(); ok {
			if rs, err := verifyAll(found, src.files); err == nil {
				return rs, nil
			}
		}
		dir = f.InstallDir()
	} else if rs, err := verifyAll(dir, src.files); err == nil {
		return rs, nil
	}
	_, serr := os.Stat(dir)
	created := errors.Is(serr, fs.ErrNotExist)
	lock, err := runfile.Lock(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot use %s for %s: %w", dir, f.Name, err)
	}
	defer func() {
		// A folder made for a get that placed nothing is taken away again:
		// an empty ./data/NAME would hide ../shared/data/NAME from the
		// loaders, which take the first folder that exists.
		if entries, err := os.ReadDir(dir); created && err == nil && len(entries) == 1 && entries[0].Name() == runfile.FileLock {
			lock.Remove()
			os.Remove(dir)
			return
		}
		lock.Release()
	}()
	if opts.Client == nil {
		opts.Client = NewClient(opts.UserAgent)
	}
	if opts.Stall <= 0 {
		opts.Stall = time.Minute
	}
	var rs []Result
	for _, file := range src.files {
		r, err := getFile(ctx, file, dir, src, opts)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// verifyAll returns the results of files all already in dir and right,
// or an error for the first that is not.
func verifyAll(dir string, files []File) ([]Result, error) {
	var rs []Result
	for _, file := range files {
		p := filepath.Join(dir, file.Name)
		d, err := verify(p, file)
		if err != nil {
			return nil, err
		}
		rs = append(rs, Result{File: file.Name, Path: p, State: AlreadyHere, Digest: d})
	}
	return rs, nil
}

// source is where Get takes files from: a URL prefix, a local folder,
// or one file (remote or local) standing for files[0].
type source struct {
	base   string // URL prefix, "" when local
	dir    string // local folder
	single string // URL or path of the one file
	files  []File // the files to get
}

func (s source) local() bool { return s.base == "" && !isURL(s.single) }

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// resolveSource reads From: a URL whose last element is one of the
// family's file names fetches that file only, any other URL is a prefix;
// a local folder holds the files by name, and a local file is whichever
// file of the family its checksum says it is.
func resolveSource(f *Family, from string) (source, error) {
	if from == "" {
		return source{base: f.Base, files: f.Files}, nil
	}
	if isURL(from) {
		u, err := url.Parse(from)
		if err != nil || u.Host == "" {
			return source{}, fmt.Errorf("--from %s is not a URL mkbench can fetch (want http:// or https://, a host and a path)", from)
		}
		for _, file := range f.Files {
			if pathBase(u.Path) == file.Name {
				return source{single: from, files: []File{file}}, nil
			}
		}
		if !strings.HasSuffix(from, "/") {
			from += "/"
		}
		return source{base: from, files: f.Files}, nil
	}
	st, err := os.Stat(from)
	switch {
	case err != nil:
		return source{}, fmt.Errorf("--from %s: %w (give a folder or file holding %s, or a URL)", from, pathErr(err), names(f.Files))
	case st.IsDir():
		return source{dir: from, files: f.Files}, nil
	}
	// A file under another name is recognized by its checksum.
	for _, file := range f.Files {
		if _, err := verify(from, file); err == nil {
			return source{single: from, files: []File{file}}, nil
		}
	}
	return source{}, fmt.Errorf("--from %s is none of %s's files (%s, by size and SHA-256): mkbench places only files it can verify", from, f.Name, names(f.Files))
}

func pathBase(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func names(files []File) string {
	var s []string
	for _, f := range files {
		s = append(s, f.Name)
	}
	return strings.Join(s, " and ")
}

// pathErr drops the path an *fs.PathError repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// getFile places one file in dir (see Get).
func getFile(ctx context.Context, file File, dir string, src source, opts Options) (Result, error) {
	target := filepath.Join(dir, file.Name)
	r := Result{File: file.Name, Path: target}
	if _, err := os.Lstat(target); err == nil {
		d, verr := verify(target, file)
		if verr == nil {
			r.State, r.Digest = AlreadyHere, d
			return r, nil
		}
		if !opts.Force {
			return r, fmt.Errorf("%v: mkbench replaces no file it did not write; move it away, or pass --force to have it moved aside", verr)
		}
		aside, err := moveAside(target)
		if err != nil {
			return r, err
		}
		r.Aside = aside
	}
	part := target + partSuffix
	var err error
	if src.local() {
		r.State = Copied
		err = copyPart(ctx, file, src.localPath(file), part, opts)
	} else {
		r.State = Downloaded
		err = downloadPart(ctx, file, src.url(file), part, opts)
	}
	if err != nil {
		return r, err
	}
	d, err := verifyPart(file, part)
	if err != nil {
		return r, err
	}
	r.Digest = d
	return r, place(part, target)
}

func (s source) localPath(f File) string {
	if s.single != "" {
		return s.single
	}
	return filepath.Join(s.dir, f.Name)
}

func (s source) url(f File) string {
	if s.single != "" {
		return s.single
	}
	return s.base + f.Name
}

// verify says which accepted form the file at path is, or why it is
// none: it must be a regular file (a link to one is fine: a data set may
// be linked into place) of an accepted size and checksum.
func verify(path string, file File) (Digest, error) {
	f, err := runfile.OpenRegular(path)
	if err != nil {
		return Digest{}, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Digest{}, err
	}
	if !sizeAccepted(file, st.Size()) {
		return Digest{}, fmt.Errorf("%s is %d bytes, not %s's %s", path, st.Size(), file.Name, file.sizes())
	}
	sum, err := hashOf(f)
	if err != nil {
		return Digest{}, fmt.Errorf("reading %s: %w", path, err)
	}
	d, ok := file.match(st.Size(), sum)
	if !ok {
		return Digest{}, fmt.Errorf("%s has sha256 %s, not %s's", path, sum, file.Name)
	}
	return d, nil
}

func sizeAccepted(file File, n int64) bool {
	for _, d := range file.Accept {
		if d.Size == n {
			return true
		}
	}
	return false
}

func hashOf(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ErrChecksum is matched by the error for a finished download whose
// checksum is wrong.
var ErrChecksum = errors.New("checksum mismatch")

// verifyPart checks a finished part. A part of no accepted size but
// shorter than the largest is a cut download, kept to resume; one of a
// right size but wrong checksum is removed, so the next try starts
// clean (it is proven not to be the file, so nothing is lost).
func verifyPart(file File, part string) (Digest, error) {
	f, err := runfile.OpenOwn(part, os.O_RDONLY, 0)
	if err != nil {
		return Digest{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return Digest{}, err
	}
	if !sizeAccepted(file, st.Size()) {
		f.Close()
		return Digest{}, fmt.Errorf("%s stopped at %s of %s (kept in %s): run the same command again to resume", file.Name, runfile.Size(st.Size()), runfile.Size(file.maxSize()), part)
	}
	sum, err := hashOf(f)
	f.Close()
	if err != nil {
		return Digest{}, fmt.Errorf("reading %s: %w", part, err)
	}
	d, ok := file.match(st.Size(), sum)
	if !ok {
		os.Remove(part)
		return Digest{}, fmt.Errorf("%s: %w: got sha256 %s, which is not the published file's; the download is discarded (a damaged mirror or transfer: try again, or --from another source)", file.Name, ErrChecksum, sum)
	}
	return d, nil
}

// place gives the verified part its name without ever replacing a file
// there (a hard link fails if the name exists), then drops the part name
// and syncs the folder so the name survives a crash.
func place(part, target string) error {
	err := os.Link(part, target)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while mkbench was downloading it; the verified download stays in %s", target, part)
	}
	if err != nil {
		// A file system without hard links: the name was free when Get
		// began, and Get holds the folder's lock.
		if _, lerr := os.Lstat(target); lerr == nil {
			return fmt.Errorf("%s appeared while mkbench was downloading it; the verified download stays in %s", target, part)
		}
		if err := os.Rename(part, target); err != nil {
			return err
		}
	} else if err := os.Remove(part); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// moveAside renames path to the first free name of path.old, path.old-2,
// … and returns it; the file is kept, never deleted.
func moveAside(path string) (string, error) {
	for i := 1; i < 1000; i++ {
		aside := path + ".old"
		if i > 1 {
			aside = fmt.Sprintf("%s.old-%d", path, i)
		}
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(path, aside); err != nil {
				return "", fmt.Errorf("moving %s aside: %w", path, err)
			}
			return aside, nil
		}
	}
	return "", fmt.Errorf("moving %s aside: %s.old to .old-999 are all taken; clear some", path, path)
}

// openPart opens (creating) the part file, refusing a link or anything
// but a regular file there.
func openPart(part string) (*os.File, error) {
	f, err := runfile.OpenOwn(part, os.O_RDWR|os.O_CREATE, runfile.Shared)
	if errors.Is(err, syscall.EISDIR) {
		return nil, fmt.Errorf("%s is a folder; mkbench downloads into a file of that name: move it away", part)
	}
	return f, err
}
