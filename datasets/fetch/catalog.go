package fetch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mkbench/mkbench/datasets"
)

// Digest is one accepted form of a file: its exact size and SHA-256.
// Where records the evidence for it, so that no checksum is taken on
// trust from nowhere.
type Digest struct {
	Size   int64
	SHA256 string
	Where  string
}

// File is one file of a data set as mkbench places it: Name in the data
// set's folder, fetched from Base+Name, accepted when its size and
// SHA-256 are one of Accept.
type File struct {
	Name   string
	Accept []Digest
}

// maxSize is the largest accepted size: no download of the file may grow
// past it, whatever a server sends.
func (f File) maxSize() int64 {
	var m int64
	for _, d := range f.Accept {
		m = max(m, d.Size)
	}
	return m
}

// sizes lists the accepted sizes for messages.
func (f File) sizes() string {
	var s []string
	for _, d := range f.Accept {
		s = append(s, fmt.Sprintf("%d", d.Size))
	}
	return strings.Join(s, " or ")
}

// match returns the accepted digest of size n and checksum sum, if any.
func (f File) match(n int64, sum string) (Digest, bool) {
	for _, d := range f.Accept {
		if d.Size == n && d.SHA256 == sum {
			return d, true
		}
	}
	return Digest{}, false
}

// Family is what the presets of one task family read, where mkbench looks
// for it, and how a user gets it.
type Family struct {
	Name    string // the family, as `mkbench data get` names it
	Presets string // the presets that read it
	Needs   string // what a folder must hold, for people
	// Folder is the data set's folder under the places mkbench looks
	// (datasets.DataDirs); "" for a family read from no default place.
	Folder string
	// Base is the canonical URL prefix of Files; Files is nil for a family
	// mkbench cannot download (Manual says how to get it).
	Base  string
	Files []File
	// Manual is the one line that says how to get a family mkbench does
	// not download, and why.
	Manual string
	// found says what of the family a folder holds ("" and false when it
	// holds too little to run).
	found func(dir string) (string, bool)
}

// Downloadable reports whether mkbench can fetch and verify the family.
func (f *Family) Downloadable() bool { return len(f.Files) > 0 }

// Dirs lists where mkbench looks for the family when --data is not given,
// in order (nil when it looks nowhere: the family needs --data, or
// nothing).
func (f *Family) Dirs() []string {
	if f.Folder == "" {
		return nil
	}
	return datasets.DataDirs(f.Folder)
}

// Found returns the first of Dirs that holds the family, with what it
// holds; ok is false when none does.
func (f *Family) Found() (dir, what string, ok bool) {
	if f.found == nil {
		return "", "", false
	}
	for _, d := range f.Dirs() {
		if what, ok := f.found(d); ok {
			return d, what, true
		}
	}
	return "", "", false
}

// InstallDir is where `mkbench data get` puts the family when no --dir is
// given: the first of Dirs, $MKBENCH_DATA/<folder> or ./data/<folder>,
// never the developers' shared folder.
func (f *Family) InstallDir() string {
	if d := f.Dirs(); len(d) > 0 {
		return d[0]
	}
	return ""
}

// omniglotRepack is how the developers' copy (../shared/data/omniglot)
// was established: its README says the zips are repacked from the
// original PNG tree, the PNGs identical, the containers not.
const omniglotRepack = "the repacked copy in ../shared/data/omniglot (same PNGs, other zip containers), measured with sha256sum"

// tfdsRecord is where the canonical files' checksums come from:
// TensorFlow Datasets records the size and SHA-256 of every file it
// downloads, measured on the real file at the canonical URL.
const tfdsRecord = "TensorFlow Datasets' recorded checksum of the canonical file (tensorflow_datasets/url_checksums/%s.txt)"

