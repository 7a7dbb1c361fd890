package datasets

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkDecodeRGB decodes one photograph of ImageNet's typical size
// (500×375 JPEG) and area-filters it to 84×84: the per-image cost of a
// first miniImageNet or DomainNet load.
func BenchmarkDecodeRGB(b *testing.B) {
	data := encodeJPEG(fixturePhoto(3, 7, 500, 375))
	var s rgbScratch
	dst := make([]uint8, 84*84*3)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := decodeRGB("bench.jpg", data, 84, 84, dst, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiniImageNetLoad loads a miniImageNet-format fixture of 600
// photographs (500×375 JPEGs) at 84×84: decoding them all, or reading the
// cache a first load wrote.
func BenchmarkMiniImageNetLoad(b *testing.B) {
	const classes, per = 20, 30
	f := fakeMini{dir: b.TempDir(), classes: [3]int{classes - 2, 1, 1}, per: per}
	f.splits = filepath.Join(f.dir, "splits")
	c := 0
	for s, name := range miniSplitFiles {
		csv := "filename,label\n"
		for i := 0; i < f.classes[s]; i++ {
			for k := 0; k < per; k++ {
				csv += fmt.Sprintf("%s,%s\n", miniFile(c, k), miniWnid(c))
				writeFile(b, f.path(c, k), encodeJPEG(fixturePhoto(c, k, 500, 375)))
			}
			c++
		}
		writeFile(b, filepath.Join(f.splits, name+".csv"), []byte(csv))
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			f.load(b, ImageOptions{NoCache: true})
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/(classes*per), "ms/image")
	})
	b.Run("cached", func(b *testing.B) {
		cache := b.TempDir()
		f.load(b, ImageOptions{CacheDir: cache})
		for b.Loop() {
			if s := f.load(b, ImageOptions{CacheDir: cache}); !s.Info().FromCache {
				b.Fatal("not from the cache")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/(classes*per), "µs/image")
	})
}

// BenchmarkCIFARFSLoad reads a CIFAR-100 python-version fixture of 6,000
// images (a tenth of the real data set) and groups it by class.
func BenchmarkCIFARFSLoad(b *testing.B) {
	fc := newFakeCIFAR(100, 50, 10)
	for _, form := range []string{"python", "binary"} {
		dir := b.TempDir()
		files := fc.pythonFiles()
		if form == "binary" {
			files = fc.binaryFiles()
		}
		writeFiles(b, filepath.Join(dir, "cifar-100-"+form), files)
		splits := b.TempDir()
		all := make([]int, 100)
		for i := range all {
			all[i] = i
		}
		fc.writeSplits(b, splits, all[:64], all[64:80], all[80:])
		b.Run(form, func(b *testing.B) {
			for b.Loop() {
				if _, err := LoadCIFARFS(dir, ImageOptions{SplitDir: splits}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/6000, "µs/image")
		})
	}
}
