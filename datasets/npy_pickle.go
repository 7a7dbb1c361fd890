package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// A minimal, strict reader for the Python pickles the few-shot data sets
// are distributed as: CIFAR-100's python version (a dict of a uint8 numpy
// array, lists of ints and lists of names, written by Python 2's cPickle
// with protocol 2) and LEO's embedding files (a dict of numpy arrays).
// Unpickling in Python runs arbitrary code; this reader runs none. It
// knows the opcodes of protocols 2 to 5 that dicts, lists, tuples,
// strings, numbers and numpy arrays need, and a fixed list of callables
// (numpy's array and dtype reconstructors, _codecs.encode, OrderedDict),
// each of which builds a value. Anything else is an error naming the
// opcode and its offset. Python 2 str values are read as bytes
// (pyBytes), as pickle.load(f, encoding="bytes") would; where text is
// expected either kind is accepted.
//
// Values: nil (None), bool, int64, float64, pyStr, pyBytes, pyTuple,
// *pyList, *pyDict, *npArray, *npDtype, pyGlobal.

type (
	pyStr   string // Python 3 str, Python 2 unicode
	pyBytes string // Python 3 bytes, Python 2 str
	pyTuple []any
	pyList  struct{ items []any }
	pyDict  struct {
		keys, vals []any
		idx        map[any]int
	}
	// pyGlobal is a callable or class named by a GLOBAL opcode; only
	// those in pickleGlobals are accepted.
	pyGlobal struct{ module, name string }
	pyMark   struct{}
)

// npDtype is a numpy dtype under construction: dtype(descr) gives the kind,
// BUILD the byte order and, for strings, the size.
type npDtype struct {
	kind  byte
	size  int
	order byte // '<', '|' (or '>' which is refused), 0 before BUILD
}

// pickleGlobals are the callables a pickle may name, keyed by "module.name";
// numpy 2 moved numpy.core to numpy._core, and files from both exist.
var pickleGlobals = map[string]string{
	"numpy.core.multiarray._reconstruct":  "reconstruct",
	"numpy._core.multiarray._reconstruct": "reconstruct",
	"numpy.ndarray":                       "ndarray",
	"numpy.dtype":                         "dtype",
	"numpy.core.numeric._frombuffer":      "frombuffer",
	"numpy._core.numeric._frombuffer":     "frombuffer",
	"numpy.core.multiarray.scalar":        "scalar",
	"numpy._core.multiarray.scalar":       "scalar",
	"_codecs.encode":                      "encode",
	"collections.OrderedDict":             "ordereddict",
}

func (d *pyDict) get(key string) (any, bool) {
	for i, k := range d.keys {
		if s, ok := pyText(k); ok && s == key {
			return d.vals[i], true
		}
	}
	return nil, false
}

func (d *pyDict) keyNames() []string {
	var out []string
	for _, k := range d.keys {
		if s, ok := pyText(k); ok {
			out = append(out, s)
		} else {
			out = append(out, fmt.Sprint(k))
		}
	}
	return out
}

// pyText returns a str or bytes value as a Go string.
func pyText(v any) (string, bool) {
	switch s := v.(type) {
	case pyStr:
		return string(s), true
	case pyBytes:
		return string(s), true
	}
	return "", false
}

// pyTypeName names a value's Python type for messages.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case pyStr:
		return "str"
	case pyBytes:
		return "bytes"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	case *npArray:
		return "numpy array"
	case *npDtype:
		return "numpy dtype"
	case pyGlobal:
		return "global"
	}
	return fmt.Sprintf("%T", v)
}

// pickleOp names opcodes in messages.
var pickleOpNames = map[byte]string{
	0x80: "PROTO", 0x95: "FRAME", '.': "STOP", '}': "EMPTY_DICT", ']': "EMPTY_LIST",
	')': "EMPTY_TUPLE", '(': "MARK", 't': "TUPLE", 0x85: "TUPLE1", 0x86: "TUPLE2",
	0x87: "TUPLE3", 'l': "LIST", 'd': "DICT", 'a': "APPEND", 'e': "APPENDS",
	's': "SETITEM", 'u': "SETITEMS", 'q': "BINPUT", 'r': "LONG_BINPUT", 0x94: "MEMOIZE",
	'h': "BINGET", 'j': "LONG_BINGET", 'J': "BININT", 'K': "BININT1", 'M': "BININT2",
	0x8a: "LONG1", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 'N': "NONE", 'G': "BINFLOAT",
	'U': "SHORT_BINSTRING", 'T': "BINSTRING", 'X': "BINUNICODE", 0x8c: "SHORT_BINUNICODE",
	0x8d: "BINUNICODE8", 'B': "BINBYTES", 'C': "SHORT_BINBYTES", 0x8e: "BINBYTES8",
	0x96: "BYTEARRAY8", 'c': "GLOBAL", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD",
	'0': "POP", '1': "POP_MARK", '2': "DUP",
}

