//go:build !unix

package runfile

import "os"

// tryLock always succeeds where flock does not exist: directories are not
// protected from a second process there.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }

func tryShared(*os.File) (bool, error) { return true, nil }
