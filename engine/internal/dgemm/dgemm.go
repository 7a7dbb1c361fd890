package dgemm

import (
	"fmt"
	"sync"
	"unsafe"
)

// Blocking parameters. A register tile is at most tileRows×tileCols; kcMax
// bounds the depth of one pass so that an 8-column panel of B (kcMax·8·8
// = 16 KiB) stays in L1 while the row tiles stream past it, and mcMax rows
// of A (read in place, never packed) bound the block kept in L2 meanwhile.
// The engine's products (every dimension ≤ 128) fit one block in every
// direction.
const (
	tileRows = 6
	tileCols = 8
	kcMax    = 256
	mcMax    = 144
	ncMax    = 512
)

// Flags telling a micro-kernel which parts of the epilogue to run.
const (
	flagBeta  = 1 << iota // C is read: acc += beta·C
	flagAlpha             // acc *= alpha (skipped when alpha == 1)
	flagBias              // acc += bias[row]
	flagReLU              // acc = max(acc, 0), NaN and -0 kept
	flagMask              // acc = 0 where !(mask > 0)
)

// kernelFunc computes nt register tiles of one column panel: tile t has
// base+1 rows if t < extra, else base (1…6), and starts at the row after
// the previous tile's in A, C, bias and mask. A tile with rows rows and 8
// or 4 columns (fixed per function) is acc[i][j] = Σ_p A(p, i)·B[p][j] over
// kc ≥ 1 steps, where A(p, i) is at a + p·sa + i·ra for the first tile and
// row p of B starts at b + p·sb. ra = 1 reads a stored Aᵀ, sa = 1 a stored
// A, so A is read in place either way. The kernel then applies the epilogue
// selected by flags in the order alpha, beta, bias, ReLU, mask, and stores
// the tile at c (row stride ldc). Strides are in elements.
type kernelFunc func(nt, base, extra, kc int, a *float64, sa, ra int, b *float64, sb int, c *float64, ldc int, alpha, beta float64, flags int, bias, mask *float64, ldm int)

// impl is a set of micro-kernels: full computes 8-column panels, half
// 4-column ones.
type impl struct {
	name       string
	full, half kernelFunc
}

var (
	goImpl = impl{name: "go", full: kernGo8, half: kernGo4}
	// impls lists the kernel sets this CPU can run, best first; active is
	// the one in use (tests switch it to cover every set).
	impls  = detect()
	active = impls[0]
)

// Kernel names the micro-kernel in use: "avx2" or "go".
func Kernel() string { return active.name }

// Epilogue is work fused into the store of a product. For every element
// v = alpha·(op(A)·op(B))[i][j] + beta·C[i][j] of the result, applied in
// this order:
//
//	v += RowBias[i]          if RowBias != nil (len ≥ m)
//	v = max(v, 0)            if ReLU (NaN and -0 pass through unchanged)
//	v = 0 unless Mask > 0    if Mask != nil, with Mask[i*LdMask+j]
type Epilogue struct {
	RowBias []float64
	ReLU    bool
	Mask    []float64
	LdMask  int
}

// Workspace holds the packing buffers of a product. The zero value is ready
// to use; buffers grow to the largest product seen and are then reused, so a
// caller that keeps a Workspace per goroutine allocates nothing in steady
// state. A Workspace must not be used by two goroutines at once.
type Workspace struct {
	pb    []float64
	tile  [tileRows * tileCols]float64
	tmask [tileRows * tileCols]float64
}

var pool = sync.Pool{New: func() any { return new(Workspace) }}

// Gemm computes C = alpha·op(A)·op(B) + beta·C with a workspace from an
// internal pool; see Workspace.Gemm.
func Gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	w := pool.Get().(*Workspace)
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
	pool.Put(w)
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C, where op(A) is m×k and
// op(B) is k×n, all row-major: op(A) = A (stored m×k, row stride lda) or, if
// tA, Aᵀ (A stored k×m); likewise for B with tB. C is m×n with row stride
// ldc. With beta == 0, C is not read (NaNs in it are overwritten), and with
// alpha == 0 or k == 0 neither A nor B is read, as in BLAS. It panics on
// inconsistent sizes.
func (w *Workspace) Gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// GemmEpilogue is Gemm followed by the element-wise epilogue ep, fused into
// the store of each tile.
func (w *Workspace) GemmEpilogue(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, ep Epilogue) {
	check(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc, &ep)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		noProduct(m, n, beta, c, ldc, &ep)
		return
	}
	im := active
	for pc := 0; pc < k; pc += kcMax {
		kc := min(kcMax, k-pc)
		// Later passes over k accumulate into what the first stored; the
		// epilogue runs once, after the last.
		bet := beta
		if pc > 0 {
			bet = 1
		}
		flags := 0
		if bet != 0 {
			flags |= flagBeta
		}
		if alpha != 1 {
			flags |= flagAlpha
		}
		if pc+kc == k {
			if ep.RowBias != nil {
				flags |= flagBias
			}
			if ep.ReLU {
				flags |= flagReLU
			}
			if ep.Mask != nil {
				flags |= flagMask
			}
		}
		for jc := 0; jc < n; jc += ncMax {
			nc := min(ncMax, n-jc)
			w.packB(im, tB, b, ldb, pc, kc, jc, nc)
			for ic := 0; ic < m; ic += mcMax {
				mc := min(mcMax, m-ic)
				w.block(im, tA, tB, a, lda, b, ldb, c, ldc, &ep, alpha, bet, flags, ic, mc, pc, kc, jc, nc)
			}
		}
	}
}