type unpickler struct {
	data  []byte
	pos   int
	op    int // offset of the opcode being run, for messages
	stack []any
	marks []int
	memo  map[uint64]any
}

// parsePickle runs the pickle in data and returns its value. Strings and
// array data alias data.
func parsePickle(data []byte) (v any, err error) {
	u := &unpickler{data: data, memo: map[uint64]any{}}
	for {
		if u.pos >= len(data) {
			return nil, fmt.Errorf("pickle ends without STOP")
		}
		u.op = u.pos
		op := data[u.pos]
		u.pos++
		done, err := u.step(op)
		if err != nil {
			name := pickleOpNames[op]
			if name == "" {
				name = "unknown opcode"
			}
			return nil, fmt.Errorf("pickle byte %d (%s 0x%02x): %w", u.op, name, op, err)
		}
		if done {
			if len(u.stack) != 1 || len(u.marks) != 0 {
				return nil, fmt.Errorf("pickle byte %d: STOP with %d values and %d marks on the stack", u.op, len(u.stack), len(u.marks))
			}
			if _, ok := u.stack[0].(pyMark); ok {
				return nil, fmt.Errorf("pickle byte %d: STOP on a mark", u.op)
			}
			return u.stack[0], nil
		}
	}
}

func (u *unpickler) take(n uint64) ([]byte, error) {
	if n > uint64(len(u.data)-u.pos) {
		return nil, fmt.Errorf("wants %d bytes, %d left", n, len(u.data)-u.pos)
	}
	b := u.data[u.pos : u.pos+int(n)]
	u.pos += int(n)
	return b, nil
}

