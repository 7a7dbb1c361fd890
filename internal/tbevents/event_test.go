package tbevents

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/internal/tfrecord"
)

// The events as the independent readers report them (read.mjs prints this
// shape, gen.mjs writes it to fixture.json).
type jsonEvent struct {
	WallTime      float64     `json:"wall_time"`
	Step          int64       `json:"step"`
	FileVersion   string      `json:"file_version,omitempty"`
	SessionStatus int         `json:"session_status,omitempty"`
	Values        []jsonValue `json:"values,omitempty"`
}

type jsonValue struct {
	Tag    string     `json:"tag"`
	Simple *float64   `json:"simple_value,omitempty"`
	Histo  *jsonHisto `json:"histo,omitempty"`
	Other  string     `json:"other,omitempty"`
}

type jsonHisto struct {
	Min         float64   `json:"min"`
	Max         float64   `json:"max"`
	Num         float64   `json:"num"`
	Sum         float64   `json:"sum"`
	SumSquares  float64   `json:"sum_squares"`
	BucketLimit []float64 `json:"bucket_limit"`
	Bucket      []float64 `json:"bucket"`
}

// asJSON is what an independent reader should report of e.
func asJSON(e Event) jsonEvent {
	j := jsonEvent{WallTime: e.WallTime, Step: e.Step, FileVersion: e.FileVersion, SessionStatus: e.Session}
	for _, v := range e.Values {
		jv := jsonValue{Tag: v.Tag}
		if h := v.Histo; h != nil {
			jv.Histo = &jsonHisto{h.Min, h.Max, h.Num, h.Sum, h.SumSquares, h.BucketLimit, h.Bucket}
		} else {
			f := float64(v.Simple)
			jv.Simple = &f
		}
		j.Values = append(j.Values, jv)
	}
	return j
}

func sameEvents(t *testing.T, what string, got, want []jsonEvent) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// sample is a file's worth of events covering every kind Writer writes.
func sample() []Event {
	h := NewHistogram([]float64{-1.5, 0, 0.25, 2, 2, 7, math.NaN()}, 4)
	return []Event{
		{WallTime: 1764000100.5, Step: 10, Values: []Value{Scalar("loss", 1.25), Scalar("kl", 0), Scalar("elbo", -1.25),
			Scalar("lr", 1e-3), Scalar("lambda", 0.1)}},
		{WallTime: 1764000101.5, Step: 20, Values: []Value{{Tag: "omega/step0", Histo: h}, Scalar("val/accuracy", 0.875)}},
		{WallTime: 1764000102.5, Step: 21, Session: SessionStart},
		{WallTime: 1764000103.5, Step: 1 << 40, Values: []Value{Scalar("data", -3.5e-7)}},
	}
}