// Families are the data families of the presets, in the order `mkbench
// data` lists them.
var Families = []*Family{
	{
		Name:    "omniglot",
		Presets: "omniglot-*",
		Needs:   "images_background.zip and images_evaluation.zip (or the folders they unpack to); the Vinyals split is built in",
		Folder:  "omniglot",
		Base:    "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/",
		Files: []File{
			{Name: "images_background.zip", Accept: []Digest{
				{9464212, "ad41ab679c8b5d90b271ef46be6987cc81211774a695c29dcc5367b2b26ee640", fmt.Sprintf(tfdsRecord, "omniglot")},
				{8425668, "024f4aa75a1dcad363f0f2799af6dcb69bdcb8e0627076aeaeaca5dc3d161559", omniglotRepack},
			}},
			{Name: "images_evaluation.zip", Accept: []Digest{
				{6462886, "1f61a8f3366785b057fc117d9228e78a16e3d976c8953b2a10fcc74cf0609cee", fmt.Sprintf(tfdsRecord, "omniglot")},
				{5757624, "a699dc2dd9a759b830037e4ec1b5610a0616701b4f40ea1268d9056042f1c9b6", omniglotRepack},
			}},
		},
		found: foundOmniglot,
	},
	{
		Name:    "cifarfs",
		Presets: "cifarfs-*",
		Needs:   "CIFAR-100: cifar-100-binary.tar.gz or cifar-100-python.tar.gz (or either unpacked); the CIFAR-FS split is built in",
		Folder:  "cifarfs",
		Base:    "https://www.cs.toronto.edu/~kriz/",
		Files: []File{
			{Name: "cifar-100-binary.tar.gz", Accept: []Digest{
				{168513733, "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec", fmt.Sprintf(tfdsRecord, "cifar100")},
			}},
		},
		found: foundCIFAR,
	},
	{
		Name:    "miniimagenet",
		Presets: "mini-*",
		Needs:   "the 60,000 ImageNet images of the Ravi & Larochelle split (n0153282900000005.jpg …), anywhere under the folder; the split is built in",
		Folder:  "miniimagenet",
		Manual:  "miniImageNet's images are ImageNet's: get them from https://image-net.org (sign-in needed, non-commercial terms) or a copy you are licensed to use, and pass --data DIR",
		found:   foundMini,
	},
	{
		Name:    "domainnet",
		Presets: "domainnet-*",
		Needs:   "the six domains' image folders (clipart … sketch) and their <domain>_train.txt and <domain>_test.txt lists",
		Folder:  "domainnet",
		Manual:  "mkbench cannot verify DomainNet's files yet (no checksum established for them): get the domains and lists from http://ai.bu.edu/M3SDA/ , unpack them into one folder, and pass --data DIR",
		found:   foundDomainNet,
	},
	{
		Name:    "embeddings",
		Presets: "wrn-*",
		Needs:   "pre-trained features per split: train/val/test as <split>_embeddings.pkl (LEO's) or <split>.npz",
		Folder:  "embeddings",
		Manual:  "mkbench cannot verify LEO's embeddings yet (no checksum established for them): get embeddings.zip from https://github.com/deepmind/leo (its README links it), unpack the miniImageNet or tieredImageNet folder, and pass --data DIR",
		found:   foundEmbeddings,
	},
	{
		Name:    "metadataset",
		Presets: "metadataset, metadataset-*",
		Needs:   "Meta-Dataset's converted records: one folder per source with its dataset_spec.json and {class}.tfrecords (metadataset-embed-*: DIR/<source>/<split>.npz)",
		Folder:  "metadataset",
		Manual:  "Meta-Dataset's sources need sign-ins (ILSVRC-2012 at https://image-net.org) and conversion: follow https://github.com/google-research/meta-dataset#downloading-and-converting-datasets, then pass --data DIR",
		found:   foundMetaDataset,
	},
	{
		Name:    "folder",
		Presets: "folder-*",
		Needs:   "your own images: one folder per class (or train/, val/ and test/ folders of them)",
		Manual:  "the folder presets read your own images: pass --data DIR",
	},
	{
		Name:    "sine",
		Presets: "sine-*",
		Needs:   "nothing (tasks are drawn, not read)",
	},
}

// Lookup returns the family called name.
func Lookup(name string) (*Family, error) {
	var names []string
	for _, f := range Families {
		if f.Name == name {
			return f, nil
		}
		names = append(names, f.Name)
	}
	return nil, fmt.Errorf("no data family %q (families: %s)", name, strings.Join(names, ", "))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// foundOmniglot wants both halves, each as its zip or its folder, as
// LoadOmniglot reads them.
func foundOmniglot(dir string) (string, bool) {
	var got []string
	for _, half := range []string{"images_background", "images_evaluation"} {
		switch {
		case isFile(filepath.Join(dir, half+".zip")):
			got = append(got, half+".zip")
		case isDir(filepath.Join(dir, half)):
			got = append(got, half+"/")
		default:
			return "", false
		}
	}
	return strings.Join(got, ", "), true
}

// foundCIFAR wants one of the four forms LoadCIFARFS reads.
func foundCIFAR(dir string) (string, bool) {
	for _, n := range []string{"cifar-100-python", "cifar-100-binary"} {
		if isDir(filepath.Join(dir, n)) {
			return n + "/", true
		}
	}
	for _, n := range []string{"cifar-100-python.tar.gz", "cifar-100-binary.tar.gz"} {
		if isFile(filepath.Join(dir, n)) {
			return n, true
		}
	}
	return "", false
}

// foundMini looks only for an images folder or an image on top: reading
// 60,000 names to say "found" would take longer than the answer is worth;
// a run checks every image.
func foundMini(dir string) (string, bool) {
	if isDir(filepath.Join(dir, "images")) {
		return "images/ (each image is checked when a run loads it)", true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if ext := strings.ToLower(filepath.Ext(e.Name())); ext == ".jpg" || ext == ".jpeg" || ext == ".png" {
			return "images (each is checked when a run loads it)", true
		}
	}
	return "", false
}

// foundDomainNet wants the train and test lists of every domain.
func foundDomainNet(dir string) (string, bool) {
	for _, d := range datasets.DomainNetDomains {
		for _, s := range []string{"_train.txt", "_test.txt"} {
			if !isFile(filepath.Join(dir, d+s)) {
				return "", false
			}
		}
	}
	return "the lists of all six domains", true
}

// foundEmbeddings wants a file for each split, as EmbeddingSplitFile
// finds them.
func foundEmbeddings(dir string) (string, bool) {
	var got []string
	for _, split := range []string{"train", "val", "test"} {
		p, err := datasets.EmbeddingSplitFile(dir, split)
		if err != nil {
			return "", false
		}
		got = append(got, filepath.Base(p))
	}
	return strings.Join(got, ", "), true
}

// foundMetaDataset counts the sources: folders holding a
// dataset_spec.json (the records themselves are checked by a run).
func foundMetaDataset(dir string) (string, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && isFile(filepath.Join(dir, e.Name(), "dataset_spec.json")) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", false
	}
	return fmt.Sprintf("%d sources (%s)", len(names), strings.Join(names, ", ")), true
}