func (u *unpickler) uint(n int) (uint64, error) {
	b, err := u.take(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (any, error) {
	floor := 0
	if len(u.marks) > 0 {
		floor = u.marks[len(u.marks)-1]
	}
	if len(u.stack) <= floor {
		return nil, fmt.Errorf("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	v, err := u.pop()
	if err == nil {
		u.push(v)
	}
	return v, err
}

// popMark returns the values above the last mark and removes them and the
// mark.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, fmt.Errorf("no mark")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

// lenString reads a length-prefixed byte string.
func (u *unpickler) lenString(n int, signed bool) ([]byte, error) {
	l, err := u.uint(n)
	if err != nil {
		return nil, err
	}
	if signed && n == 4 && l >= 1<<31 {
		return nil, fmt.Errorf("negative length")
	}
	return u.take(l)
}

func (u *unpickler) text(n int) (pyStr, error) {
	b, err := u.lenString(n, false)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("string is not UTF-8")
	}
	return pyStr(b), nil
}

func (u *unpickler) step(op byte) (bool, error) {
	switch op {
	case 0x80: // PROTO
		b, err := u.take(1)
		if err != nil {
			return false, err
		}
		if b[0] < 2 || b[0] > 5 {
			return false, fmt.Errorf("protocol %d is not supported (want 2 to 5)", b[0])
		}
	case 0x95: // FRAME: a length hint; the frame's contents follow inline
		if _, err := u.uint(8); err != nil {
			return false, err
		}
	case '.':
		return true, nil
	case '}':
		u.push(&pyDict{})
	case ']':
		u.push(&pyList{})
	case ')':
		u.push(pyTuple{})
	case '(':
		if len(u.marks) >= 1<<16 {
			return false, fmt.Errorf("too many marks")
		}
		u.marks = append(u.marks, len(u.stack))
	case 't':
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		u.push(pyTuple(items))
	case 0x85, 0x86, 0x87:
		n := int(op - 0x84)
		items := make(pyTuple, n)
		for i := n - 1; i >= 0; i-- {
			v, err := u.pop()
			if err != nil {
				return false, err
			}
			items[i] = v
		}
		u.push(items)
	case 'l':
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		u.push(&pyList{items: items})
	case 'd':
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		d := &pyDict{}
		if err := d.setItems(items); err != nil {
			return false, err
		}
		u.push(d)
	case 'a':
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		l, err := u.top()
		if err != nil {
			return false, err
		}
		list, ok := l.(*pyList)
		if !ok {
			return false, fmt.Errorf("append to a %s", pyTypeName(l))
		}
		list.items = append(list.items, v)
	case 'e':
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		l, err := u.top()
		if err != nil {
			return false, err
		}
		list, ok := l.(*pyList)
		if !ok {
			return false, fmt.Errorf("append to a %s", pyTypeName(l))
		}
		list.items = append(list.items, items...)
	case 's':
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		k, err := u.pop()
		if err != nil {
			return false, err
		}
		d, err := u.dictOnTop()
		if err != nil {
			return false, err
		}
		if err := d.setItems([]any{k, v}); err != nil {
			return false, err
		}
	case 'u':
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		d, err := u.dictOnTop()
		if err != nil {
			return false, err
		}
		if err := d.setItems(items); err != nil {
			return false, err
		}
	case 'q', 'r', 0x94:
		var idx uint64
		var err error
		switch op {
		case 'q':
			idx, err = u.uint(1)
		case 'r':
			idx, err = u.uint(4)
		default:
			idx = uint64(len(u.memo))
		}
		if err != nil {
			return false, err
		}
		v, err := u.top()
		if err != nil {
			return false, err
		}
		u.memo[idx] = v
	case 'h', 'j':
		n := 1
		if op == 'j' {
			n = 4
		}
		idx, err := u.uint(n)
		if err != nil {
			return false, err
		}
		v, ok := u.memo[idx]
		if !ok {
			return false, fmt.Errorf("memo %d was never stored", idx)
		}
		u.push(v)
	case 'J':
		v, err := u.uint(4)
		if err != nil {
			return false, err
		}
		u.push(int64(int32(uint32(v))))
	case 'K':
		v, err := u.uint(1)
		if err != nil {
			return false, err
		}
		u.push(int64(v))
	case 'M':
		v, err := u.uint(2)
		if err != nil {
			return false, err
		}
		u.push(int64(v))
	case 0x8a: // LONG1: little-endian two's complement of n ≤ 8 bytes
		b, err := u.lenString(1, false)
		if err != nil {
			return false, err
		}
		if len(b) > 8 {
			return false, fmt.Errorf("integer of %d bytes is out of range", len(b))
		}
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if n := len(b); n > 0 && n < 8 && b[n-1]&0x80 != 0 {
			v -= 1 << (8 * n)
		}
		u.push(int64(v))
	case 0x88:
		u.push(true)
	case 0x89:
		u.push(false)
	case 'N':
		u.push(nil)
	case 'G':
		b, err := u.take(8)
		if err != nil {
			return false, err
		}
		u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case 'U', 'C':
		b, err := u.lenString(1, false)
		if err != nil {
			return false, err
		}
		u.push(pyBytes(b))
	case 'T':
		b, err := u.lenString(4, true)
		if err != nil {
			return false, err
		}
		u.push(pyBytes(b))
	case 'B':
		b, err := u.lenString(4, false)
		if err != nil {
			return false, err
		}
		u.push(pyBytes(b))
	case 0x8e, 0x96:
		b, err := u.lenString(8, false)
		if err != nil {
			return false, err
		}
		u.push(pyBytes(b))
	case 'X', 0x8c, 0x8d:
		n := map[byte]int{'X': 4, 0x8c: 1, 0x8d: 8}[op]
		s, err := u.text(n)
		if err != nil {
			return false, err
		}
		u.push(s)
	case 'c':
		module, err := u.line()
		if err != nil {
			return false, err
		}
		name, err := u.line()
		if err != nil {
			return false, err
		}
		g, err := lookupGlobal(module, name)
		if err != nil {
			return false, err
		}
		u.push(g)
	case 0x93:
		nv, err := u.pop()
		if err != nil {
			return false, err
		}
		mv, err := u.pop()
		if err != nil {
			return false, err
		}
		module, ok1 := mv.(pyStr)
		name, ok2 := nv.(pyStr)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("STACK_GLOBAL of a %s and a %s", pyTypeName(mv), pyTypeName(nv))
		}
		g, err := lookupGlobal(string(module), string(name))
		if err != nil {
			return false, err
		}
		u.push(g)
	case 'R':
		args, err := u.pop()
		if err != nil {
			return false, err
		}
		f, err := u.pop()
		if err != nil {
			return false, err
		}
		g, ok := f.(pyGlobal)
		if !ok {
			return false, fmt.Errorf("call of a %s", pyTypeName(f))
		}
		a, ok := args.(pyTuple)
		if !ok {
			return false, fmt.Errorf("call with %s arguments", pyTypeName(args))
		}
		v, err := callGlobal(g, a)
		if err != nil {
			return false, err
		}
		u.push(v)
	case 'b':
		state, err := u.pop()
		if err != nil {
			return false, err
		}
		obj, err := u.top()
		if err != nil {
			return false, err
		}
		if err := build(obj, state); err != nil {
			return false, err
		}
	case '0':
		if len(u.marks) > 0 && len(u.stack) == u.marks[len(u.marks)-1] {
			u.marks = u.marks[:len(u.marks)-1] // POP of a mark, as CPython does
		} else if _, err := u.pop(); err != nil {
			return false, err
		}
	case '1':
		if _, err := u.popMark(); err != nil {
			return false, err
		}
	case '2':
		v, err := u.top()
		if err != nil {
			return false, err
		}
		u.push(v)
	default:
		return false, fmt.Errorf("opcode not supported by this reader")
	}
	return false, nil
}

// line reads a GLOBAL operand: printable ASCII up to a newline.
func (u *unpickler) line() (string, error) {
	for i := u.pos; i < len(u.data) && i < u.pos+256; i++ {
		c := u.data[i]
		if c == '\n' {
			s := string(u.data[u.pos:i])
			u.pos = i + 1
			return s, nil
		}
		if c < 0x20 || c >= 0x7f {
			break
		}
	}
	return "", fmt.Errorf("malformed global name")
}

func (u *unpickler) dictOnTop() (*pyDict, error) {
	v, err := u.top()
	if err != nil {
		return nil, err
	}
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("set item of a %s", pyTypeName(v))
	}
	return d, nil
}

// setItems stores key, value pairs; keys must be hashable scalars, and a
// repeated key keeps the last value, as in Python.
func (d *pyDict) setItems(items []any) error {
	if len(items)%2 != 0 {
		return fmt.Errorf("odd number of dict items")
	}
	for i := 0; i < len(items); i += 2 {
		k := items[i]
		switch k.(type) {
		case pyStr, pyBytes, int64, bool, nil:
		default:
			return fmt.Errorf("dict key of type %s", pyTypeName(k))
		}
		if d.idx == nil {
			d.idx = map[any]int{}
		}
		if j, ok := d.idx[k]; ok {
			d.vals[j] = items[i+1]
			continue
		}
		d.idx[k] = len(d.keys)
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, items[i+1])
	}
	return nil
}