// panel returns the width (8 or 4) and the number of valid columns of the
// column panel that starts rem columns before the end of a block.
func panel(rem int) (width, valid int) {
	width = tileCols
	if rem <= tileCols/2 {
		width = tileCols / 2
	}
	return width, min(rem, width)
}

// tiles splits mc rows into the fewest tiles of at most tileRows rows, as
// evenly as possible: tile t has base+1 rows if t < extra, else base. Even
// tiles keep every tile near 6 rows (M = 20 → 5+5+5+5 rather than
// 6+6+6+2), so that each keeps ≥ 10 independent accumulators busy.
func tiles(mc int) (nt, base, extra int) {
	nt = (mc + tileRows - 1) / tileRows
	return nt, mc / nt, mc % nt
}

// block multiplies one mc×kc block of op(A) by one kc×nc block of op(B).
// Column panels are the outer loop so that a panel of B stays in L1 while
// the kernel runs down the row tiles.
func (w *Workspace) block(im *impl, tA, tB bool, a []float64, lda int, b []float64, ldb int, c []float64, ldc int, ep *Epilogue, alpha, beta float64, flags, ic, mc, pc, kc, jc, nc int) {
	nt, base, extra := tiles(mc)
	var ap *float64
	sa, ra := lda, 1
	if tA {
		ap = &a[pc*lda+ic]
	} else {
		ap, sa, ra = &a[ic*lda+pc], 1, lda
	}
	var bias *float64
	if flags&flagBias != 0 {
		bias = &ep.RowBias[ic]
	}
	for j0 := 0; j0 < nc; {
		width, valid := panel(nc - j0)
		var bp *float64
		sb := width
		if !tB && valid == width {
			bp, sb = &b[pc*ldb+jc+j0], ldb
		} else {
			bp = &w.pb[j0*kc]
		}
		kern := im.full
		if width != tileCols {
			kern = im.half
		}
		if valid == width {
			var mask *float64
			if flags&flagMask != 0 {
				mask = &ep.Mask[ic*ep.LdMask+jc+j0]
			}
			kern(nt, base, extra, kc, ap, sa, ra, bp, sb, &c[ic*ldc+jc+j0], ldc, alpha, beta, flags, bias, mask, ep.LdMask)
		} else {
			// A partial panel goes through the workspace tile, one row
			// tile at a time.
			r0 := 0
			for t := 0; t < nt; t++ {
				rows := base
				if t < extra {
					rows++
				}
				i := ic + r0
				var tbias *float64
				if bias != nil {
					tbias = &ep.RowBias[i]
				}
				var tap *float64
				if tA {
					tap = &a[pc*lda+i]
				} else {
					tap = &a[i*lda+pc]
				}
				w.edgeTile(kern, rows, kc, tap, sa, ra, bp, sb, c[i*ldc+jc+j0:], ldc, valid, alpha, beta, flags, tbias, ep, i, jc+j0)
				r0 += rows
			}
		}
		j0 += width
	}
}

// edgeTile runs a kernel on a tile of which only valid columns exist in C:
// through the workspace tile, so that the kernel never touches memory past
// the end of a row of C (or of the mask).
func (w *Workspace) edgeTile(kern kernelFunc, rows, kc int, ap *float64, sa, ra int, bp *float64, sb int, c []float64, ldc, valid int, alpha, beta float64, flags int, bias *float64, ep *Epilogue, i, j int) {
	t := &w.tile
	if flags&flagBeta != 0 {
		for r := 0; r < rows; r++ {
			copy(t[r*tileCols:r*tileCols+valid], c[r*ldc:r*ldc+valid])
		}
	}
	var mask *float64
	if flags&flagMask != 0 {
		tm := &w.tmask
		clear(tm[:])
		for r := 0; r < rows; r++ {
			o := (i+r)*ep.LdMask + j
			copy(tm[r*tileCols:r*tileCols+valid], ep.Mask[o:o+valid])
		}
		mask = &tm[0]
	}
	kern(1, rows, 0, kc, ap, sa, ra, bp, sb, &t[0], tileCols, alpha, beta, flags, bias, mask, tileCols)
	for r := 0; r < rows; r++ {
		copy(c[r*ldc:r*ldc+valid], t[r*tileCols:r*tileCols+valid])
	}
}

