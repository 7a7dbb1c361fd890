package tbevents

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// FileVersion is the file_version of the first event of every file: with
// version 2, TensorBoard recognises restarts by SessionLog START events
// rather than by steps that go backwards.
const FileVersion = "brain.Event:2"

// SessionStart is SessionLog's status START.
const SessionStart = 1

// Field numbers, from TensorBoard's tensorboard/compat/proto.
const (
	eventWallTime    protowire.Number = 1 // double
	eventStep        protowire.Number = 2 // int64
	eventFileVersion protowire.Number = 3 // string, oneof what
	eventSummary     protowire.Number = 5 // Summary, oneof what
	eventSessionLog  protowire.Number = 7 // SessionLog, oneof what

	sessionStatus protowire.Number = 1 // enum SessionStatus

	summaryValue protowire.Number = 1 // repeated Value

	valueTag    protowire.Number = 1 // string
	valueSimple protowire.Number = 2 // float, oneof value
	valueHisto  protowire.Number = 5 // HistogramProto, oneof value

	histoMin         protowire.Number = 1 // double
	histoMax         protowire.Number = 2
	histoNum         protowire.Number = 3
	histoSum         protowire.Number = 4
	histoSumSquares  protowire.Number = 5
	histoBucketLimit protowire.Number = 6 // packed repeated double
	histoBucket      protowire.Number = 7
)

// Event is one tensorboard.Event. Its "what" is one of FileVersion,
// Session or Values: set one.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string
	Session     int     // a SessionLog's status (SessionStart); 0: not a session log
	Values      []Value // the Summary's values
}

// Value is one Summary value: a histogram when Histo is set, else the
// scalar Simple.
type Value struct {
	Tag    string
	Simple float32
	Histo  *Histogram
}

// Scalar is the Summary value of a scalar. TensorBoard keeps scalars as
// float32, so v is rounded to the nearest float32.
func Scalar(tag string, v float64) Value { return Value{Tag: tag, Simple: float32(v)} }

// Histogram is a HistogramProto: bucket i counts the values in
// (BucketLimit[i-1], BucketLimit[i]], the first bucket from Min.
type Histogram struct {
	Min, Max, Num, Sum, SumSquares float64
	BucketLimit, Bucket            []float64
}

// NewHistogram is the histogram of the finite values of xs in n
// equal-width buckets spanning their range (one bucket when they are all
// equal); nil when none is finite. TensorBoard accepts any increasing
// limits and rebins them for display; equal widths keep the buckets
// readable as they are.
func NewHistogram(xs []float64, n int) *Histogram {
	h := &Histogram{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		h.Min, h.Max = min(h.Min, x), max(h.Max, x)
		h.Num++
		h.Sum += x
		h.SumSquares += x * x
	}
	if h.Num == 0 {
		return nil
	}
	w := (h.Max - h.Min) / float64(n)
	if n < 1 || !(w > 0) || math.IsInf(w, 0) {
		h.BucketLimit, h.Bucket = []float64{h.Max}, []float64{h.Num}
		return h
	}
	h.BucketLimit, h.Bucket = make([]float64, n), make([]float64, n)
	for i := range h.BucketLimit {
		h.BucketLimit[i] = h.Min + w*float64(i+1)
	}
	h.BucketLimit[n-1] = h.Max // exactly, whatever the rounding of w
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		// Right-closed buckets: x on a limit belongs to the bucket below;
		// the comparisons settle what the division rounded.
		i := min(max(int(math.Ceil((x-h.Min)/w))-1, 0), n-1)
		if i > 0 && x <= h.BucketLimit[i-1] {
			i--
		} else if i < n-1 && x > h.BucketLimit[i] {
			i++
		}
		h.Bucket[i]++
	}
	return h
}

// Append appends e's encoding to dst. Fields at their zero value are left
// out, as proto3 does, except the members of a oneof that are set.
func (e *Event) Append(dst []byte) []byte {
	dst = appendDouble(dst, eventWallTime, e.WallTime)
	if e.Step != 0 {
		dst = protowire.AppendTag(dst, eventStep, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(e.Step))
	}
	switch {
	case e.Values != nil:
		dst = appendMessage(dst, eventSummary, func(b []byte) []byte {
			for i := range e.Values {
				b = appendMessage(b, summaryValue, e.Values[i].append)
			}
			return b
		})
	case e.Session != 0:
		dst = appendMessage(dst, eventSessionLog, func(b []byte) []byte {
			b = protowire.AppendTag(b, sessionStatus, protowire.VarintType)
			return protowire.AppendVarint(b, uint64(e.Session))
		})
	case e.FileVersion != "":
		dst = protowire.AppendTag(dst, eventFileVersion, protowire.BytesType)
		dst = protowire.AppendString(dst, e.FileVersion)
	}
	return dst
}

