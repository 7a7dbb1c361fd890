package gemmcore

import (
	"fmt"
	"unsafe"
)

// Float is an element type of the products.
type Float interface{ ~float32 | ~float64 }

// Blocking parameters. A register tile is at most tileRows×cols[T]()
// (maxRows×cols[T]() for full panels of a kernel set with more Rows);
// kcMax bounds the depth of one pass so that a full panel of B (kcMax rows
// of 64 bytes = 16 KiB) stays in L1 while the row tiles stream past it, and
// mcMax rows of A (read in place, never packed) bound the block kept in L2
// meanwhile. The engine's products (every dimension ≤ 128) fit one block in
// every direction.
const (
	tileRows = 6
	// maxRows bounds Kernels.Rows: the workspace tile holds that many.
	maxRows = 12
	kcMax   = 256
	mcMax   = 144
	ncMax   = 512
	// maxCols sizes the arrays that hold a tile: the widest tile, of
	// float32. A float64 tile uses the first half of each row's slots.
	maxCols = 16
)

// cols returns the width of a full column panel: one cache line of
// elements. unsafe.Sizeof of the shape type folds to a constant in each
// instantiation, and so does this.
func cols[T Float]() int {
	var z T
	return 64 / int(unsafe.Sizeof(z))
}

// Flags telling a micro-kernel which parts of the epilogue to run.
const (
	FlagBeta  = 1 << iota // C is read: acc += beta·C
	FlagAlpha             // acc *= alpha (skipped when alpha == 1)
	FlagBias              // acc += bias[row]
	FlagReLU              // acc = max(acc, 0), NaN and -0 kept
	FlagMask              // acc = 0 where !(mask > 0)
)

// Kernel computes nt register tiles of one column panel: tile t has base+1
// rows if t < extra, else base (1…6), and starts at the row after the
// previous tile's in A, C, bias and mask. A tile with rows rows and a full
// or half panel of columns (fixed per function) is acc[i][j] = Σ_p A(p, i)·
// B[p][j] over kc ≥ 1 steps, where A(p, i) is at a + p·sa + i·ra for the
// first tile and row p of B starts at b + p·sb. ra = 1 reads a stored Aᵀ,
// sa = 1 a stored A, so A is read in place either way. The kernel then
// applies the epilogue selected by flags in the order alpha, beta, bias,
// ReLU, mask, and stores the tile at c (row stride ldc). Strides are in
// elements.
type Kernel[T Float] func(nt, base, extra, kc int, a *T, sa, ra int, b *T, sb int, c *T, ldc int, alpha, beta T, flags int, bias, mask *T, ldm int)

// Kernels is the set of micro-kernels a product runs with.
type Kernels[T Float] struct {
	// Full computes full panels (one cache line of columns), Half panels
	// of half that width.
	Full, Half Kernel[T]
	// Transpose8, if not nil, packs a transposed B with 8×8 transposes:
	// for each of nblk blocks of 8 columns of src, rows×8 elements go to
	// dst transposed (row stride ldd). Otherwise the packer copies eight
	// rows side by side.
	Transpose8 func(dst *T, ldd int, src *T, lds, rows, nblk int)
	// Rows, if not 0, is the most rows of a Full kernel's tile (at most
	// maxRows, and mcMax a multiple of it); Half kernels and sets with 0
	// take tileRows.
	Rows int
}

// GoKernels are the portable micro-kernels (see kernel_go.go).
func GoKernels[T Float]() Kernels[T] {
	return Kernels[T]{Full: kernGoFull[T], Half: kernGoHalf[T]}
}

// Epilogue is work fused into the store of a product (sgemm.Epilogue and
// dgemm.Epilogue are this type). For every element
// v = alpha·(op(A)·op(B))[i][j] + beta·C[i][j] of the result, applied in
// this order:
//
//	v += RowBias[i]          if RowBias != nil (len ≥ m)
//	v = max(v, 0)            if ReLU (NaN and -0 pass through unchanged)
//	v = 0 unless Mask > 0    if Mask != nil, with Mask[i*LdMask+j]
type Epilogue[T Float] struct {
	RowBias []T
	ReLU    bool
	Mask    []T
	LdMask  int
}