// packB copies the column panels of a kc×nc block of op(B) that the kernels
// cannot read in place (all of them if B is stored transposed, otherwise
// only a last, partial panel) into zero-padded panels of 8 or 4 columns.
func (w *Workspace) packB(im *impl, tB bool, b []float64, ldb, pc, kc, jc, nc int) {
	if !tB && nc%(tileCols/2) == 0 {
		return
	}
	// Panels are laid out at j0·kc; the widths add up to less than nc+8.
	w.pb = grow(w.pb, (nc+tileCols)*kc)
	for j0 := 0; j0 < nc; {
		width, valid := panel(nc - j0)
		if tB || valid < width {
			dst := w.pb[j0*kc : (j0+width)*kc]
			if tB {
				packBT(im, dst, b, ldb, pc, kc, jc+j0, width, valid)
			} else {
				for p := 0; p < kc; p++ {
					d := dst[p*width : (p+1)*width]
					o := (pc+p)*ldb + jc + j0
					copy(d, b[o:o+valid])
					clear(d[valid:])
				}
			}
		}
		j0 += width
	}
}

// packBT packs columns j…j+valid of op(B) = Bᵀ, i.e. rows of the stored B,
// into a panel of the given width (zero beyond valid).
func packBT(im *impl, dst, b []float64, ldb, pc, kc, j, width, valid int) {
	for c0 := 0; c0 < valid; c0 += 8 {
		src := b[(j+c0)*ldb+pc:]
		n := min(8, valid-c0)
		p0 := 0
		if n == 8 && width >= c0+8 {
			// Eight whole rows: walk them side by side so that each panel
			// row is written at once, with the bounds checked per slice
			// rather than per element (this transpose took a third of
			// the time of the products it feeds in the RFF features).
			r0, r1, r2, r3 := src[:kc], src[ldb:ldb+kc], src[2*ldb:2*ldb+kc], src[3*ldb:3*ldb+kc]
			r4, r5, r6, r7 := src[4*ldb:4*ldb+kc], src[5*ldb:5*ldb+kc], src[6*ldb:6*ldb+kc], src[7*ldb:7*ldb+kc]
			for p := range kc {
				d := dst[p*width+c0 : p*width+c0+8 : p*width+c0+8]
				d[0], d[1], d[2], d[3] = r0[p], r1[p], r2[p], r3[p]
				d[4], d[5], d[6], d[7] = r4[p], r5[p], r6[p], r7[p]
			}
			continue
		}
		for c := 0; c < n; c++ {
			row := src[c*ldb+p0 : c*ldb+kc]
			for p, v := range row {
				dst[(p0+p)*width+c0+c] = v
			}
		}
	}
	for c := valid; c < width; c++ {
		for p := 0; p < kc; p++ {
			dst[p*width+c] = 0
		}
	}
}

// grow returns a buffer of at least n floats whose first element is 64-byte
// aligned (a cache line: an 8-double row of a packed panel then never
// straddles two), reusing buf when it is large enough.
func grow(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:cap(buf)]
	}
	n = max(n, 2*cap(buf))
	raw := make([]float64, n+7)
	off := 0
	if r := uintptr(unsafe.Pointer(&raw[0])) % 64; r != 0 {
		off = int(64-r) / 8
	}
	return raw[off : off+n : off+n]
}

// noProduct handles alpha == 0 or k == 0: C = beta·C plus the epilogue.
func noProduct(m, n int, beta float64, c []float64, ldc int, ep *Epilogue) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			var v float64
			if beta != 0 {
				v = beta * row[j]
			}
			if ep.RowBias != nil {
				v += ep.RowBias[i]
			}
			if ep.ReLU && v < 0 {
				v = 0
			}
			if ep.Mask != nil && !(ep.Mask[i*ep.LdMask+j] > 0) {
				v = 0
			}
			row[j] = v
		}
	}
}

// check panics if the arguments are inconsistent, with the BLAS-like
// message of the first problem found.
func check(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int, ep *Epilogue) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("dgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	stored := func(name string, trans bool, rows, cols int, x []float64, ld int, read bool) {
		if trans {
			rows, cols = cols, rows
		}
		if ld < max(1, cols) {
			panic(fmt.Sprintf("dgemm: %s has leading dimension %d < %d", name, ld, max(1, cols)))
		}
		if read && rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("dgemm: %s has %d elements, want ≥ %d", name, len(x), (rows-1)*ld+cols))
		}
	}
	product := alpha != 0 && m > 0 && n > 0
	stored("A", tA, m, k, a, lda, product)
	stored("B", tB, k, n, b, ldb, product)
	stored("C", false, m, n, c, ldc, true)
	if ep.RowBias != nil && len(ep.RowBias) < m {
		panic(fmt.Sprintf("dgemm: RowBias has %d elements, want ≥ %d", len(ep.RowBias), m))
	}
	if ep.Mask != nil {
		stored("Mask", false, m, n, ep.Mask, ep.LdMask, true)
	}
}
