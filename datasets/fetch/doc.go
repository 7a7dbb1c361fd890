// Package fetch gets the data sets mkbench reads: the catalog of each
// preset family (what it needs, where mkbench looks for it, and, for the
// sets whose license allows it, the canonical files with their sizes and
// SHA-256), and Get, which downloads or copies those files into the
// folder mkbench reads.
//
// Nothing half-written is ever used: a file grows in NAME.part beside its
// target (resumed with an HTTP Range request after a cut), is checked for
// an accepted size and SHA-256, and only then gets its name, by a hard
// link that never replaces a file there. A file already in place with the
// right checksum is kept; one with a wrong checksum is refused, or with
// Force moved aside, never deleted. A download is bounded by the file's
// size whatever the server sends, and every accepted checksum names its
// evidence (a file measured here, or a public record of the canonical
// file): none is made up.
//
// The package writes progress to an io.Writer it is given and imports no
// UI; the command is `mkbench data` (data_cli.go).
package fetch
