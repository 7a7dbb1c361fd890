package datasets

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mkbench/mkbench/internal/runfile"
)

// npArray is a numpy array as the .npy, .npz and pickle readers return it:
// element kind and size, shape, and the raw little-endian bytes in C order
// (or Fortran order when fortran is set). Object arrays (kind 'O', from
// pickles only) hold Python values instead of bytes.
type npArray struct {
	kind    byte // 'b' bool, 'i', 'u', 'f', 'S' bytes, 'U' UTF-32 text, 'O' object
	size    int  // bytes per element (for 'U', 4 per character)
	shape   []int
	fortran bool
	data    []byte
	objects []any
}

// dtype is the array's numpy type string, e.g. "<f4".
func (a *npArray) dtype() string {
	order := "<"
	if a.size == 1 || a.kind == 'S' || a.kind == 'O' {
		order = "|"
	}
	n := a.size
	if a.kind == 'U' {
		n /= 4
	}
	return fmt.Sprintf("%s%c%d", order, a.kind, n)
}

func (a *npArray) shapeString() string {
	parts := make([]string, len(a.shape))
	for i, d := range a.shape {
		parts[i] = strconv.Itoa(d)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// elements is the product of the shape, or -1 when it exceeds limit (the
// bytes available), so that no later computation overflows.
func elements(shape []int, limit int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d == 0 {
			n = 0
			continue
		}
		if n > limit/d {
			return -1
		}
		n *= d
	}
	if n > limit {
		return -1
	}
	return n
}

// at returns the C-order flat index of element (i, j) of a 2-D array.
func (a *npArray) at(i, j int) int {
	if a.fortran {
		return j*a.shape[0] + i
	}
	return i*a.shape[1] + j
}

// floatMatrix returns a 2-D float32 or float64 array as rows of float32
// (embeddings are float32; float64 input is rounded to it, an error far
// below what the features resolve).
func (a *npArray) floatMatrix(what string) (rows, cols int, out []float32, err error) {
	if len(a.shape) != 2 || (a.kind != 'f') || (a.size != 4 && a.size != 8) {
		return 0, 0, nil, fmt.Errorf("%s is a %s array of shape %s, want a 2-D float32 or float64 array (examples × features)", what, a.dtype(), a.shapeString())
	}
	rows, cols = a.shape[0], a.shape[1]
	out = make([]float32, rows*cols)
	le := binary.LittleEndian
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			k := a.at(i, j)
			var v float32
			if a.size == 4 {
				v = math.Float32frombits(le.Uint32(a.data[4*k:]))
			} else {
				v = float32(math.Float64frombits(le.Uint64(a.data[8*k:])))
			}
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, 0, nil, fmt.Errorf("%s row %d column %d is %v", what, i, j, v)
			}
			out[i*cols+j] = v
		}
	}
	return rows, cols, out, nil
}

// ints returns a 1-D integer array's values.
func (a *npArray) ints(what string) ([]int64, error) {
	if len(a.shape) != 1 || (a.kind != 'i' && a.kind != 'u') {
		return nil, fmt.Errorf("%s is a %s array of shape %s, want a 1-D integer array", what, a.dtype(), a.shapeString())
	}
	out := make([]int64, a.shape[0])
	le := binary.LittleEndian
	for i := range out {
		b := a.data[i*a.size:]
		switch {
		case a.kind == 'i' && a.size == 1:
			out[i] = int64(int8(b[0]))
		case a.kind == 'i' && a.size == 2:
			out[i] = int64(int16(le.Uint16(b)))
		case a.kind == 'i' && a.size == 4:
			out[i] = int64(int32(le.Uint32(b)))
		case a.kind == 'i' && a.size == 8:
			out[i] = int64(le.Uint64(b))
		case a.size == 1:
			out[i] = int64(b[0])
		case a.size == 2:
			out[i] = int64(le.Uint16(b))
		case a.size == 4:
			out[i] = int64(le.Uint32(b))
		default:
			v := le.Uint64(b)
			if v > math.MaxInt64 {
				return nil, fmt.Errorf("%s[%d] = %d is out of range", what, i, v)
			}
			out[i] = int64(v)
		}
	}
	return out, nil
}

