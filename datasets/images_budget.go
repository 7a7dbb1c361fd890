package datasets

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"math"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/internal/runfile"
)

// The memory rule of image decoding. Every image ends at 84×84 or so, but
// Go's decoders hold the whole image, and more: a 16-bit PNG takes 8 bytes
// a pixel, a progressive JPEG 4 bytes a pixel for each component's
// coefficients besides its planes. So the bytes a decode will allocate are
// predicted from the headers (decodeCost, mirroring image/png and
// image/jpeg), an image whose prediction passes maxDecodeBytes is refused
// before it is decoded, and the decodes of a process share decodeMemory
// through decodeGate, whatever the number of cores.
const (
	// maxDecodeBytes bounds what decoding and resizing one image may
	// allocate. A 12-megapixel (4032×3024) photograph fits however it
	// is encoded: 21 MB as a baseline JPEG, 91 MB progressive with colour
	// subsampled, 178 MB progressive without, 96 MB as a 16-bit RGB PNG;
	// a 48-megapixel baseline JPEG takes 76 MB. A 16-bit 8192×8192 PNG
	// (513 MB) or progressive JPEG (488 to 968 MB) is refused.
	maxDecodeBytes = 192 << 20
	// decodeMemory bounds the bytes of all the images being read and
	// decoded at once, their files included: room for the largest image
	// one may decode (maxDecodeBytes plus a maxImageBytes file) at a time,
	// and for hundreds of ordinary ones.
	decodeMemory = 256 << 20
	// collectAfter is the decode cost past which a decode's garbage is
	// collected before its bytes go back to the gate, so that the next
	// decode reuses them instead of growing the heap: the collector's
	// pacing would let the heap reach twice what was live at its last
	// cycle, the process's peak twice decodeMemory. A decode that large
	// takes a tenth of a second or more; the collection, of a heap of
	// few pointers (pixels are not scanned), a few milliseconds.
	collectAfter = 32 << 20
	// decodeOverhead covers what a decode allocates besides its pixels:
	// inflate's window and tables, Huffman tables, buffers.
	decodeOverhead = 256 << 10
)

// decodeGate is the one gate of the process's image decodes.
var decodeGate = newMemGate(decodeMemory)

// decodeHook, when set (by tests), is called with the bytes an image holds
// as its decode starts (enter) and after it ends.
var decodeHook func(label string, bytes int64, enter bool)

// imageHead is what an image's headers say, read before decoding it.
type imageHead struct {
	cfg    image.Config
	format string
	cost   int64 // bytes decoding and resizing it allocates, at most
}

// readImageHead reads and checks the headers of a JPEG or PNG that is to be
// resized to w×h with filter, refusing an image whose decode would pass
// maxDecodeBytes.
func readImageHead(label string, data []byte, w, h int, filter resizeFilter) (imageHead, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return imageHead{}, fmt.Errorf("datasets: %s: not a JPEG or PNG image: %v", label, err)
	}
	if format != "jpeg" && format != "png" {
		return imageHead{}, fmt.Errorf("datasets: %s: a %s image, want JPEG or PNG", label, format)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxImagePixels/cfg.Height {
		return imageHead{}, fmt.Errorf("datasets: %s: image claims to be %d×%d pixels", label, cfg.Width, cfg.Height)
	}
	hd := imageHead{cfg: cfg, format: format}
	if format == "png" {
		hd.cost = pngCost(data, cfg.Width, cfg.Height)
	} else {
		hd.cost = jpegCost(data, cfg.Width, cfg.Height)
	}
	hd.cost += resizeCost(cfg.Width, cfg.Height, w, h, filter) + decodeOverhead
	if hd.cost > maxDecodeBytes {
		return imageHead{}, overBudget(label, hd)
	}
	return hd, nil
}

