// Package testutil holds what the tests of several packages share, so that
// each is written once:
//
//   - Data finds a data set the repository does not ship (real Omniglot,
//     Meta-Dataset's spec files) or skips the test with one line saying
//     what it needs and where it was looked for; with CI=true it fails the
//     test instead, so that CI cannot pass by not running it.
//   - TempCache gives a test binary a cache folder of its own
//     (MKBENCH_CACHE), so that no test writes decoded data sets into the
//     user's cache (~/.cache/mkbench or $MKBENCH_CACHE).
//   - ReadFile, CopyDir and CentralDiff: the file and finite-difference
//     helpers the packages' tests each used to write.
//
// It imports only the standard library and gonum, so any package of the
// module, engine included, can use it in its tests without an import
// cycle. Nothing outside tests imports it.
package testutil
