// Package runfile writes the files of run and experiment directories so
// that a crash, a kill or a full disk never leaves half a file behind:
// whole files are replaced atomically (a synced temporary file renamed over
// the old one), and JSON-lines logs are appended row by row and, when a run
// resumes, cut back to the rows its checkpoint covers; ReadRows says which
// lines it left out. Lock gives one process at a time a directory: a
// second one gets an error naming the holder, and a dead holder's lock is
// taken over; LockToRead reads a directory no process can write (read-only
// media) without one. The temporary file an interrupted atomic write
// leaves is named NAME.tmp-DIGITS (TempOf), and RemoveTemps removes
// exactly those under the lock. AbsOrEmpty makes the paths a directory
// records absolute.
//
// It is also where files a user hands over are met: ReadBounded reads a
// whole file only under a ceiling (the ceilings of mkbench's own files are
// here), OpenRegular opens a large one to stream only if it is a regular
// file, OpenOwn opens a file of mkbench's own without following a link,
// and Printable shows text read from files with its control characters
// escaped, so a hostile name cannot drive the terminal.
//
// It imports nothing of the engine, so the engine, the experiments and the
// data caches share one copy of these primitives.
package runfile
