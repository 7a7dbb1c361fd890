package tfrecord

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Example is a decoded tf.train.Example: a map from feature name to one list
// of values, held in the map of its type. A name is in at most one map.
type Example struct {
	Bytes map[string][][]byte
	Int64 map[string][]int64
	Float map[string][]float32
}

// Field numbers of tf.train.Example and the messages inside it
// (tensorflow/core/example/{example,feature}.proto).
const (
	exampleFeatures protowire.Number = 1 // Example.features
	featuresMap     protowire.Number = 1 // Features.feature (map entries)
	entryKey        protowire.Number = 1
	entryValue      protowire.Number = 2
	featureBytes    protowire.Number = 1 // Feature.bytes_list
	featureFloat    protowire.Number = 2 // Feature.float_list
	featureInt64    protowire.Number = 3 // Feature.int64_list
	listValue       protowire.Number = 1 // *List.value
)

// DecodeExample decodes a serialised tf.train.Example. Byte values alias b.
// Unknown fields are skipped; a known field with the wrong wire type, or
// bytes that are not protobuf, are an error naming the feature concerned.
//
// Protobuf merge rules apply, so that the result is what TensorFlow would
// see: a repeated map key keeps its last value, a Feature holding several
// kinds keeps the last one, and repeated values of one kind are
// concatenated.
func DecodeExample(b []byte) (Example, error) {
	e := Example{
		Bytes: map[string][][]byte{},
		Int64: map[string][]int64{},
		Float: map[string][]float32{},
	}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != exampleFeatures {
			return nil
		}
		if typ != protowire.BytesType {
			return wireTypeErr("features", typ, "bytes")
		}
		return e.decodeFeatures(v)
	})
	if err != nil {
		return Example{}, fmt.Errorf("tfrecord: example: %w", err)
	}
	return e, nil
}

func (e *Example) decodeFeatures(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != featuresMap {
			return nil
		}
		if typ != protowire.BytesType {
			return wireTypeErr("features.feature", typ, "bytes")
		}
		return e.decodeEntry(v)
	})
}

// decodeEntry reads one map entry. The key is found first, wherever it is in
// the entry, so that errors in the value can name it.
func (e *Example) decodeEntry(b []byte) error {
	var key string
	var value []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case entryKey:
			if typ != protowire.BytesType {
				return wireTypeErr("feature key", typ, "bytes")
			}
			key = string(v)
		case entryValue:
			if typ != protowire.BytesType {
				return wireTypeErr("feature value", typ, "bytes")
			}
			value = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("feature map entry: %w", err)
	}
	delete(e.Bytes, key)
	delete(e.Int64, key)
	delete(e.Float, key)
	if err := e.decodeFeature(key, value); err != nil {
		return fmt.Errorf("feature %q: %w", key, err)
	}
	return nil
}

func (e *Example) decodeFeature(key string, b []byte) error {
	// kind is the oneof case seen last: a new case discards the old values
	// and a repeated case appends to them.
	var kind protowire.Number
	var bs [][]byte
	var is []int64
	var fs []float32
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		var name string
		switch num {
		case featureBytes:
			name = "bytes_list"
		case featureFloat:
			name = "float_list"
		case featureInt64:
			name = "int64_list"
		default:
			return nil
		}
		if typ != protowire.BytesType {
			return wireTypeErr(name, typ, "bytes")
		}
		if num != kind {
			kind, bs, is, fs = num, nil, nil, nil
		}
		var err error
		switch num {
		case featureBytes:
			bs, err = decodeBytesList(bs, v)
		case featureFloat:
			fs, err = decodeFloatList(fs, v)
		case featureInt64:
			is, err = decodeInt64List(is, v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A present but empty list is kept as an empty, non-nil slice: the
	// feature exists, it just has no values.
	switch kind {
	case featureBytes:
		e.Bytes[key] = nonNil(bs)
	case featureFloat:
		e.Float[key] = nonNil(fs)
	case featureInt64:
		e.Int64[key] = nonNil(is)
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func decodeBytesList(dst [][]byte, b []byte) ([][]byte, error) {
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != listValue {
			return nil
		}
		if typ != protowire.BytesType {
			return wireTypeErr("value", typ, "bytes")
		}
		dst = append(dst, v)
		return nil
	})
	return dst, err
}

// decodeFloatList accepts packed (what TensorFlow writes) and unpacked
// values, as every protobuf parser must.
func decodeFloatList(dst []float32, b []byte) ([]float32, error) {
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != listValue {
			return nil
		}
		switch typ {
		case protowire.Fixed32Type:
			x, _ := protowire.ConsumeFixed32(v)
			dst = append(dst, math.Float32frombits(x))
		case protowire.BytesType:
			if len(v)%4 != 0 {
				return fmt.Errorf("packed value: %d bytes is not a whole number of floats", len(v))
			}
			dst = slices.Grow(dst, len(v)/4)
			for ; len(v) > 0; v = v[4:] {
				x, _ := protowire.ConsumeFixed32(v)
				dst = append(dst, math.Float32frombits(x))
			}
		default:
			return wireTypeErr("value", typ, "fixed32 or packed bytes")
		}
		return nil
	})
	return dst, err
}

func decodeInt64List(dst []int64, b []byte) ([]int64, error) {
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != listValue {
			return nil
		}
		switch typ {
		case protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			dst = append(dst, int64(x))
		case protowire.BytesType:
			for i := 0; len(v) > 0; i++ {
				x, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return fmt.Errorf("packed value %d: %s", i, wireErr(n))
				}
				dst = append(dst, int64(x))
				v = v[n:]
			}
		default:
			return wireTypeErr("value", typ, "varint or packed bytes")
		}
		return nil
	})
	return dst, err
}

// eachField calls fn with every field of the message b, passing the field's
// value without its tag: the payload of a bytes field, the varint or fixed
// bytes of a scalar, and the whole body of a (deprecated) group.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fmt.Errorf("byte %d: bad field tag: %s", off, wireErr(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			return fmt.Errorf("byte %d: field %d: %s", off, num, wireErr(m))
		}
		v := b[off+n : off+n+m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		off += n + m
	}
	return nil
}

// wireErr describes a protowire error code; its own text for truncation is
// io.ErrUnexpectedEOF's, which reads like an I/O failure.
func wireErr(n int) string {
	if err := protowire.ParseError(n); !errors.Is(err, io.ErrUnexpectedEOF) {
		return err.Error()
	}
	return "truncated"
}

func wireTypeErr(field string, typ protowire.Type, want string) error {
	return fmt.Errorf("%s has wire type %s, want %s", field, wireTypeName(typ), want)
}

func wireTypeName(typ protowire.Type) string {
	switch typ {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "bytes"
	case protowire.StartGroupType:
		return "group"
	}
	return strconv.Itoa(int(typ))
}
