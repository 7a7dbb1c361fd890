package datasets

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// allocated is the bytes the heap handed out while f ran (all goroutines'
// together: the tests run nothing else meanwhile).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// The cost predicted from an image's headers covers what decoding and
// resizing it allocate (measured, for every colour type, depth,
// interlacing, JPEG sampling and progression), and is not far above it, so
// the budget refuses only what would really pass it.
func TestDecodeCostCoversAllocation(t *testing.T) {
	for name, data := range costCases(t) {
		hd, err := readImageHead(name, data, 84, 84, filterArea)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dst := make([]uint8, 84*84*3)
		var s rgbScratch
		var derr error
		got := allocated(func() { derr = decodeRGB(name, data, 84, 84, dst, &s) })
		if derr != nil {
			t.Fatalf("%s: %v", name, derr)
		}
		pixels := hd.cost - decodeOverhead
		t.Logf("%-22s %dx%d predicted %8d allocated %8d (%.2f)", name, hd.cfg.Width, hd.cfg.Height, hd.cost, got, float64(got)/float64(pixels))
		if int64(got) > hd.cost {
			t.Errorf("%s: decoding allocated %d bytes, the headers predicted %d", name, got, hd.cost)
		}
		if int64(got) < pixels/2 {
			t.Errorf("%s: decoding allocated %d bytes, the headers predicted %d: the prediction is too dear", name, got, pixels)
		}
	}
}

// A 16-bit 8192×8192 PNG of half a megabyte (it would take 512 MB as
// RGBA64) is refused from its header, with the file, its size, the limit
// and what to do, before anything of its size is allocated.
func TestDecodeRefusesImagesOverBudget(t *testing.T) {
	giant := pngBytes(pngSpec{w: 8192, h: 8192, depth: 16, ctype: 6}, func(y int, b []byte) {})
	t.Logf("16-bit 8192×8192 PNG: %d bytes", len(giant))
	// A progressive JPEG whose frame header claims 8192×8192: its
	// coefficients alone would take 768 MB.
	prog, err := os.ReadFile(filepath.Join("testdata", "jpeg", "prog444.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(prog, []byte{0xff, 0xc2})
	binary.BigEndian.PutUint16(prog[i+5:], 8192)
	binary.BigEndian.PutUint16(prog[i+7:], 8192)
	for name, data := range map[string][]byte{"giant.png": giant, "giant.jpg": prog} {
		dst := make([]uint8, 84*84*3)
		var s rgbScratch
		var derr error
		got := allocated(func() { derr = decodeRGB(name, data, 84, 84, dst, &s) })
		if derr == nil {
			t.Fatalf("%s decoded", name)
		}
		msg := derr.Error()
		for _, want := range []string{name + ": ", "8192×8192", "192.0 MB", "downscale it to "} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not say %q", name, msg, want)
			}
		}
		if got > 4<<20 {
			t.Errorf("%s: refusing it allocated %d bytes", name, got)
		}
	}
}

// Images within the budget decode as they always did: the colour models
// that now take the allocation-free path (16-bit, paletted with and without
// transparency) give the bytes of color.NRGBAModel, pixel by pixel.
func TestRGBRowMatchesNRGBAModel(t *testing.T) {
	r := image.Rect(0, 0, 37, 5)
	pal := color.Palette{color.NRGBA{200, 100, 50, 3}, color.RGBA{10, 20, 30, 40}, color.Gray{77}, color.NRGBA64{0x1234, 0x5678, 0x9abc, 0x8000}}
	imgs := map[string]image.Image{
		"Gray16": image.NewGray16(r), "RGBA64": image.NewRGBA64(r), "NRGBA64": image.NewNRGBA64(r),
		"CMYK": image.NewCMYK(r), "Paletted": image.NewPaletted(r, pal), "Alpha16": image.NewAlpha16(r),
	}
	for name, img := range imgs {
		// Every byte of the pixels, whatever their layout.
		switch m := img.(type) {
		case *image.Gray16:
			fillBytes(m.Pix)
		case *image.RGBA64:
			fillBytes(m.Pix)
		case *image.NRGBA64:
			fillBytes(m.Pix)
		case *image.CMYK:
			fillBytes(m.Pix)
		case *image.Alpha16:
			fillBytes(m.Pix)
		case *image.Paletted:
			for i := range m.Pix {
				m.Pix[i] = uint8(i % len(pal))
			}
		}
		row := make([]float32, 3*r.Dx())
		for y := 0; y < r.Dy(); y++ {
			rgbRow(img, y, row)
			for x := 0; x < r.Dx(); x++ {
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				if row[3*x] != float32(c.R) || row[3*x+1] != float32(c.G) || row[3*x+2] != float32(c.B) {
					t.Fatalf("%s (%d, %d): %v, want %v", name, x, y, row[3*x:3*x+3], c)
				}
			}
		}
	}
}

func fillBytes(pix []uint8) {
	for i := range pix {
		pix[i] = uint8(i*151 + i>>3)
	}
}

// The gate lets no more bytes in at once than its capacity, first come
// first served, and a weight above the capacity waits for everything else.
func TestMemGate(t *testing.T) {
	g := newMemGate(100)
	var mu sync.Mutex
	var in, peak int64
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(n int64) {
			defer wg.Done()
			held := g.acquire(n)
			mu.Lock()
			in += n
			peak = max(peak, in)
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			in -= n
			mu.Unlock()
			g.release(held)
		}(int64(1 + i*7%130))
	}
	wg.Wait()
	// The weights over 100 count as 100 at the gate, and run alone.
	if peak > 130 {
		t.Fatalf("peak %d in at once, capacity 100", peak)
	}
	if g.used != 0 || len(g.queue) != 0 {
		t.Fatalf("gate left with %d used, %d waiting", g.used, len(g.queue))
	}
	if !g.tryAcquire(100) || g.tryAcquire(1) {
		t.Fatal("tryAcquire")
	}
}
