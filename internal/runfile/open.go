package runfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// OpenOwn opens the file at path as os.OpenFile does, for a file of
// mkbench's own in a directory it may not have made (a run, a sweep, a
// models folder handed over): a symbolic link there is refused, not
// followed, and so is anything but a regular file. Writing through a link
// named like a run file would change whatever file of the user's it
// points at (a .lock linked to ~/.ssh/authorized_keys would be emptied),
// and opening a FIFO could block for ever. Where the system has no
// O_NOFOLLOW the link is still refused, by a check just before the open.
func OpenOwn(path string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, symlinkError(path)
	}
	f, err := os.OpenFile(path, flag|oNoFollow|oNonBlock, perm)
	if err != nil {
		if isLoop(err) {
			return nil, symlinkError(path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: path, Err: errors.New("not a regular file; mkbench reads and writes only files of its own there: remove it")}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenRegular opens the file at path for reading, refusing anything but a
// regular file (links are followed: a data set may be linked into place)
// before it is opened — opening a FIFO blocks until a writer comes, and a
// device such as /dev/zero never ends — and again after, in case the path
// changed in between. For the large files that are read as streams (a
// zip, a tar, an npz); ReadBounded reads the small ones whole.
func OpenRegular(path string) (*os.File, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if err := regular(st, path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNonBlock, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(st, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ErrSymlink is matched by OpenOwn's error for a symbolic link.
var ErrSymlink = errors.New("is a symbolic link")

func symlinkError(path string) error {
	return fmt.Errorf("%s %w: mkbench writes only files of its own there and does not follow links, so that the file it points at is never changed; remove the link", path, ErrSymlink)
}