func lookupGlobal(module, name string) (pyGlobal, error) {
	g := pyGlobal{module, name}
	if _, ok := pickleGlobals[module+"."+name]; !ok {
		return g, fmt.Errorf("global %s.%s is not allowed (only numpy arrays and plain Python values can be read)", module, name)
	}
	return g, nil
}

// callGlobal runs one of the allowed callables on its arguments.
func callGlobal(g pyGlobal, args pyTuple) (any, error) {
	switch pickleGlobals[g.module+"."+g.name] {
	case "reconstruct":
		// _reconstruct(ndarray, (0,), b'b') makes an empty array that
		// BUILD then fills.
		if len(args) != 3 {
			return nil, fmt.Errorf("_reconstruct with %d arguments", len(args))
		}
		if c, ok := args[0].(pyGlobal); !ok || pickleGlobals[c.module+"."+c.name] != "ndarray" {
			return nil, fmt.Errorf("_reconstruct of a %s, want numpy.ndarray", pyTypeName(args[0]))
		}
		return &npArray{}, nil
	case "dtype":
		// dtype('u1', False, True); Python 2 numpy wrote 0 and 1.
		if len(args) != 3 {
			return nil, fmt.Errorf("dtype with %d arguments", len(args))
		}
		s, ok := pyText(args[0])
		if !ok {
			return nil, fmt.Errorf("dtype of a %s", pyTypeName(args[0]))
		}
		kind, size, err := parseDescr(s)
		if err != nil {
			return nil, err
		}
		return &npDtype{kind: kind, size: size}, nil
	case "encode":
		// Python 3 writes bytes under protocol 2 as
		// _codecs.encode(text, 'latin1'), one character per byte.
		if len(args) != 2 {
			return nil, fmt.Errorf("_codecs.encode with %d arguments", len(args))
		}
		s, ok1 := args[0].(pyStr)
		enc, ok2 := args[1].(pyStr)
		if !ok1 || !ok2 || (enc != "latin1" && enc != "latin-1") {
			return nil, fmt.Errorf("_codecs.encode is only supported for latin1 text")
		}
		b := make([]byte, 0, len(s))
		for _, r := range string(s) {
			if r > 0xff {
				return nil, fmt.Errorf("character %q is not latin1", r)
			}
			b = append(b, byte(r))
		}
		return pyBytes(b), nil
	case "frombuffer":
		// Protocol 5: _frombuffer(buffer, dtype, shape, order).
		if len(args) != 4 {
			return nil, fmt.Errorf("_frombuffer with %d arguments", len(args))
		}
		buf, ok := args[0].(pyBytes)
		if !ok {
			return nil, fmt.Errorf("_frombuffer of a %s", pyTypeName(args[0]))
		}
		order, ok := pyText(args[3])
		if !ok || (order != "C" && order != "F") {
			return nil, fmt.Errorf("_frombuffer order must be C or F")
		}
		return newArray(args[1], args[2], order == "F", []byte(buf), nil)
	case "scalar":
		// numpy scalars: scalar(dtype, bytes) → int or float.
		if len(args) != 2 {
			return nil, fmt.Errorf("scalar with %d arguments", len(args))
		}
		b, ok := args[1].(pyBytes)
		if !ok {
			return nil, fmt.Errorf("scalar of a %s", pyTypeName(args[1]))
		}
		a, err := newArray(args[0], pyTuple{}, false, []byte(b), nil)
		if err != nil {
			return nil, err
		}
		switch a.kind {
		case 'i', 'u':
			v, err := (&npArray{kind: a.kind, size: a.size, shape: []int{1}, data: a.data}).ints("scalar")
			if err != nil {
				return nil, err
			}
			return v[0], nil
		case 'f':
			if a.size == 4 {
				return float64(math.Float32frombits(binary.LittleEndian.Uint32(a.data))), nil
			}
			return math.Float64frombits(binary.LittleEndian.Uint64(a.data)), nil
		}
		return nil, fmt.Errorf("scalar of type %s", a.dtype())
	case "ordereddict":
		if len(args) != 0 {
			return nil, fmt.Errorf("OrderedDict with arguments")
		}
		return &pyDict{}, nil
	}
	return nil, fmt.Errorf("%s.%s cannot be called", g.module, g.name)
}

