package tfrecord

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// OneBytes returns the single value of the bytes feature key, or an error
// that says whether the feature is missing, of another type, or not exactly
// one value: a Meta-Dataset record holds exactly one "image".
func (e Example) OneBytes(key string) ([]byte, error) {
	v, ok := e.Bytes[key]
	if !ok {
		return nil, e.absent(key, "bytes")
	}
	if len(v) != 1 {
		return nil, fmt.Errorf("tfrecord: feature %q has %d values, want 1", key, len(v))
	}
	return v[0], nil
}

// OneInt64 returns the single value of the int64 feature key.
func (e Example) OneInt64(key string) (int64, error) {
	v, ok := e.Int64[key]
	if !ok {
		return 0, e.absent(key, "int64")
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("tfrecord: feature %q has %d values, want 1", key, len(v))
	}
	return v[0], nil
}

// OneFloat returns the single value of the float feature key.
func (e Example) OneFloat(key string) (float32, error) {
	v, ok := e.Float[key]
	if !ok {
		return 0, e.absent(key, "float")
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("tfrecord: feature %q has %d values, want 1", key, len(v))
	}
	return v[0], nil
}

// absent explains a failed lookup: a feature stored under another type is a
// different mistake from one that is not there at all.
func (e Example) absent(key, want string) error {
	var have string
	if _, ok := e.Bytes[key]; ok {
		have = "a bytes"
	} else if _, ok := e.Int64[key]; ok {
		have = "an int64"
	} else if _, ok := e.Float[key]; ok {
		have = "a float"
	} else {
		return fmt.Errorf("tfrecord: feature %q missing", key)
	}
	return fmt.Errorf("tfrecord: feature %q is %s list, want %s", key, have, want)
}

// EncodeExample serialises e as a tf.train.Example, with features sorted by
// key (then bytes, float, int64 for a key in several maps) and numbers
// packed, so that equal Examples give equal bytes. It exists to build test
// inputs; real records come from TensorFlow's writers.
func EncodeExample(e Example) []byte {
	type entry struct {
		key  string
		kind protowire.Number
	}
	var entries []entry
	for k := range e.Bytes {
		entries = append(entries, entry{k, featureBytes})
	}
	for k := range e.Float {
		entries = append(entries, entry{k, featureFloat})
	}
	for k := range e.Int64 {
		entries = append(entries, entry{k, featureInt64})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.kind, b.kind))
	})

	var features, entryBuf, feature, list []byte
	for _, en := range entries {
		list = list[:0]
		switch en.kind {
		case featureBytes:
			for _, v := range e.Bytes[en.key] {
				list = protowire.AppendTag(list, listValue, protowire.BytesType)
				list = protowire.AppendBytes(list, v)
			}
		case featureFloat:
			if vs := e.Float[en.key]; len(vs) > 0 {
				list = protowire.AppendTag(list, listValue, protowire.BytesType)
				list = protowire.AppendVarint(list, uint64(4*len(vs)))
				for _, v := range vs {
					list = protowire.AppendFixed32(list, math.Float32bits(v))
				}
			}
		case featureInt64:
			if vs := e.Int64[en.key]; len(vs) > 0 {
				var packed []byte
				for _, v := range vs {
					packed = protowire.AppendVarint(packed, uint64(v))
				}
				list = protowire.AppendTag(list, listValue, protowire.BytesType)
				list = protowire.AppendBytes(list, packed)
			}
		}
		feature = protowire.AppendTag(feature[:0], en.kind, protowire.BytesType)
		feature = protowire.AppendBytes(feature, list)

		entryBuf = protowire.AppendTag(entryBuf[:0], entryKey, protowire.BytesType)
		entryBuf = protowire.AppendString(entryBuf, en.key)
		entryBuf = protowire.AppendTag(entryBuf, entryValue, protowire.BytesType)
		entryBuf = protowire.AppendBytes(entryBuf, feature)

		features = protowire.AppendTag(features, featuresMap, protowire.BytesType)
		features = protowire.AppendBytes(features, entryBuf)
	}
	out := protowire.AppendTag(nil, exampleFeatures, protowire.BytesType)
	return protowire.AppendBytes(out, features)
}