// labels returns a 1-D array of class labels as text: integers in decimal,
// byte strings and text with numpy's trailing NUL padding removed, object
// arrays of str, bytes or int.
func (a *npArray) labels(what string) ([]string, error) {
	if len(a.shape) != 1 {
		return nil, fmt.Errorf("%s has shape %s, want a 1-D array of labels", what, a.shapeString())
	}
	n := a.shape[0]
	out := make([]string, n)
	switch a.kind {
	case 'i', 'u':
		v, err := a.ints(what)
		if err != nil {
			return nil, err
		}
		for i, x := range v {
			out[i] = strconv.FormatInt(x, 10)
		}
	case 'S':
		for i := range out {
			out[i] = strings.TrimRight(string(a.data[i*a.size:(i+1)*a.size]), "\x00")
		}
	case 'U':
		for i := range out {
			var sb strings.Builder
			for k := 0; k < a.size; k += 4 {
				r := rune(binary.LittleEndian.Uint32(a.data[i*a.size+k:]))
				if r == 0 {
					break
				}
				if !utf8.ValidRune(r) {
					return nil, fmt.Errorf("%s[%d] holds the invalid character %#x", what, i, r)
				}
				sb.WriteRune(r)
			}
			out[i] = sb.String()
		}
	case 'O':
		for i, o := range a.objects {
			s, ok := pyText(o)
			if !ok {
				x, isInt := o.(int64)
				if !isInt {
					return nil, fmt.Errorf("%s[%d] is a %s, want text or an integer", what, i, pyTypeName(o))
				}
				s = strconv.FormatInt(x, 10)
			}
			out[i] = s
		}
	default:
		return nil, fmt.Errorf("%s is a %s array, want integer or text labels", what, a.dtype())
	}
	for i, s := range out {
		if s == "" {
			return nil, fmt.Errorf("%s[%d] is empty", what, i)
		}
	}
	return out, nil
}

// parseDescr reads a numpy type string as .npy headers and pickled dtypes
// write it ("<f4", "|u1", "<U10", "S41"). Only little-endian (or
// byte-order-free) numeric, bool and string types are accepted:
// big-endian and structured data never occur in the data sets read here,
// and refusing them keeps the readers small.
func parseDescr(d string) (kind byte, size int, err error) {
	body := d
	if len(body) > 0 && strings.IndexByte("<|=>", body[0]) >= 0 {
		if body[0] == '>' {
			return 0, 0, fmt.Errorf("type %q is big-endian, which is not supported", d)
		}
		body = body[1:]
	}
	if body == "O" {
		return 'O', 8, nil // numpy writes object arrays as '|O'
	}
	if len(body) < 2 || strings.IndexByte("biufSUO", body[0]) < 0 {
		return 0, 0, fmt.Errorf("type %q is not a plain numeric, bool or string type", d)
	}
	n, err := strconv.Atoi(body[1:])
	if err != nil || n <= 0 || n > 1<<20 || body[1] == '+' {
		return 0, 0, fmt.Errorf("type %q has no valid size", d)
	}
	kind = body[0]
	switch kind {
	case 'b':
		if n != 1 {
			return 0, 0, fmt.Errorf("type %q: bools are one byte", d)
		}
	case 'i', 'u':
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return 0, 0, fmt.Errorf("type %q: integers are 1, 2, 4 or 8 bytes", d)
		}
	case 'f':
		if n != 4 && n != 8 {
			return 0, 0, fmt.Errorf("type %q: only float32 and float64 are supported", d)
		}
	case 'U':
		n *= 4
	case 'O':
		if n != 8 && n != 4 {
			return 0, 0, fmt.Errorf("type %q: object pointers are 4 or 8 bytes", d)
		}
	}
	return kind, n, nil
}

const npyMagic = "\x93NUMPY"