func (v *Value) append(b []byte) []byte {
	if v.Tag != "" {
		b = protowire.AppendTag(b, valueTag, protowire.BytesType)
		b = protowire.AppendString(b, v.Tag)
	}
	if v.Histo == nil {
		b = protowire.AppendTag(b, valueSimple, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, math.Float32bits(v.Simple))
	}
	h := v.Histo
	return appendMessage(b, valueHisto, func(b []byte) []byte {
		b = appendDouble(b, histoMin, h.Min)
		b = appendDouble(b, histoMax, h.Max)
		b = appendDouble(b, histoNum, h.Num)
		b = appendDouble(b, histoSum, h.Sum)
		b = appendDouble(b, histoSumSquares, h.SumSquares)
		b = appendPacked(b, histoBucketLimit, h.BucketLimit)
		return appendPacked(b, histoBucket, h.Bucket)
	})
}

func appendDouble(b []byte, num protowire.Number, x float64) []byte {
	if x == 0 && !math.Signbit(x) {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(x))
}

func appendPacked(b []byte, num protowire.Number, xs []float64) []byte {
	if len(xs) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(xs)))
	for _, x := range xs {
		b = protowire.AppendFixed64(b, math.Float64bits(x))
	}
	return b
}

// appendMessage appends an embedded message written by body. Its length
// prefix comes first, so body writes into a scratch slice; event messages
// are small.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	m := body(nil)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// errTruncated is the error of a message that ends inside a field.
var errTruncated = errors.New("tbevents: truncated message")

// Decode decodes one Event. Values other than scalars and histograms
// (images, audio, tensors) are skipped, and so are unknown fields.
func Decode(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			e.WallTime = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			e.Step = int64(x)
		case num == eventFileVersion && typ == protowire.BytesType:
			e.FileVersion = string(v)
		case num == eventSummary && typ == protowire.BytesType:
			e.Values = []Value{} // a summary, even an empty one
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != summaryValue || typ != protowire.BytesType {
					return nil
				}
				val, keep, err := decodeValue(v)
				if keep {
					e.Values = append(e.Values, val)
				}
				return err
			})
		case num == eventSessionLog && typ == protowire.BytesType:
			return fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == sessionStatus && typ == protowire.VarintType {
					e.Session = int(x)
				}
				return nil
			})
		}
		return nil
	})
	return e, err
}

// decodeValue decodes a Summary.Value; keep is false for the kinds Decode
// skips.
func decodeValue(b []byte) (val Value, keep bool, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			val.Tag = string(v)
		case num == valueSimple && typ == protowire.Fixed32Type:
			val.Simple, val.Histo, keep = math.Float32frombits(uint32(x)), nil, true
		case num == valueHisto && typ == protowire.BytesType:
			h, err := decodeHistogram(v)
			val.Histo, keep = h, true
			return err
		case num == 3 || num == 4 || num == 6 || num == 8:
			// Another member of the value oneof (an old-style histogram,
			// image, audio, tensor): the last member set wins.
			val.Histo, keep = nil, false
		}
		return nil
	})
	return val, keep, err
}

func decodeHistogram(b []byte) (*Histogram, error) {
	h := &Histogram{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		if typ == protowire.Fixed64Type {
			f := math.Float64frombits(x)
			switch num {
			case histoMin:
				h.Min = f
			case histoMax:
				h.Max = f
			case histoNum:
				h.Num = f
			case histoSum:
				h.Sum = f
			case histoSumSquares:
				h.SumSquares = f
			case histoBucketLimit:
				h.BucketLimit = append(h.BucketLimit, f)
			case histoBucket:
				h.Bucket = append(h.Bucket, f)
			}
			return nil
		}
		if typ != protowire.BytesType || (num != histoBucketLimit && num != histoBucket) {
			return nil
		}
		if len(v)%8 != 0 {
			return fmt.Errorf("tbevents: packed doubles of field %d: %d bytes is not a multiple of 8", num, len(v))
		}
		dst := &h.BucketLimit
		if num == histoBucket {
			dst = &h.Bucket
		}
		for ; len(v) > 0; v = v[8:] {
			x, _ := protowire.ConsumeFixed64(v)
			*dst = append(*dst, math.Float64frombits(x))
		}
		return nil
	})
	return h, err
}

// fields calls fn with each field of message b: its number and wire type,
// and its bytes (BytesType) or its value (varint and fixed types). Groups
// are skipped.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("tbevents: bad field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errTruncated, num, protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			continue
		}
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
