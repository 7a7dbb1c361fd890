//go:build !unix

package runfile

const (
	oNoFollow = 0
	oNonBlock = 0
)

func isLoop(error) bool { return false }
