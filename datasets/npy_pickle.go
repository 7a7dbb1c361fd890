package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
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
// This file is the machine that runs the opcodes; npy_pickle_values.go
// holds the values and callables, npy_pickle_dict.go reads the dicts the
// data sets are stored as.

// pickleOpNames names opcodes in messages.
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

// operands removes and returns the values an opcode consumes: the top n in
// stack order, or for n < 0 those above the last mark and the mark. Values
// below the last mark cannot be taken.
func (u *unpickler) operands(n int) ([]any, error) {
	if n < 0 {
		return u.popMark()
	}
	floor := 0
	if len(u.marks) > 0 {
		floor = u.marks[len(u.marks)-1]
	}
	if len(u.stack)-floor < n {
		return nil, fmt.Errorf("stack underflow")
	}
	items := append([]any(nil), u.stack[len(u.stack)-n:]...)
	u.stack = u.stack[:len(u.stack)-n]
	return items, nil
}

// operandLen is the size of the operand of the opcodes that have a fixed
// one, or of the length prefix of the strings that follow some.
var operandLen = [256]int{
	'K': 1, 'M': 2, 'J': 4, // BININT1, BININT2, BININT
	'q': 1, 'r': 4, 'h': 1, 'j': 4, // BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
	'U': 1, 'C': 1, 'T': 4, 'B': 4, 0x8e: 8, 0x96: 8, // byte strings
	'X': 4, 0x8c: 1, 0x8d: 8, // text
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
	case 't', 0x85, 0x86, 0x87, 'l', 'd': // TUPLE, TUPLE1-3, LIST, DICT
		n := -1
		if op >= 0x85 && op <= 0x87 {
			n = int(op - 0x84)
		}
		items, err := u.operands(n)
		if err != nil {
			return false, err
		}
		switch op {
		case 'l':
			u.push(&pyList{items: items})
		case 'd':
			d := &pyDict{}
			if err := d.setItems(items); err != nil {
				return false, err
			}
			u.push(d)
		default:
			u.push(pyTuple(items))
		}
	case 'a', 'e', 's', 'u': // APPEND, APPENDS, SETITEM, SETITEMS
		n := -1 // APPENDS and SETITEMS take the values above the mark
		switch op {
		case 'a':
			n = 1
		case 's':
			n = 2
		}
		items, err := u.operands(n)
		if err != nil {
			return false, err
		}
		c, err := u.top()
		if err != nil {
			return false, err
		}
		if op == 'a' || op == 'e' {
			list, ok := c.(*pyList)
			if !ok {
				return false, fmt.Errorf("append to a %s", pyTypeName(c))
			}
			list.items = append(list.items, items...)
			break
		}
		d, ok := c.(*pyDict)
		if !ok {
			return false, fmt.Errorf("set item of a %s", pyTypeName(c))
		}
		if err := d.setItems(items); err != nil {
			return false, err
		}
	case 'q', 'r', 0x94: // BINPUT, LONG_BINPUT, MEMOIZE
		idx := uint64(len(u.memo))
		if op != 0x94 {
			var err error
			if idx, err = u.uint(operandLen[op]); err != nil {
				return false, err
			}
		}
		v, err := u.top()
		if err != nil {
			return false, err
		}
		u.memo[idx] = v
	case 'h', 'j': // BINGET, LONG_BINGET
		idx, err := u.uint(operandLen[op])
		if err != nil {
			return false, err
		}
		v, ok := u.memo[idx]
		if !ok {
			return false, fmt.Errorf("memo %d was never stored", idx)
		}
		u.push(v)
	case 'K', 'M', 'J': // BININT1 and BININT2 unsigned, BININT signed
		v, err := u.uint(operandLen[op])
		if err != nil {
			return false, err
		}
		if op == 'J' {
			u.push(int64(int32(uint32(v))))
		} else {
			u.push(int64(v))
		}
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
	case 'U', 'C', 'T', 'B', 0x8e, 0x96: // byte strings; BINSTRING's length is signed
		b, err := u.lenString(operandLen[op], op == 'T')
		if err != nil {
			return false, err
		}
		u.push(pyBytes(b))
	case 'X', 0x8c, 0x8d:
		s, err := u.text(operandLen[op])
		if err != nil {
			return false, err
		}
		u.push(s)
	case 'c': // GLOBAL: module and name on lines of their own
		module, err := u.line()
		if err != nil {
			return false, err
		}
		name, err := u.line()
		if err != nil {
			return false, err
		}
		return false, u.pushGlobal(module, name)
	case 0x93: // STACK_GLOBAL
		v, err := u.operands(2)
		if err != nil {
			return false, err
		}
		module, ok1 := v[0].(pyStr)
		name, ok2 := v[1].(pyStr)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("STACK_GLOBAL of a %s and a %s", pyTypeName(v[0]), pyTypeName(v[1]))
		}
		return false, u.pushGlobal(string(module), string(name))
	case 'R':
		v, err := u.operands(2)
		if err != nil {
			return false, err
		}
		g, ok := v[0].(pyGlobal)
		if !ok {
			return false, fmt.Errorf("call of a %s", pyTypeName(v[0]))
		}
		a, ok := v[1].(pyTuple)
		if !ok {
			return false, fmt.Errorf("call with %s arguments", pyTypeName(v[1]))
		}
		r, err := callGlobal(g, a)
		if err != nil {
			return false, err
		}
		u.push(r)
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

// pushGlobal pushes the callable module.name if it is allowed.
func (u *unpickler) pushGlobal(module, name string) error {
	g, err := lookupGlobal(module, name)
	if err != nil {
		return err
	}
	u.push(g)
	return nil
}