// build applies BUILD's state to an array or dtype under construction.
func build(obj, state any) error {
	st, ok := state.(pyTuple)
	switch o := obj.(type) {
	case *npArray:
		// (version, shape, dtype, is_fortran, data) with data bytes, or a
		// list for object arrays.
		if !ok || len(st) != 5 {
			return fmt.Errorf("array state is a %s, want a 5-tuple", pyTypeName(state))
		}
		if o.shape != nil {
			return fmt.Errorf("array built twice")
		}
		if v, _ := st[0].(int64); v != 1 {
			return fmt.Errorf("array state version %v, want 1", st[0])
		}
		fortran, ok := truth(st[3])
		if !ok {
			return fmt.Errorf("array is_fortran is a %s", pyTypeName(st[3]))
		}
		var raw []byte
		var objects []any
		switch d := st[4].(type) {
		case pyBytes:
			raw = []byte(d)
		case pyStr:
			// Python 2 pickles of some arrays carry the data as unicode;
			// numpy reads it back as latin1.
			for _, r := range string(d) {
				if r > 0xff {
					return fmt.Errorf("array data character %q is not latin1", r)
				}
				raw = append(raw, byte(r))
			}
		case *pyList:
			objects = d.items
		default:
			return fmt.Errorf("array data is a %s", pyTypeName(st[4]))
		}
		a, err := newArray(st[2], st[1], fortran, raw, objects)
		if err != nil {
			return err
		}
		*o = *a
		return nil
	case *npDtype:
		// (3, byteorder, subarray, names, fields, elsize, alignment, flags)
		// and, in version 4, metadata.
		if !ok || (len(st) != 8 && len(st) != 9) {
			return fmt.Errorf("dtype state is a %s of %d, want an 8- or 9-tuple", pyTypeName(state), len(st))
		}
		if o.order != 0 {
			return fmt.Errorf("dtype built twice")
		}
		if v, _ := st[0].(int64); v != 3 && v != 4 {
			return fmt.Errorf("dtype state version %v, want 3 or 4", st[0])
		}
		bo, _ := pyText(st[1])
		if st[2] != nil || st[3] != nil || st[4] != nil {
			return fmt.Errorf("structured and subarray dtypes are not supported")
		}
		switch bo {
		case "<", "|", "=":
		case ">":
			return fmt.Errorf("big-endian arrays are not supported")
		default:
			return fmt.Errorf("dtype byte order %q", bo)
		}
		o.order = bo[0]
		if es, _ := st[5].(int64); es > 0 {
			if o.kind != 'S' && o.kind != 'U' {
				return fmt.Errorf("element size %d for a %c dtype", es, o.kind)
			}
			if es > 1<<20 || (o.kind == 'U' && es%4 != 0) {
				return fmt.Errorf("element size %d", es)
			}
			o.size = int(es)
		}
		return nil
	}
	return fmt.Errorf("BUILD of a %s", pyTypeName(obj))
}

