package sgemm

import (
	"fmt"
	"sync"
	"unsafe"
)

// Blocking parameters. A register tile is at most tileRows×tileCols; kcMax
// bounds the depth of one pass so that a 16-column panel of B (kcMax·16·4
// = 16 KiB) stays in L1 while the row tiles stream past it, and mcMax rows
// of A (read in place, never packed) bound the block kept in L2 meanwhile.
// The engine's products (every dimension ≤ 128) fit one block in every
// direction.
const (
	tileRows = 6
	tileCols = 16
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
// the previous tile's in A, C, bias and mask. A tile with rows rows and 16
// or 8 columns (fixed per function) is acc[i][j] = Σ_p A(p, i)·B[p][j] over
// kc ≥ 1 steps, where A(p, i) is at a + p·sa + i·ra for the first tile and
// row p of B starts at b + p·sb. ra = 1 reads a stored Aᵀ, sa = 1 a stored
// A, so A is read in place either way. The kernel then applies the epilogue
// selected by flags in the order alpha, beta, bias, ReLU, mask, and stores
// the tile at c (row stride ldc). Strides are in elements.
type kernelFunc func(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)

// impl is a set of micro-kernels.
type impl struct {
	name    string
	k16, k8 kernelFunc
	// transpose8, if not nil, packs with 8×8 transposes (see
	// transpose8AVX); otherwise the packers copy element by element.
	transpose8 func(dst *float32, ldd int, src *float32, lds, rows, nblk int)
	// Element-wise kernels over n (a multiple of 8) elements, or nil; see
	// vec.go for their meaning.
	exp, tanh    func(dst, src *float32, n int)
	coupling     func(y, x, o, t, s, ld *float32, n int)
	couplingGrad func(gs, gt, g, x, s, gl *float32, n int)
	rowSums      func(dst, src *float32, rows, cols, ld int)
	toFloat32    func(dst *float32, ldd int, src *float64, lds, rows, cols int)
	toFloat64    func(dst *float64, ldd int, src *float32, lds, rows, cols int)
	addToFloat64 func(dst *float64, src *float32, n int)
	// Pooling kernels over n (a multiple of 8) elements, or nil; see
	// pool.go.
	maxPool4 func(out *float32, arg *uint8, a, b, c, d *float32, n int)
	unpool4  func(a, b, c, d, gv, out *float32, arg *uint8, scale float32, n int)
	// maskedMaxPool4 is maxPool4 after dropout masks per cell.
	maskedMaxPool4 func(out *float32, arg *uint8, a, b, c, d, ma, mb, mc, md *float32, n int)
	// bernoulli fills n (a multiple of 16) mask elements, or is nil; see
	// mask.go.
	bernoulli func(m *float32, key uint64, thr uint32, n int)
	// Winograd tile kernels over the leading n (a multiple of 8) channels,
	// or nil; see wino.go.
	winoIn      func(v *float32, ldv int, src *float32, lds, c, n int)
	winoOutPool func(out *float32, arg *uint8, m *float32, ldm int, bias *float32, alpha float32, mask *float32, nmask, flags, n int)
	winoGradOut func(dm *float32, ldm int, db, gv, out *float32, arg *uint8, alpha float32, n int)
	winoInT     func(dst *float32, ldd int, dv *float32, ldv, c, n int)
}

var (
	goImpl = impl{name: "go", k16: kernGo16, k8: kernGo8}
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
	RowBias []float32
	ReLU    bool
	Mask    []float32
	LdMask  int
}

// Workspace holds the packing buffers of a product. The zero value is ready
// to use; buffers grow to the largest product seen and are then reused, so a
// caller that keeps a Workspace per goroutine allocates nothing in steady
// state. A Workspace must not be used by two goroutines at once.
type Workspace struct {
	pb    []float32
	tile  [tileRows * tileCols]float32
	tmask [tileRows * tileCols]float32
}

var pool = sync.Pool{New: func() any { return new(Workspace) }}

// Gemm computes C = alpha·op(A)·op(B) + beta·C with a workspace from an
// internal pool; see Workspace.Gemm.
func Gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
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
func (w *Workspace) Gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// GemmEpilogue is Gemm followed by the element-wise epilogue ep, fused into
// the store of each tile.
func (w *Workspace) GemmEpilogue(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
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

// panel returns the width (16 or 8) and the number of valid columns of the
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
func (w *Workspace) block(im *impl, tA, tB bool, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, ep *Epilogue, alpha, beta float32, flags, ic, mc, pc, kc, jc, nc int) {
	nt, base, extra := tiles(mc)
	var ap *float32
	sa, ra := lda, 1
	if tA {
		ap = &a[pc*lda+ic]
	} else {
		ap, sa, ra = &a[ic*lda+pc], 1, lda
	}
	var bias *float32
	if flags&flagBias != 0 {
		bias = &ep.RowBias[ic]
	}
	for j0 := 0; j0 < nc; {
		width, valid := panel(nc - j0)
		var bp *float32
		sb := width
		if !tB && valid == width {
			bp, sb = &b[pc*ldb+jc+j0], ldb
		} else {
			bp = &w.pb[j0*kc]
		}
		kern := im.k16
		if width != tileCols {
			kern = im.k8
		}
		if valid == width {
			var mask *float32
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
				var tbias *float32
				if bias != nil {
					tbias = &ep.RowBias[i]
				}
				var tap *float32
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
func (w *Workspace) edgeTile(kern kernelFunc, rows, kc int, ap *float32, sa, ra int, bp *float32, sb int, c []float32, ldc, valid int, alpha, beta float32, flags int, bias *float32, ep *Epilogue, i, j int) {
	t := &w.tile
	if flags&flagBeta != 0 {
		for r := 0; r < rows; r++ {
			copy(t[r*tileCols:r*tileCols+valid], c[r*ldc:r*ldc+valid])
		}
	}
	var mask *float32
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
// only a last, partial panel) into zero-padded panels of 16 or 8 columns.
func (w *Workspace) packB(im *impl, tB bool, b []float32, ldb, pc, kc, jc, nc int) {
	if !tB && nc%(tileCols/2) == 0 {
		return
	}
	// Panels are laid out at j0·kc; the widths add up to less than nc+16.
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
func packBT(im *impl, dst, b []float32, ldb, pc, kc, j, width, valid int) {
	for c0 := 0; c0 < valid; c0 += 8 {
		src := b[(j+c0)*ldb+pc:]
		n := min(8, valid-c0)
		p0 := 0
		if im.transpose8 != nil && n == 8 && kc >= 8 {
			nb := kc / 8
			im.transpose8(&dst[c0], width, &src[0], ldb, 8, nb)
			p0 = 8 * nb
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
// aligned (a cache line: a 16-float row of a packed panel then never
// straddles two), reusing buf when it is large enough.
func grow(buf []float32, n int) []float32 {
	if cap(buf) >= n {
		return buf[:cap(buf)]
	}
	n = max(n, 2*cap(buf))
	raw := make([]float32, n+15)
	off := 0
	if r := uintptr(unsafe.Pointer(&raw[0])) % 64; r != 0 {
		off = int(64-r) / 4
	}
	return raw[off : off+n : off+n]
}

// noProduct handles alpha == 0 or k == 0: C = beta·C plus the epilogue.
func noProduct(m, n int, beta float32, c []float32, ldc int, ep *Epilogue) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			var v float32
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
func check(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, ep *Epilogue) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("sgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	stored := func(name string, trans bool, rows, cols int, x []float32, ld int, read bool) {
		if trans {
			rows, cols = cols, rows
		}
		if ld < max(1, cols) {
			panic(fmt.Sprintf("sgemm: %s has leading dimension %d < %d", name, ld, max(1, cols)))
		}
		if read && rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("sgemm: %s has %d elements, want ≥ %d", name, len(x), (rows-1)*ld+cols))
		}
	}
	product := alpha != 0 && m > 0 && n > 0
	stored("A", tA, m, k, a, lda, product)
	stored("B", tB, k, n, b, ldb, product)
	stored("C", false, m, n, c, ldc, true)
	if ep.RowBias != nil && len(ep.RowBias) < m {
		panic(fmt.Sprintf("sgemm: RowBias has %d elements, want ≥ %d", len(ep.RowBias), m))
	}
	if ep.Mask != nil {
		stored("Mask", false, m, n, ep.Mask, ep.LdMask, true)
	}
}