// Workspace holds the packing buffers of a product; see sgemm.Workspace.
type Workspace[T Float] struct {
	pb    []T
	tile  [maxRows * maxCols]T
	tmask [maxRows * maxCols]T
}

// GemmEpilogue computes C = alpha·op(A)·op(B) + beta·C followed by the
// epilogue ep, with the kernels ks; see sgemm.Workspace.GemmEpilogue.
func (w *Workspace[T]) GemmEpilogue(ks *Kernels[T], tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, ep *Epilogue[T]) {
	check(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc, ep)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		noProduct(m, n, beta, c, ldc, ep)
		return
	}
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
			flags |= FlagBeta
		}
		if alpha != 1 {
			flags |= FlagAlpha
		}
		if pc+kc == k {
			if ep.RowBias != nil {
				flags |= FlagBias
			}
			if ep.ReLU {
				flags |= FlagReLU
			}
			if ep.Mask != nil {
				flags |= FlagMask
			}
		}
		for jc := 0; jc < n; jc += ncMax {
			nc := min(ncMax, n-jc)
			w.packB(ks, tB, b, ldb, pc, kc, jc, nc)
			for ic := 0; ic < m; ic += mcMax {
				mc := min(mcMax, m-ic)
				w.block(ks, tA, tB, a, lda, b, ldb, c, ldc, ep, alpha, bet, flags, ic, mc, pc, kc, jc, nc)
			}
		}
	}
}

// panel returns the width (full or half) and the number of valid columns
// of the column panel that starts rem columns before the end of a block.
func panel[T Float](rem int) (width, valid int) {
	width = cols[T]()
	if rem <= cols[T]()/2 {
		width = cols[T]() / 2
	}
	return width, min(rem, width)
}

// tiles splits mc rows into the fewest tiles of at most rows rows, as
// evenly as possible: tile t has base+1 rows if t < extra, else base. Even
// tiles keep every tile near the most rows (M = 20 → 5+5+5+5 rather than
// 6+6+6+2 for 6), so that each keeps many independent accumulators busy.
func tiles(mc, rows int) (nt, base, extra int) {
	nt = (mc + rows - 1) / rows
	return nt, mc / nt, mc % nt
}