// overBudget is the refusal of an image too large to decode, with the size
// that would fit: the cost grows with the pixels, so both sides shrink by
// the square root of the excess (and a little more, for the parts of the
// cost that do not shrink).
func overBudget(label string, hd imageHead) error {
	f := math.Sqrt(float64(maxDecodeBytes)/float64(hd.cost)) * 0.95
	w, h := max(1, int(float64(hd.cfg.Width)*f)), max(1, int(float64(hd.cfg.Height)*f))
	return fmt.Errorf("datasets: %s: a %d×%d %s would take %s to decode, more than the %s one image may; downscale it to %d×%d or less (it is shrunk to a few dozen pixels a side anyway)",
		label, hd.cfg.Width, hd.cfg.Height, imageKind(hd.format), runfile.Size(hd.cost), runfile.Size(maxDecodeBytes), w, h)
}

func imageKind(format string) string {
	if format == "png" {
		return "PNG"
	}
	return "JPEG"
}

// pngCost is what image/png allocates for a w×h PNG: the image in the
// type the colour type, depth and transparency decode to, twice over when
// interlaced (each pass is decoded to its own image, then merged), and two
// rows. The chunks are walked to the first IDAT, where the decoder takes
// tRNS; a walk that fails assumes transparency, the dearer case.
func pngCost(data []byte, w, h int) int64 {
	// DecodeConfig has checked the signature and that IHDR comes first.
	if len(data) < 33 {
		return math.MaxInt64 / 4
	}
	depth, ctype, interlaced := data[24], data[25], data[28] != 0
	trns, known := false, false
	for p := 33; p+8 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[p:]))
		kind := string(data[p+4 : p+8])
		if kind == "IDAT" {
			known = true
			break
		}
		if kind == "tRNS" {
			trns = true
		}
		if n > int64(len(data)-p) {
			break
		}
		p += 12 + int(n)
	}
	if !known {
		trns = true
	}
	bpp := int64(4) // NRGBA or RGBA
	switch {
	case depth == 16 && ctype == 0 && !trns:
		bpp = 2 // Gray16
	case depth == 16:
		bpp = 8 // RGBA64 or NRGBA64
	case ctype == 3, ctype == 0 && !trns:
		bpp = 1 // Paletted or Gray
	}
	px := int64(w) * int64(h) * bpp
	if interlaced {
		px *= 2
	}
	return px + 2*(1+8*int64(w))
}

// jpegCost is what image/jpeg allocates for a w×h JPEG: the planes of
// each component, padded to whole MCUs (Y, Cb, Cr and K as sampled), a
// progressive image's coefficients (a 256-byte block for each 8×8 of each
// component), and the 4 bytes a pixel of the final image when the decoder
// converts (CMYK, or RGB stored as such). The markers are walked as the
// decoder walks them; a stream it cannot follow costs the most any JPEG
// can.
func jpegCost(data []byte, w, h int) int64 {
	j, ok := jpegMarkers(data)
	px := int64(w) * int64(h)
	if !ok {
		// Four full-resolution components, progressive, converted.
		return px * (4 + 16 + 4)
	}
	h0, v0 := j.h[0], j.v[0]
	mcus := int64((w+8*h0-1)/(8*h0)) * int64((h+8*v0-1)/(8*v0))
	var samples int64 // per MCU, all components
	for i := 0; i < j.nComp; i++ {
		samples += 64 * int64(j.h[i]*j.v[i])
	}
	cost := mcus * samples
	if j.progressive {
		cost += 4 * mcus * samples
	}
	if j.nComp == 4 || j.nComp == 3 && j.rgb {
		cost += 4 * px
	}
	return cost
}

// jpegInfo is what jpegMarkers reads from a JPEG's markers.
type jpegInfo struct {
	nComp       int
	progressive bool
	h, v        [4]int
	rgb         bool // the decoder will convert to RGBA (not JFIF; Adobe transform 0 or components named R, G, B)
}