// writeSample writes sample() through a Writer and returns the file.
func writeSample(t *testing.T) (string, []Event) {
	t.Helper()
	now := time.Unix(1764000099, 0)
	w, err := Create(t.TempDir(), now, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	evs := sample()
	if err := w.Write(evs[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(evs[2:]...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	all := append([]Event{{WallTime: WallTime(now), FileVersion: FileVersion}}, evs...)
	return w.Path(), all
}

// TestEncodingFollowsTheProtos decodes what Writer writes with a decoder
// written field by field from TensorBoard's event.proto, summary.proto
// and histogram.proto (below), sharing nothing with Decode.
func TestEncodingFollowsTheProtos(t *testing.T) {
	path, want := writeSample(t)
	if !strings.HasPrefix(filepath.Base(path), "events.out.tfevents.1764000099.") {
		t.Errorf("file name %s", filepath.Base(path))
	}
	recs, err := tfrecord.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp []jsonEvent
	for i, rec := range recs {
		e, err := protoEvent(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		got = append(got, e)
	}
	for _, e := range want {
		exp = append(exp, asJSON(e))
	}
	sameEvents(t, "decoded by the proto definitions", got, exp)
	// And by our own reader.
	evs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, e := range evs {
		got = append(got, asJSON(e))
	}
	sameEvents(t, "Read", got, exp)
}

// TestReadsProtobufjsFixture: Read decodes what protobufjs and
// @roboflow/tfrecords wrote (testdata/gen.mjs), skipping the fields and
// value kinds mkbench does not use.
func TestReadsProtobufjsFixture(t *testing.T) {
	evs, err := Read(filepath.Join("testdata", "fixture.tfevents"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got []jsonEvent
	data, err := os.ReadFile(filepath.Join("testdata", "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		got = append(got, asJSON(e))
	}
	sameEvents(t, "fixture", got, want)
}

// TestNodeReadsOurFile has testdata/read.mjs (protobufjs on TensorBoard's
// definitions, @roboflow/tfrecords' CRC-32C) read a file Writer wrote.
// Without node it is skipped; with node but without the two packages
// (found from NODE_PATH) too, except in CI, which installs them.
func TestNodeReadsOurFile(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	probe := exec.Command(node, "-e", "require.resolve('protobufjs'); require.resolve('@roboflow/tfrecords/src/tensorFlowHelpers')")
	if out, err := probe.CombinedOutput(); err != nil {
		msg := "protobufjs or @roboflow/tfrecords not found (npm install --prefix DIR protobufjs@8.8.1 @roboflow/tfrecords@1.0.4, then NODE_PATH=DIR/node_modules): " + firstLine(string(out))
		testutil.Need(t, "%s", msg)
	}
	path, want := writeSample(t)
	out, err := exec.Command(node, filepath.Join("testdata", "read.mjs"), path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("read.mjs: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got, exp []jsonEvent
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("read.mjs printed %q: %v", out, err)
	}
	for _, e := range want {
		exp = append(exp, asJSON(e))
	}
	sameEvents(t, "read by protobufjs", got, exp)
	t.Logf("read.mjs read %d events: %s", len(got), bytes.TrimSpace(out))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// The independent decoder. Wire format: each field is a varint key
// (number<<3 | wire type) and a value: 0 varint, 1 eight bytes little
// endian, 2 varint length and bytes, 5 four bytes little endian.

type protoField struct {
	num  int
	typ  int
	u    uint64 // varint, fixed32, fixed64
	data []byte // length-delimited
}

func uvarint(b []byte) (uint64, int, error) {
	x, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, errors.New("bad varint")
	}
	return x, n, nil
}

func protoFields(b []byte) ([]protoField, error) {
	var out []protoField
	for len(b) > 0 {
		key, n, err := uvarint(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		f := protoField{num: int(key >> 3), typ: int(key & 7)}
		switch f.typ {
		case 0:
			if f.u, n, err = uvarint(b); err != nil {
				return nil, err
			}
		case 1:
			if len(b) < 8 {
				return nil, errors.New("short fixed64")
			}
			f.u, n = binary.LittleEndian.Uint64(b), 8
		case 2:
			l, m, err := uvarint(b)
			if err != nil || uint64(len(b)-m) < l {
				return nil, errors.New("bad length")
			}
			f.data, n = b[m:m+int(l)], m+int(l)
		case 5:
			if len(b) < 4 {
				return nil, errors.New("short fixed32")
			}
			f.u, n = uint64(binary.LittleEndian.Uint32(b)), 4
		default:
			return nil, errors.New("unexpected wire type")
		}
		b = b[n:]
		out = append(out, f)
	}
	return out, nil
}

// protoEvent decodes a tensorboard.Event: wall_time=1 double, step=2
// int64, file_version=3 string, summary=5 Summary, session_log=7
// SessionLog{status=1}.
func protoEvent(b []byte) (jsonEvent, error) {
	var e jsonEvent
	fs, err := protoFields(b)
	if err != nil {
		return e, err
	}
	for _, f := range fs {
		switch {
		case f.num == 1 && f.typ == 1:
			e.WallTime = math.Float64frombits(f.u)
		case f.num == 2 && f.typ == 0:
			e.Step = int64(f.u)
		case f.num == 3 && f.typ == 2:
			e.FileVersion = string(f.data)
		case f.num == 5 && f.typ == 2:
			if e.Values, err = protoSummary(f.data); err != nil {
				return e, err
			}
		case f.num == 7 && f.typ == 2:
			sl, err := protoFields(f.data)
			if err != nil {
				return e, err
			}
			for _, g := range sl {
				if g.num == 1 && g.typ == 0 {
					e.SessionStatus = int(g.u)
				}
			}
		default:
			return e, errors.New("unexpected Event field")
		}
	}
	return e, nil
}

// protoSummary decodes a Summary: value=1 repeated Value{tag=1 string,
// simple_value=2 float, histo=5 HistogramProto}.
func protoSummary(b []byte) ([]jsonValue, error) {
	fs, err := protoFields(b)
	if err != nil {
		return nil, err
	}
	var out []jsonValue
	for _, f := range fs {
		if f.num != 1 || f.typ != 2 {
			return nil, errors.New("unexpected Summary field")
		}
		vf, err := protoFields(f.data)
		if err != nil {
			return nil, err
		}
		var v jsonValue
		for _, g := range vf {
			switch {
			case g.num == 1 && g.typ == 2:
				v.Tag = string(g.data)
			case g.num == 2 && g.typ == 5:
				x := float64(math.Float32frombits(uint32(g.u)))
				v.Simple = &x
			case g.num == 5 && g.typ == 2:
				if v.Histo, err = protoHisto(g.data); err != nil {
					return nil, err
				}
			default:
				return nil, errors.New("unexpected Value field")
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// protoHisto decodes a HistogramProto: min=1, max=2, num=3, sum=4,
// sum_squares=5 doubles, bucket_limit=6 and bucket=7 packed doubles.
func protoHisto(b []byte) (*jsonHisto, error) {
	fs, err := protoFields(b)
	if err != nil {
		return nil, err
	}
	h := &jsonHisto{}
	for _, f := range fs {
		switch {
		case f.num >= 1 && f.num <= 5 && f.typ == 1:
			x := math.Float64frombits(f.u)
			*[]*float64{&h.Min, &h.Max, &h.Num, &h.Sum, &h.SumSquares}[f.num-1] = x
		case (f.num == 6 || f.num == 7) && f.typ == 2:
			if len(f.data)%8 != 0 {
				return nil, errors.New("packed doubles of a bad length")
			}
			var xs []float64
			for i := 0; i < len(f.data); i += 8 {
				xs = append(xs, math.Float64frombits(binary.LittleEndian.Uint64(f.data[i:])))
			}
			if f.num == 6 {
				h.BucketLimit = xs
			} else {
				h.Bucket = xs
			}
		default:
			return nil, errors.New("unexpected HistogramProto field")
		}
	}
	return h, nil
}