// block multiplies one mc×kc block of op(A) by one kc×nc block of op(B).
// Column panels are the outer loop so that a panel of B stays in L1 while
// the kernel runs down the row tiles.
func (w *Workspace[T]) block(ks *Kernels[T], tA, tB bool, a []T, lda int, b []T, ldb int, c []T, ldc int, ep *Epilogue[T], alpha, beta T, flags, ic, mc, pc, kc, jc, nc int) {
	var tl [2][3]int // the tiles of full and half panels
	tl[1][0], tl[1][1], tl[1][2] = tiles(mc, tileRows)
	tl[0] = tl[1]
	if ks.Rows != 0 {
		tl[0][0], tl[0][1], tl[0][2] = tiles(mc, ks.Rows)
	}
	var ap *T
	sa, ra := lda, 1
	if tA {
		ap = &a[pc*lda+ic]
	} else {
		ap, sa, ra = &a[ic*lda+pc], 1, lda
	}
	var bias *T
	if flags&FlagBias != 0 {
		bias = &ep.RowBias[ic]
	}
	for j0 := 0; j0 < nc; {
		width, valid := panel[T](nc - j0)
		var bp *T
		sb := width
		if !tB && valid == width {
			bp, sb = &b[pc*ldb+jc+j0], ldb
		} else {
			bp = &w.pb[j0*kc]
		}
		kern, half := ks.Full, 0
		if width != cols[T]() {
			kern, half = ks.Half, 1
		}
		nt, base, extra := tl[half][0], tl[half][1], tl[half][2]
		if valid == width {
			var mask *T
			if flags&FlagMask != 0 {
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
				var tbias *T
				if bias != nil {
					tbias = &ep.RowBias[i]
				}
				var tap *T
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
func (w *Workspace[T]) edgeTile(kern Kernel[T], rows, kc int, ap *T, sa, ra int, bp *T, sb int, c []T, ldc, valid int, alpha, beta T, flags int, bias *T, ep *Epilogue[T], i, j int) {
	tc := cols[T]()
	t := &w.tile
	if flags&FlagBeta != 0 {
		for r := 0; r < rows; r++ {
			copy(t[r*tc:r*tc+valid], c[r*ldc:r*ldc+valid])
		}
	}
	var mask *T
	if flags&FlagMask != 0 {
		tm := &w.tmask
		clear(tm[:])
		for r := 0; r < rows; r++ {
			o := (i+r)*ep.LdMask + j
			copy(tm[r*tc:r*tc+valid], ep.Mask[o:o+valid])
		}
		mask = &tm[0]
	}
	kern(1, rows, 0, kc, ap, sa, ra, bp, sb, &t[0], tc, alpha, beta, flags, bias, mask, tc)
	for r := 0; r < rows; r++ {
		copy(c[r*ldc:r*ldc+valid], t[r*tc:r*tc+valid])
	}
}

// packB copies the column panels of a kc×nc block of op(B) that the kernels
// cannot read in place (all of them if B is stored transposed, otherwise
// only a last, partial panel) into zero-padded full or half panels.
func (w *Workspace[T]) packB(ks *Kernels[T], tB bool, b []T, ldb, pc, kc, jc, nc int) {
	if !tB && nc%(cols[T]()/2) == 0 {
		return
	}
	// Panels are laid out at j0·kc; the widths add up to less than nc
	// plus a full panel.
	w.pb = grow(w.pb, (nc+cols[T]())*kc)
	for j0 := 0; j0 < nc; {
		width, valid := panel[T](nc - j0)
		if tB || valid < width {
			dst := w.pb[j0*kc : (j0+width)*kc]
			if tB {
				packBT(ks, dst, b, ldb, pc, kc, jc+j0, width, valid)
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
func packBT[T Float](ks *Kernels[T], dst, b []T, ldb, pc, kc, j, width, valid int) {
	for c0 := 0; c0 < valid; c0 += 8 {
		src := b[(j+c0)*ldb+pc:]
		n := min(8, valid-c0)
		p0 := 0
		if ks.Transpose8 != nil && n == 8 && kc >= 8 {
			nb := kc / 8
			ks.Transpose8(&dst[c0], width, &src[0], ldb, 8, nb)
			p0 = 8 * nb
		} else if n == 8 && width >= c0+8 {
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

// grow returns a buffer of at least n elements whose first element is
// 64-byte aligned (a cache line: a full row of a packed panel then never
// straddles two), reusing buf when it is large enough.
func grow[T Float](buf []T, n int) []T {
	if cap(buf) >= n {
		return buf[:cap(buf)]
	}
	n = max(n, 2*cap(buf))
	size := 64 / cols[T]()
	raw := make([]T, n+cols[T]()-1)
	off := 0
	if r := uintptr(unsafe.Pointer(&raw[0])) % 64; r != 0 {
		off = int(64-r) / size
	}
	return raw[off : off+n : off+n]
}

// noProduct handles alpha == 0 or k == 0: C = beta·C plus the epilogue.
func noProduct[T Float](m, n int, beta T, c []T, ldc int, ep *Epilogue[T]) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			var v T
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
// message of the first problem found, prefixed by the name of the package
// that owns the element type.
func check[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, c []T, ldc int, ep *Epilogue[T]) {
	pkg := "dgemm"
	if cols[T]() == 16 {
		pkg = "sgemm"
	}
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("%s: negative size m=%d n=%d k=%d", pkg, m, n, k))
	}
	stored := func(name string, trans bool, rows, cols int, x []T, ld int, read bool) {
		if trans {
			rows, cols = cols, rows
		}
		if ld < max(1, cols) {
			panic(fmt.Sprintf("%s: %s has leading dimension %d < %d", pkg, name, ld, max(1, cols)))
		}
		if read && rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("%s: %s has %d elements, want ≥ %d", pkg, name, len(x), (rows-1)*ld+cols))
		}
	}
	product := alpha != 0 && m > 0 && n > 0
	stored("A", tA, m, k, a, lda, product)
	stored("B", tB, k, n, b, ldb, product)
	stored("C", false, m, n, c, ldc, true)
	if ep.RowBias != nil && len(ep.RowBias) < m {
		panic(fmt.Sprintf("%s: RowBias has %d elements, want ≥ %d", pkg, len(ep.RowBias), m))
	}
	if ep.Mask != nil {
		stored("Mask", false, m, n, ep.Mask, ep.LdMask, true)
	}
}
