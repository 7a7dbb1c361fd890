package tfrecord

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// msg builds a message from already-encoded fields.
func msg(fields ...[]byte) []byte { return concat(fields...) }

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func bytesField(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varintField(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func fixed32Field(num protowire.Number, v uint32) []byte {
	b := protowire.AppendTag(nil, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

func fixed64Field(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func groupField(num protowire.Number, body []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.StartGroupType)
	b = append(b, body...)
	return protowire.AppendTag(b, num, protowire.EndGroupType)
}

// entry is one Features map entry; example wraps entries into an Example.
func entry(key string, feature []byte) []byte {
	return bytesField(1, msg(bytesField(1, []byte(key)), bytesField(2, feature)))
}

func example(entries ...[]byte) []byte { return bytesField(1, msg(entries...)) }

func packedVarints(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := Example{
		Bytes: map[string][][]byte{"image": {[]byte("\x89PNG...")}, "names": {[]byte("a"), {}, []byte("c")}, "none": {}},
		Int64: map[string][]int64{"label": {7}, "ids": {-1, 0, 1 << 62, math.MinInt64}, "empty": {}},
		Float: map[string][]float32{"w": {0.5, -2, float32(math.Inf(1))}, "nof": {}},
	}
	b := EncodeExample(in)
	if !reflect.DeepEqual(b, EncodeExample(in)) {
		t.Fatal("EncodeExample is not deterministic")
	}
	out, err := DecodeExample(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %v\nwant %v", out, in)
	}
}

func TestDecodeWireVariants(t *testing.T) {
	b := concat(
		varintField(7, 99), // unknown Example field
		example(
			// value before key, int64 list unpacked then packed (merged)
			bytesField(1, msg(
				bytesField(2, bytesField(3, msg(varintField(1, 3), bytesField(1, packedVarints(4, -5)), fixed64Field(9, 1)))),
				bytesField(1, []byte("label")),
				varintField(3, 1), // unknown entry field
			)),
			entry("f", bytesField(2, msg(fixed32Field(1, math.Float32bits(1.5)), bytesField(1, protowire.AppendFixed32(nil, math.Float32bits(-2)))))),
			entry("img", msg(groupField(20, varintField(1, 1)), bytesField(1, msg(bytesField(1, []byte("x")), bytesField(1, []byte("yz")))))),
			// a key given twice keeps its last value, even of another kind
			entry("dup", bytesField(3, bytesField(1, packedVarints(1)))),
			entry("dup", bytesField(1, bytesField(1, []byte("last")))),
			// a Feature with two kinds keeps the last
			entry("oneof", msg(bytesField(1, bytesField(1, []byte("lost"))), bytesField(2, fixed32Field(1, math.Float32bits(9))))),
			// a Feature with no kind at all is no feature
			entry("nokind", nil),
			fixed32Field(4, 1), // unknown Features field
		),
		example(entry("second", bytesField(3, nil))), // a second features field merges
	)
	got, err := DecodeExample(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Example{
		Bytes: map[string][][]byte{"img": {[]byte("x"), []byte("yz")}, "dup": {[]byte("last")}},
		Int64: map[string][]int64{"label": {3, 4, -5}, "second": {}},
		Float: map[string][]float32{"f": {1.5, -2}, "oneof": {9}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		msg  string
	}{
		{"features as varint", varintField(1, 1), "features has wire type varint, want bytes"},
		{"entry as fixed32", bytesField(1, fixed32Field(1, 0)), "features.feature has wire type fixed32"},
		{"key as varint", example(bytesField(1, varintField(1, 5))), "feature map entry: feature key has wire type varint"},
		{"value as fixed64", example(bytesField(1, msg(bytesField(1, []byte("k")), fixed64Field(2, 0)))), "feature value has wire type fixed64"},
		{"int64_list as varint", example(entry("label", varintField(3, 1))), `feature "label": int64_list has wire type varint`},
		{"int64 value as fixed32", example(entry("label", bytesField(3, fixed32Field(1, 1)))), `feature "label": int64_list: value has wire type fixed32, want varint or packed bytes`},
		{"float value as varint", example(entry("w", bytesField(2, varintField(1, 1)))), `feature "w": float_list: value has wire type varint, want fixed32 or packed bytes`},
		{"bytes value as varint", example(entry("image", bytesField(1, varintField(1, 1)))), `feature "image": bytes_list: value has wire type varint, want bytes`},
		{"packed floats ragged", example(entry("w", bytesField(2, bytesField(1, []byte{1, 2, 3, 4, 5})))), `feature "w": float_list: packed value: 5 bytes is not a whole number of floats`},
		{"packed varint truncated", example(entry("label", bytesField(3, bytesField(1, []byte{1, 0x80})))), `feature "label": int64_list: packed value 1: truncated`},
		{"packed varint overflow", example(entry("label", bytesField(3, bytesField(1, bytes11())))), `feature "label": int64_list: packed value 0: `},
		{"truncated bytes", bytesField(1, []byte("abcdef"))[:4], "byte 0: field 1: truncated"},
		{"truncated tag", []byte{0x80}, "byte 0: bad field tag: truncated"},
		{"field number 0", []byte{0x00, 0x00}, "byte 0: bad field tag"},
		{"wire type 7", []byte{0x0f}, "byte 0: field 1: "},
		{"stray end group", []byte{0x0c}, "byte 0: field 1: "},
		{"unclosed group", protowire.AppendTag(nil, 5, protowire.StartGroupType), "byte 0: field 5: truncated"},
		{"deep truncation", example(entry("image", bytesField(1, bytesField(1, []byte("png")))[:5])), `feature "image"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := DecodeExample(c.b)
			if err == nil {
				t.Fatalf("no error; decoded %v", e)
			}
			t.Log(err)
			if !strings.HasPrefix(err.Error(), "tfrecord: example: ") || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q, want it to contain %q", err, c.msg)
			}
			if e.Bytes != nil || e.Int64 != nil || e.Float != nil {
				t.Errorf("a failed decode returned a partial Example")
			}
		})
	}
}

// bytes11 is a varint with more than 10 bytes.
func bytes11() []byte {
	return []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
}

func TestAccessors(t *testing.T) {
	e := Example{
		Bytes: map[string][][]byte{"image": {[]byte("a")}, "pair": {[]byte("a"), []byte("b")}},
		Int64: map[string][]int64{"label": {4}, "none": {}},
		Float: map[string][]float32{"w": {0.25}},
	}
	if v, err := e.OneBytes("image"); err != nil || string(v) != "a" {
		t.Errorf("OneBytes(image) = %q, %v", v, err)
	}
	if v, err := e.OneInt64("label"); err != nil || v != 4 {
		t.Errorf("OneInt64(label) = %d, %v", v, err)
	}
	if v, err := e.OneFloat("w"); err != nil || v != 0.25 {
		t.Errorf("OneFloat(w) = %g, %v", v, err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{second(e.OneBytes("missing")), `tfrecord: feature "missing" missing`},
		{second(e.OneBytes("pair")), `tfrecord: feature "pair" has 2 values, want 1`},
		{second(e.OneInt64("none")), `tfrecord: feature "none" has 0 values, want 1`},
		{second(e.OneInt64("image")), `tfrecord: feature "image" is a bytes list, want int64`},
		{second(e.OneBytes("label")), `tfrecord: feature "label" is an int64 list, want bytes`},
		{second(e.OneFloat("label")), `tfrecord: feature "label" is an int64 list, want float`},
		{second(e.OneInt64("w")), `tfrecord: feature "w" is a float list, want int64`},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("got %v, want %s", c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func ExampleDecodeExample() {
	rec := EncodeExample(Example{
		Bytes: map[string][][]byte{"image": {[]byte("\x89PNG\r\n")}},
		Int64: map[string][]int64{"label": {17}},
	})
	e, err := DecodeExample(rec)
	if err != nil {
		panic(err)
	}
	label, _ := e.OneInt64("label")
	image, _ := e.OneBytes("image")
	_, err = e.OneFloat("weight")
	fmt.Println(label, len(image), err)
	// Output: 17 6 tfrecord: feature "weight" missing
}
