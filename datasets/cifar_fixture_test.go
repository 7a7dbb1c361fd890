package datasets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"path/filepath"
	"testing"
)

// py2Pickler writes pickles the way Python 2's cPickle (protocol 2) writes
// CIFAR-100's files: byte strings as SHORT_BINSTRING or BINSTRING, small
// ints as BININT1/BININT2, lists in batches of 1,000 appends, every string
// and container memoized with BINPUT, and numpy arrays through
// numpy.core.multiarray._reconstruct and a dtype BUILD state (compare
// testdata/pickle/py2_train.pkl, written by Python 2.7).
type py2Pickler struct {
	buf  bytes.Buffer
	memo int
}

func (p *py2Pickler) put() {
	p.memo++
	if p.memo < 256 {
		p.buf.Write([]byte{'q', byte(p.memo)})
		return
	}
	p.buf.WriteByte('r')
	binary.Write(&p.buf, binary.LittleEndian, uint32(p.memo))
}

func (p *py2Pickler) str(s string) {
	if len(s) < 256 {
		p.buf.Write([]byte{'U', byte(len(s))})
	} else {
		p.buf.WriteByte('T')
		binary.Write(&p.buf, binary.LittleEndian, uint32(len(s)))
	}
	p.buf.WriteString(s)
	p.put()
}

func (p *py2Pickler) int(v int) {
	switch {
	case v >= 0 && v < 256:
		p.buf.Write([]byte{'K', byte(v)})
	case v >= 0 && v < 65536:
		p.buf.WriteByte('M')
		binary.Write(&p.buf, binary.LittleEndian, uint16(v))
	default:
		p.buf.WriteByte('J')
		binary.Write(&p.buf, binary.LittleEndian, int32(v))
	}
}

// list writes n items, item(i) writing each.
func (p *py2Pickler) list(n int, item func(i int)) {
	p.buf.WriteByte(']')
	p.put()
	for start := 0; start < n; start += 1000 {
		end := min(start+1000, n)
		if end-start == 1 {
			item(start)
			p.buf.WriteByte('a')
			continue
		}
		p.buf.WriteByte('(')
		for i := start; i < end; i++ {
			item(i)
		}
		p.buf.WriteByte('e')
	}
}

// uint8Array writes a 2-D uint8 numpy array as numpy's __reduce__ returns
// it in Python 2.
func (p *py2Pickler) uint8Array(rows, cols int, data []byte) {
	p.buf.WriteString("cnumpy.core.multiarray\n_reconstruct\n")
	p.put()
	p.buf.WriteString("cnumpy\nndarray\n")
	p.put()
	p.buf.Write([]byte{'K', 0, 0x85})
	p.put()
	p.buf.Write([]byte{'U', 1, 'b', 0x87, 'R'})
	p.put()
	p.buf.WriteByte('(')
	p.int(1)
	p.int(rows)
	p.int(cols)
	p.buf.WriteByte(0x86)
	p.put()
	p.buf.WriteString("cnumpy\ndtype\n")
	p.put()
	p.str("u1")
	p.buf.Write([]byte{'K', 0, 'K', 1, 0x87, 'R'})
	p.put()
	p.buf.Write([]byte("(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"))
	p.buf.WriteByte(0x89) // is_fortran False
	p.str(string(data))
	p.buf.WriteString("tb")
}

// dict writes a dict of the given keys in order, value(k) writing each.
func (p *py2Pickler) dict(keys []string, value func(k string)) []byte {
	p.buf.Write([]byte{0x80, 2, '}'})
	p.put()
	p.buf.WriteByte('(')
	for _, k := range keys {
		p.str(k)
		value(k)
	}
	p.buf.Write([]byte{'u', '.'})
	return p.buf.Bytes()
}

// fakeCIFAR is a small CIFAR-100: fine classes named fine_NN in coarse
// classes coarse_N (fine class c in coarse c/2), train and test images per
// class in file order interleaved across classes, as in the real files.
type fakeCIFAR struct {
	fine, coarse []string
	// parts[0] train, parts[1] test: per image its fine class and planar
	// pixels.
	parts [2]struct {
		fine []int
		pix  []byte
	}
}

func newFakeCIFAR(classes, train, test int) *fakeCIFAR {
	return newFakeCIFARWith(classes, train, test, fixturePhoto)
}