func truth(v any) (bool, bool) {
	switch b := v.(type) {
	case bool:
		return b, true
	case int64:
		return b != 0, true
	}
	return false, false
}

// newArray checks a dtype, a shape tuple and the data against each other.
func newArray(dt, shape any, fortran bool, raw []byte, objects []any) (*npArray, error) {
	d, ok := dt.(*npDtype)
	if !ok {
		return nil, fmt.Errorf("array dtype is a %s", pyTypeName(dt))
	}
	st, ok := shape.(pyTuple)
	if !ok || len(st) > 32 {
		return nil, fmt.Errorf("array shape is a %s", pyTypeName(shape))
	}
	dims := make([]int, len(st))
	for i, s := range st {
		n, ok := s.(int64)
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, fmt.Errorf("array shape %v", st)
		}
		dims[i] = int(n)
	}
	a := &npArray{kind: d.kind, size: d.size, shape: dims, fortran: fortran && len(dims) > 1}
	if d.kind == 'O' {
		if objects == nil || elements(dims, len(objects)) != len(objects) {
			return nil, fmt.Errorf("object array of shape %v has %d elements", dims, len(objects))
		}
		a.objects = objects
		return a, nil
	}
	if objects != nil {
		return nil, fmt.Errorf("%s array with a list of values", a.dtype())
	}
	if n := elements(dims, len(raw)/d.size); n < 0 || n*d.size != len(raw) {
		return nil, fmt.Errorf("array of shape %v and type %s needs %s bytes, has %d", dims, a.dtype(), dataBytes(dims, d.size), len(raw))
	}
	a.data = raw
	return a, nil
}

// pickleDict parses a pickle whose value must be a dict, as both CIFAR-100
// and LEO write them.
func pickleDict(label string, data []byte) (*pyDict, error) {
	v, err := parsePickle(data)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", label, err)
	}
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("datasets: %s holds a pickled %s, want a dict", label, pyTypeName(v))
	}
	return d, nil
}

// dictArray returns d[key] as an array; lists of ints are accepted as 1-D
// int64 arrays (CIFAR-100 stores its labels as lists).
func dictArray(label string, d *pyDict, key string) (*npArray, error) {
	v, ok := d.get(key)
	if !ok {
		return nil, fmt.Errorf("datasets: %s has no %q entry (it has %s)", label, key, strings.Join(d.keyNames(), ", "))
	}
	switch a := v.(type) {
	case *npArray:
		if a.shape == nil {
			return nil, fmt.Errorf("datasets: %s: %q is an array that was never filled", label, key)
		}
		return a, nil
	case *pyList:
		out := &npArray{kind: 'i', size: 8, shape: []int{len(a.items)}, data: make([]byte, 8*len(a.items))}
		allText := len(a.items) > 0
		for _, it := range a.items {
			if _, ok := pyText(it); !ok {
				allText = false
			}
		}
		if allText {
			return &npArray{kind: 'O', size: 8, shape: []int{len(a.items)}, objects: a.items}, nil
		}
		for i, it := range a.items {
			n, ok := it.(int64)
			if !ok {
				return nil, fmt.Errorf("datasets: %s: %q[%d] is a %s, want an int", label, key, i, pyTypeName(it))
			}
			binary.LittleEndian.PutUint64(out.data[8*i:], uint64(n))
		}
		return out, nil
	}
	return nil, fmt.Errorf("datasets: %s: %q is a %s, want an array or a list", label, key, pyTypeName(v))
}
