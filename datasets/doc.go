// Package datasets provides the few-shot task families mkbench trains on.
// Each family draws only from the *rand.Rand it is given, so a seed fixes the
// whole task stream. Synthetic families need no files; image families read
// local copies of the published data sets.
//
// # Sine
//
// Sine is the regression family of the paper (after MAML); see its type.
//
// # Omniglot
//
// LoadOmniglot reads the data set of Lake et al. (2015) as its author
// distributes it: images_background.zip (964 characters of 30 alphabets)
// and images_evaluation.zip (659 characters of 20 alphabets), or the
// folders they unpack to, images_background/<Alphabet>/characterNN/<ID>_<NN>.png.
// Both halves are needed, because the standard split draws on both. Every
// character has 20 drawings (32,460 in all), 105×105 1-bit PNGs with black
// strokes on white. DefaultOmniglotDir says where mkbench looks when no
// folder is given: $MKBENCH_DATA/omniglot, else ./data/omniglot, else
// ../shared/data/omniglot (a developer checkout).
//
// Preprocessing follows Vinyals et al. and Prototypical Networks: images are
// inverted (strokes 1, background 0) and resized to 28×28 with an exact area
// filter, each output pixel the mean of the 3.75×3.75 source pixels under it,
// cut pixels counting by the fraction inside. The result is stored as bytes
// (0..255) and handed out as float64 in [0, 1].
//
// Classes are the lines of the Vinyals split (train 4,112, val 688, test
// 1,692; trainval = train + val), embedded in the binary with their MIT
// license (splits/vinyals/LICENSE, from Prototypical Networks), so a user
// needs only the image zips. A line Alphabet/characterNN/rotDDD is the
// character turned counter-clockwise by DDD degrees, as PIL's Image.rotate
// and numpy's rot90 turn it; each rotation is its own class. SplitFrom reads
// a split list in the same format from elsewhere.
//
// # The decode cache
//
// Decoding all PNGs takes a few seconds, so LoadOmniglot writes the decoded
// images (25 MB) to a cache file in DefaultCacheDir ($MKBENCH_CACHE, else the
// mkbench folder of os.UserCacheDir) or OmniglotOptions.CacheDir, named by a
// key over the sources: the sha256 of each zip, or for an unpacked folder the
// sha256 of its file names, sizes and modification times. Later loads read
// that one file. The file carries a magic string, a format version, the key
// and a trailing sha256 of its contents; a file that fails any check is
// ignored and rewritten, never trusted. Files are written to a temporary name
// and renamed, so readers see whole files only. Deleting the folder is always
// safe.
//
// # Episodes
//
// Episodes implements task.Source for N-way k-shot classification with
// the paper's protocol: classes uniformly without replacement, k + query
// images per class without replacement (query 15 by default, at training and
// test time alike), labels in random order, one-hot targets, rows
// class-major. Tasks depend on the rng alone.
//
// # Errors
//
// Data problems are returned as errors that start with "datasets: " and name
// the file, zip entry, split line or numbers at fault; a missing data folder
// wraps ErrNoOmniglot. Nothing here panics on bad data; a batch of the wrong
// size passed to Sample is a programmer error and panics.
package datasets
