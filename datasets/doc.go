// Package datasets provides the few-shot task families mkbench trains on.
// Each family draws only from the *rand.Rand it is given, so a seed fixes the
// whole task stream. Synthetic families need no files; the others read local
// copies of the published data sets, which a user supplies: the package
// ships only the class splits, embedded with their licenses. It depends on
// the engine only through the leaf packages internal/task (Batch, Source)
// and internal/runfile (bounded reads).
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
// strokes on white.
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
// # miniImageNet
//
// LoadMiniImageNet reads the 60,000 images (84×84 after resizing) of the
// Ravi & Larochelle split from anywhere under its folder, found by their
// file names; the split lists (64, 16 and 20 classes of 600 images) are
// embedded (splits/ravi, MIT, from Prototypical Networks) or read from
// ImageOptions.SplitDir. JPEGs and PNGs are decoded, converted to RGB and
// squashed to the side with the same area filter as Omniglot's, the aspect
// ratio not kept, as PIL's resize does.
//
// # CIFAR-FS
//
// LoadCIFARFS reads CIFAR-100 in either version its authors distribute
// (the Python 2 pickles or the binary records; unpacked or as the .tar.gz
// download) and splits its 100 fine classes of 600 32×32 images as
// CIFAR-FS does (Bertinetto et al.; 64, 16 and 20 classes, embedded from
// Torchmeta, MIT), checking each entry's coarse class against the data. It
// needs no cache: the data are stored undecoded.
//
// # DomainNet
//
// LoadDomainNet reads the six domains of DomainNet (Peng et al., 2019) and
// their <domain>_train.txt and <domain>_test.txt lists, each list an
// ImageSet of 84×84 images whose classes are its categories, optionally
// capped per category to fit in memory. DomainNetProtocol gives the splits
// of few-shot domain generalization with one domain held out (the paper's
// DomainNet table), and DomainNet.Episodes draws tasks whose support and
// query sets come from one domain or from two.
//
// # Embeddings
//
// LoadEmbeddings reads one split of pre-trained features (the paper's
// deep-embedding table: WRN-28-10 activations of miniImageNet or
// tieredImageNet, 640 values per image) as an EmbeddingSet, whose classes
// episodes are drawn from directly, the features standing in for images.
// EmbeddingSplitFile finds a split's file in the layouts features are
// shared in: LEO's <split>_embeddings.pkl, or .npz archives.
//
// # Meta-Dataset
//
// LoadMetaDatasetSource reads one source of Meta-Dataset's converted
// records (a folder with dataset_spec.json and one {class id}.tfrecords per
// class; the TFRecord framing and tf.train.Example in internal/tfrecord)
// and decodes its images, resized as the reference's decoder resizes them
// (bilinear, corners aligned), into a cached ImageSet; a source too large
// for that (ILSVRC) is streamed instead by OpenMetaDatasetStream, which
// indexes the records and decodes each image as an episode draws it. The
// spec's three kinds (plain, bi-level, hierarchical) are read by
// LoadMetaDatasetSpec; MDSampler draws episode compositions by every rule
// and constant of the reference's sampler. MDEpisodes draws fixed way and
// shot episodes, MDVarying the sampler's own variable ones (a
// task.Varying); both draw each episode from one of several sources.
//
// # Your own images
//
// LoadFolder reads a folder of class folders of images (or train/, val/
// and test/ folders of them) as an ImageSet; Convert reads a set's images
// in a model's convention (channels, ink, [−1, 1]).
//
// # File formats
//
// The embeddings and CIFAR-100 come as numpy and Python files, read here
// without Python: .npy files (format versions 1 to 3), .npz archives of
// them (as numpy.savez and savez_compressed write them), and pickles of
// protocols 2 to 5 (Python 2's cPickle and Python 3) by a strict reader
// that knows the opcodes and the handful of numpy callables those files
// use and runs no code. Only little-endian numeric, bool and string arrays
// are read. The sizes a file claims are checked against its length, so a
// damaged file cannot make a reader allocate without bound.
//
// # Default folders
//
// DefaultOmniglotDir, DefaultMiniImageNetDir, DefaultCIFARFSDir,
// DefaultDomainNetDir and DefaultEmbeddingsDir say where mkbench looks when
// no folder is given: $MKBENCH_DATA/<name>, else ./data/<name>, else
// ../shared/data/<name> (a developer checkout).
//
// # The decode caches
//
// Decoding takes seconds for Omniglot and far longer for miniImageNet's
// 60,000 JPEGs, so LoadOmniglot, LoadMiniImageNet and LoadDomainNet (one
// file per list) write the decoded images to a cache file in
// DefaultCacheDir ($MKBENCH_CACHE, else the mkbench folder of
// os.UserCacheDir) or the options' CacheDir, named by a key over the
// sources: for Omniglot the sha256 of each zip, or for an unpacked folder
// the sha256 of its file names, sizes and modification times; for the
// image sets the split lists and each listed file's name, size and
// modification time, with the output size. Later loads read that one file
// (25 MB for Omniglot, 1.27 GB for miniImageNet). A file carries a magic
// string, a format version, the key and a trailing sha256 of its contents;
// a file that fails any check is ignored and rewritten, never trusted.
// Files are written to a temporary name and renamed, so readers see whole
// files only, and failing to write one is reported in the load's Info, not
// as an error. Deleting the folder is always safe.
//
// # Image memory
//
// Go's decoders hold a whole image, and more (8 bytes a pixel for a 16-bit
// PNG; for a progressive JPEG, 4 bytes a pixel of each component's
// coefficients besides its planes), while few-shot models read 84×84 or
// less. So before an image is decoded, the bytes its decode and resize
// will allocate are computed from its headers (colour type, depth,
// transparency and interlacing of a PNG; components, sampling, progression
// and colour conversion of a JPEG), and an image that would take more than
// 192 MB is refused by name, with its size and a size that would fit. A
// 12-megapixel photograph fits however it is encoded (21 MB as a baseline
// JPEG, 178 MB as a progressive one without colour subsampling); a 16-bit
// 8192×8192 PNG (513 MB) does not. The images being read and decoded at
// once, their files included, share 256 MB, whatever the number of
// cores: decoding waits for room, first come first served. An image file
// is at most 64 MB, and must be a regular file (a named pipe or a device
// is refused before it is opened). A folder's class folders are listed
// and checked against what its episodes need (FolderOptions.Need) before
// any image is read.
//
// # Episodes
//
// Episodes (Omniglot), ClassEpisodes (any ClassSource: a split of
// miniImageNet or CIFAR-FS, or an EmbeddingSet) and DomainEpisodes
// implement task.Source for N-way k-shot classification with the paper's
// protocol: classes uniformly without replacement, k + query images per
// class without replacement (query 15 by default, at training and test time
// alike), labels in random order, one-hot targets, rows class-major. Tasks
// depend on the rng alone, which every source consumes in a fixed order.
// Shifted wraps any of them (a training source, for augment_shift): each
// image moved by its own random offset drawn after the episode, so the
// episodes' classes and images stay the unwrapped source's. Warped
// (augment_rotate, augment_scale) wraps one the same way, each image
// turned and scaled about its centre by its own draws, read back
// bilinearly.
//
// # Errors
//
// Data problems are returned as errors that start with "datasets: " and name
// the file, zip or tar entry, list line or numbers at fault; a missing data
// folder wraps ErrNoOmniglot, ErrNoMiniImageNet, ErrNoCIFAR, ErrNoDomainNet
// or ErrNoEmbeddings (ErrNoMetaDataset, ErrNoFolder), so that a command
// line can add its own hint. Nothing here panics on bad data, except a
// streamed Meta-Dataset record found damaged when an episode draws it
// (the draw cannot return an error; the engine turns the panic into the
// run's error); a batch of the wrong size passed to Sample is a
// programmer error and panics.
package datasets