// parseNpy reads one .npy file (format versions 1.0, 2.0 and 3.0): the
// magic, the version, the header length (2 bytes in v1, 4 after), the
// header — a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape' — and exactly the data it describes. The
// data are not copied.
func parseNpy(data []byte) (*npArray, error) {
	if len(data) < 10 || string(data[:6]) != npyMagic {
		return nil, fmt.Errorf("not a .npy file (no \\x93NUMPY magic)")
	}
	major, minor := data[6], data[7]
	var hlen, off int
	switch {
	case major == 1 && minor == 0:
		hlen, off = int(binary.LittleEndian.Uint16(data[8:])), 10
	case (major == 2 || major == 3) && minor == 0:
		if len(data) < 12 {
			return nil, fmt.Errorf("truncated .npy header")
		}
		h := binary.LittleEndian.Uint32(data[8:])
		if uint64(h) > uint64(len(data)) {
			return nil, fmt.Errorf("header length %d exceeds the file", h)
		}
		hlen, off = int(h), 12
	default:
		return nil, fmt.Errorf(".npy format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if off+hlen > len(data) {
		return nil, fmt.Errorf("header length %d exceeds the file", hlen)
	}
	header := string(data[off : off+hlen])
	if major < 3 {
		for i := 0; i < len(header); i++ {
			if header[i] >= 0x80 {
				return nil, fmt.Errorf("header is not ASCII")
			}
		}
	} else if !utf8.ValidString(header) {
		return nil, fmt.Errorf("header is not UTF-8")
	}
	descr, fortran, shape, err := parseNpyHeader(header)
	if err != nil {
		return nil, err
	}
	kind, size, err := parseDescr(descr)
	if err != nil {
		return nil, err
	}
	if kind == 'O' {
		return nil, fmt.Errorf("object arrays (type %q) need Python to read; save the array with a numeric or string type", descr)
	}
	body := data[off+hlen:]
	n := elements(shape, len(body)/size)
	if n < 0 || n*size != len(body) {
		return nil, fmt.Errorf("shape %v of %s needs %s bytes of data, the file has %d", shape, descr, dataBytes(shape, size), len(body))
	}
	return &npArray{kind: kind, size: size, shape: shape, fortran: fortran && len(shape) > 1, data: body}, nil
}

// dataBytes formats the byte count of a shape for a message, saturating
// instead of overflowing.
func dataBytes(shape []int, size int) string {
	n := float64(size)
	for _, d := range shape {
		n *= float64(d)
	}
	if n < 1e15 {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	return strconv.FormatFloat(n, 'g', 4, 64)
}

// parseNpyHeader reads the header dict, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (38400, 640), }
// followed by padding spaces and a newline. Python 2 wrote long integers
// with an L suffix ((3L, 4L)), which is accepted.
func parseNpyHeader(h string) (descr string, fortran bool, shape []int, err error) {
	p := &litParser{s: strings.TrimRight(h, " \n")}
	if !strings.HasSuffix(h, "\n") {
		return "", false, nil, fmt.Errorf("header does not end in a newline")
	}
	bad := func(why string) error {
		s := h
		if len(s) > 120 {
			s = s[:120] + "…"
		}
		return fmt.Errorf("malformed .npy header %q: %s", s, why)
	}
	if !p.eat('{') {
		return "", false, nil, bad("want a dict")
	}
	seen := map[string]bool{}
	for !p.eat('}') {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return "", false, nil, bad("want 'key': value")
		}
		if seen[key] {
			return "", false, nil, bad("key " + key + " twice")
		}
		seen[key] = true
		switch key {
		case "descr":
			if descr, ok = p.str(); !ok {
				return "", false, nil, bad("descr must be a type string (structured types are not supported)")
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				fortran = true
			case p.word("False"):
			default:
				return "", false, nil, bad("fortran_order must be True or False")
			}
		case "shape":
			if shape, ok = p.intTuple(); !ok {
				return "", false, nil, bad("shape must be a tuple of non-negative integers")
			}
		default:
			return "", false, nil, bad("unexpected key " + key)
		}
		if !p.eat(',') {
			if !p.eat('}') {
				return "", false, nil, bad("want , or }")
			}
			break
		}
	}
	p.space()
	if p.i != len(p.s) {
		return "", false, nil, bad("text after the dict")
	}
	if len(seen) != 3 {
		return "", false, nil, bad("want the keys descr, fortran_order and shape")
	}
	return descr, fortran, shape, nil
}

// litParser reads the few Python literals .npy headers use.
type litParser struct {
	s string
	i int
}

func (p *litParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *litParser) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *litParser) word(w string) bool {
	p.space()
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes (numpy never writes any).
func (p *litParser) str() (string, bool) {
	p.space()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsAny(v, "\\\n") {
		return "", false
	}
	p.i += end + 2
	return v, true
}

// intTuple reads (), (n,) or (n, m, ...), at most 32 dimensions (numpy's
// limit).
func (p *litParser) intTuple() ([]int, bool) {
	if !p.eat('(') {
		return nil, false
	}
	shape := []int{}
	comma := false
	for {
		if p.eat(')') {
			// (n) without a comma is an int in Python, not a tuple.
			return shape, len(shape) != 1 || comma
		}
		if (len(shape) > 0 && !comma) || len(shape) == 32 {
			return nil, false
		}
		p.space()
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if j == p.i || p.i-j > 12 {
			return nil, false
		}
		n, _ := strconv.Atoi(p.s[j:p.i])
		if p.i < len(p.s) && p.s[p.i] == 'L' {
			p.i++
		}
		shape = append(shape, n)
		comma = p.eat(',')
	}
}

// readNpz reads every array of an .npz archive (a zip of name.npy entries,
// stored or deflated, as numpy.savez and savez_compressed write it).
// Entries are bounded by their declared sizes, checked against the bytes
// actually inflated, and together by limit: entries of a hostile zip can
// all point at one small deflate stream that inflates to the limit each.
func readNpz(zr *zip.Reader, limit int64) (map[string]*npArray, []string, error) {
	arrays := map[string]*npArray{}
	var names []string
	if len(zr.File) > maxNpzArrays {
		return nil, nil, fmt.Errorf("%d entries, more than the %d arrays an embedding file needs", len(zr.File), maxNpzArrays)
	}
	var total uint64
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") || zipLitter(f.Name) {
			continue
		}
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("entry %q is not a .npy array", f.Name)
		}
		if _, dup := arrays[name]; dup {
			return nil, nil, fmt.Errorf("entry %q appears twice", f.Name)
		}
		if total += f.UncompressedSize64; f.UncompressedSize64 > uint64(limit) || total > uint64(limit) {
			return nil, nil, fmt.Errorf("entry %q claims %d bytes, more than the %d allowed in all", f.Name, f.UncompressedSize64, limit)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)+1))
		rc.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", f.Name, err)
		}
		if uint64(len(data)) != f.UncompressedSize64 {
			return nil, nil, fmt.Errorf("entry %q holds %d bytes, its header says %d", f.Name, len(data), f.UncompressedSize64)
		}
		a, err := parseNpy(data)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", f.Name, err)
		}
		arrays[name] = a
		names = append(names, name)
	}
	sort.Strings(names)
	return arrays, names, nil
}

// readNpzFile opens and reads an .npz file; errors name it.
func readNpzFile(path string) (map[string]*npArray, []string, error) {
	f, err := runfile.OpenRegular(path)
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: %w", err)
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: %s is not an .npz archive (a zip of .npy files): %w", path, err)
	}
	arrays, names, err := readNpz(zr, maxArrayBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: %s: %w", path, err)
	}
	return arrays, names, nil
}

// maxNpzArrays bounds the entries of an .npz archive.
const maxNpzArrays = 1024

// maxArrayBytes bounds one array read from disk (16 GB, far above the
// 100 MB of miniImageNet's WRN features), so a corrupt size cannot make a
// reader allocate without limit.
const maxArrayBytes = 16 << 30

// readNpyFile reads one .npy file; errors name it.
func readNpyFile(path string) (*npArray, error) {
	data, err := readFileAtMost(path, maxArrayBytes)
	if err != nil {
		return nil, err
	}
	a, err := parseNpy(data)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", path, err)
	}
	return a, nil
}
