// Package datasets provides the few-shot task families mkbench trains on.
// Each family draws only from the *rand.Rand it is given, so a seed fixes the
// whole task stream. Synthetic families need no files; image families read
// local copies of the published data sets.
package datasets