// newFakeCIFARWith draws the images with photo.
func newFakeCIFARWith(classes, train, test int, photo func(c, k, w, h int) *image.RGBA) *fakeCIFAR {
	f := &fakeCIFAR{}
	for c := 0; c < classes; c++ {
		f.fine = append(f.fine, fmt.Sprintf("fine_%02d", c))
	}
	for c := 0; c < (classes+1)/2; c++ {
		f.coarse = append(f.coarse, fmt.Sprintf("coarse_%d", c))
	}
	for pi, per := range []int{train, test} {
		p := &f.parts[pi]
		for k := 0; k < per; k++ {
			for c := 0; c < classes; c++ {
				p.fine = append(p.fine, c)
				p.pix = append(p.pix, planar(photo(c, pi*1000+k, CIFARSide, CIFARSide))...)
			}
		}
	}
	return f
}

// cifarPhoto is a 32×32 image of class c in CIFAR's planar layout: the
// fixture photo's colour and gradient, with noise.
func cifarPhoto(c, k int) []byte { return planar(fixturePhoto(c, k, CIFARSide, CIFARSide)) }

// planar lays a 32×32 image out as CIFAR stores it.
func planar(img *image.RGBA) []byte {
	out := make([]byte, cifarPixels)
	for i := 0; i < CIFARSide*CIFARSide; i++ {
		for ch := 0; ch < 3; ch++ {
			out[ch*1024+i] = img.Pix[4*i+ch]
		}
	}
	return out
}

func (f *fakeCIFAR) coarseOf(c int) int { return c / 2 }

// pythonFiles are cifar-100-python/{train,test,meta}.
func (f *fakeCIFAR) pythonFiles() map[string][]byte {
	out := map[string][]byte{}
	for pi, name := range []string{"train", "test"} {
		part := f.parts[pi]
		n := len(part.fine)
		var p py2Pickler
		// The real files' key order.
		out[name] = p.dict([]string{"filenames", "batch_label", "fine_labels", "coarse_labels", "data"}, func(k string) {
			switch k {
			case "filenames":
				p.list(n, func(i int) { p.str(fmt.Sprintf("%s_s_%06d.png", f.fine[part.fine[i]], i)) })
			case "batch_label":
				p.str(map[string]string{"train": "training batch 1 of 1", "test": "testing batch 1 of 1"}[name])
			case "fine_labels":
				p.list(n, func(i int) { p.int(part.fine[i]) })
			case "coarse_labels":
				p.list(n, func(i int) { p.int(f.coarseOf(part.fine[i])) })
			case "data":
				p.uint8Array(n, cifarPixels, part.pix)
			}
		})
	}
	var p py2Pickler
	out["meta"] = p.dict([]string{"fine_label_names", "coarse_label_names"}, func(k string) {
		names := map[string][]string{"fine_label_names": f.fine, "coarse_label_names": f.coarse}[k]
		p.list(len(names), func(i int) { p.str(names[i]) })
	})
	return out
}

// binaryFiles are cifar-100-binary/{train.bin,test.bin,*_label_names.txt}.
func (f *fakeCIFAR) binaryFiles() map[string][]byte {
	out := map[string][]byte{}
	for pi, name := range []string{"train.bin", "test.bin"} {
		var b bytes.Buffer
		part := f.parts[pi]
		for i, c := range part.fine {
			b.WriteByte(byte(f.coarseOf(c)))
			b.WriteByte(byte(c))
			b.Write(part.pix[i*cifarPixels : (i+1)*cifarPixels])
		}
		out[name] = b.Bytes()
	}
	names := func(l []string) []byte {
		var b bytes.Buffer
		for _, n := range l {
			b.WriteString(n + "\n")
		}
		b.WriteString("\n") // the real files end in a blank line
		return b.Bytes()
	}
	out["fine_label_names.txt"] = names(f.fine)
	out["coarse_label_names.txt"] = names(f.coarse)
	return out
}

// targz packs files under folder/ as the downloaded archives do.
func targz(folder string, files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: folder + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, name := range sortedNames(files) {
		tw.WriteHeader(&tar.Header{Name: folder + "/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[name]))})
		tw.Write(files[name])
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
}

// splitJSON writes a CIFAR-FS split file for the given fine classes.
func (f *fakeCIFAR) splitJSON(classes ...int) []byte {
	pairs := make([][2]string, len(classes))
	for i, c := range classes {
		pairs[i] = [2]string{f.coarse[f.coarseOf(c)], f.fine[c]}
	}
	b, _ := json.Marshal(pairs)
	return b
}

// writeSplits writes train.json (the first classes), val.json and
// test.json into dir.
func (f *fakeCIFAR) writeSplits(t testing.TB, dir string, train, val, test []int) {
	writeFile(t, filepath.Join(dir, "train.json"), f.splitJSON(train...))
	writeFile(t, filepath.Join(dir, "val.json"), f.splitJSON(val...))
	writeFile(t, filepath.Join(dir, "test.json"), f.splitJSON(test...))
}