// jpegMarkers walks the markers of a JPEG as image/jpeg does (fill bytes,
// stuffed bytes and entropy-coded data skipped, RSTn alone, every other
// marker with a length) up to EOI, reading the frame header (SOF0, SOF1 or
// SOF2) and the markers that decide the colour conversion. ok is false when
// no frame header was found or it is not one the decoder takes.
func jpegMarkers(data []byte) (j jpegInfo, ok bool) {
	// The decoder keeps the last APP0's and APP14's word; whichever of
	// them it meets, these assume the conversion when any says so.
	var jfif, notJFIF, adobeRGB bool
	var ids [4]byte
	p := 2 // after SOI
	for p < len(data) {
		i := bytes.IndexByte(data[p:], 0xff)
		if i < 0 {
			break
		}
		p += i + 1
		for p < len(data) && data[p] == 0xff {
			p++
		}
		if p >= len(data) {
			break
		}
		m := data[p]
		p++
		if m == 0 || 0xd0 <= m && m <= 0xd7 {
			continue
		}
		if m == 0xd9 || p+2 > len(data) {
			break
		}
		n := int(data[p])<<8 | int(data[p+1]) - 2
		p += 2
		if n < 0 || n > len(data)-p {
			break
		}
		seg := data[p : p+n]
		p += n
		switch {
		case m == 0xc0 || m == 0xc1 || m == 0xc2:
			if j.nComp != 0 || n < 6 || int(seg[5]) != (n-6)/3 || (n-6)%3 != 0 {
				return j, false
			}
			j.nComp = int(seg[5])
			if j.nComp != 1 && j.nComp != 3 && j.nComp != 4 {
				return j, false
			}
			j.progressive = m == 0xc2
			for c := 0; c < j.nComp; c++ {
				ids[c] = seg[6+3*c]
				j.h[c], j.v[c] = int(seg[7+3*c]>>4), int(seg[7+3*c]&15)
				if j.h[c] < 1 || j.h[c] > 4 || j.v[c] < 1 || j.v[c] > 4 {
					return j, false
				}
			}
			if j.nComp == 1 {
				j.h[0], j.v[0] = 1, 1 // one component is never interleaved
			}
		case m == 0xe0 && n >= 5:
			if string(seg[:5]) == "JFIF\x00" {
				jfif = true
			} else {
				notJFIF = true
			}
		case m == 0xee && n >= 12 && string(seg[:5]) == "Adobe" && seg[11] == 0:
			adobeRGB = true
		}
	}
	if j.nComp == 0 {
		return j, false
	}
	j.rgb = !(jfif && !notJFIF) && (adobeRGB || j.nComp == 3 && ids[0] == 'R' && ids[1] == 'G' && ids[2] == 'B')
	return j, true
}

// resizeCost is the working memory resizing a sw×sh image to w×h takes
// (see resizeAreaRGB and resizeBilinearRGB): float32 RGB buffers and the
// filters' weights.
func resizeCost(sw, sh, w, h int, filter resizeFilter) int64 {
	if filter == filterBilinearAligned {
		return 2 * 12 * int64(sw)
	}
	return 12*int64(w)*int64(sh) + 12*int64(sw) + 8*(int64(sw)+int64(sh)+4*int64(w+h))
}

// memGate is a weighted semaphore over bytes: acquire(n) waits until n
// more bytes fit under the capacity, first come first served, so a large
// image is not passed over forever by small ones. A weight above the
// capacity is taken as the capacity: it waits for everything else.
type memGate struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	queue    []*gateWaiter
}

type gateWaiter struct {
	n     int64
	ready chan struct{}
}

func newMemGate(capacity int64) *memGate { return &memGate{capacity: capacity} }

// acquire waits for n bytes and returns the weight taken, which release
// must be given back.
func (g *memGate) acquire(n int64) int64 {
	n = min(n, g.capacity)
	g.mu.Lock()
	if len(g.queue) == 0 && g.used+n <= g.capacity {
		g.used += n
		g.mu.Unlock()
		return n
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	<-w.ready
	return n
}

// tryAcquire takes n bytes if they fit now and no one waits; it never
// blocks, so a holder may call it.
func (g *memGate) tryAcquire(n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 && g.used+n <= g.capacity {
		g.used += n
		return true
	}
	return false
}

// releaseDecode gives back the held bytes of a decode that cost cost,
// collecting its garbage first when it is large (see collectAfter).
func (g *memGate) releaseDecode(held, cost int64) {
	if cost >= collectAfter {
		runtime.GC()
	}
	g.release(held)
}

func (g *memGate) release(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= n
	for len(g.queue) > 0 && g.used+g.queue[0].n <= g.capacity {
		w := g.queue[0]
		g.queue = g.queue[1:]
		g.used += w.n
		close(w.ready)
	}
}
