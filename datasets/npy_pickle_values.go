package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The values a pickle builds (see npy_pickle.go): nil (None), bool, int64,
// float64, pyStr, pyBytes, pyTuple, *pyList, *pyDict, *npArray, *npDtype,
// pyGlobal, and the callables that may build them.

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
