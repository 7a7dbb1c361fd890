package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/mkbench/mkbench/internal/runfile"
)

// A model file holds a trained model compactly, for shipping: its
// parameters, batch-norm statistics and carried context in float32, with
// its configuration and what the run that made it measured, and no
// optimizer state. It reads back as a Checkpoint (ReadModelFile), so
// everything that evaluates a run evaluates a model file.
//
//	offset  size  content
//	0       8     magic "MKBMODEL"
//	8       4     format version, big-endian (modelFileFormat)
//	12      4     header length n, big-endian
//	16      n     header: JSON of modelHeader
//	16+n    4·k   the tensors' values, float32 little-endian, in the
//	              header's order: parameters, buffers, then the context
//	              state (H then C of each direction)
//	end−32  32    SHA-256 of everything before it
const (
	modelFileMagic  = "MKBMODEL"
	modelFileFormat = 1
)

// maxModelHeader bounds a model file's JSON header: a model's config and
// its tensors' names and shapes take a few kilobytes; the ceiling is that
// of every small JSON file mkbench reads back.
const maxModelHeader = runfile.MaxSmallJSON

// ErrBadModelFile is matched by every error about a model file's bytes.
var ErrBadModelFile = errors.New("engine: model file is damaged")

// modelHeader is a model file's description of itself.
type modelHeader struct {
	Preset       string      `json:"preset"`
	Source       string      `json:"source"`
	Config       Config      `json:"config"`
	Iter         int         `json:"iter"`
	TrainSeconds float64     `json:"train_seconds"`
	BestIter     int         `json:"best_iter"`
	BestEval     *EvalResult `json:"best_val,omitempty"`
	Params       []tensorDef `json:"params"`
	Buffers      []tensorDef `json:"buffers,omitempty"`
	State        [2][2]int   `json:"state"` // lengths of H and C per direction
}

type tensorDef struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// ModelFile encodes ck's model (its parameters rounded to float32).
func ModelFile(ck *Checkpoint) []byte {
	h := modelHeader{Preset: ck.Preset, Source: ck.Source, Config: ck.Config, Iter: ck.Iter, TrainSeconds: ck.TrainSeconds,
		BestIter: ck.BestIter, BestEval: ck.BestEval}
	var vals [][]float64
	for _, p := range ck.Params {
		h.Params = append(h.Params, tensorDef{p.Name, p.Shape})
		vals = append(vals, p.Data)
	}
	for _, p := range ck.Buffers {
		h.Buffers = append(h.Buffers, tensorDef{p.Name, p.Shape})
		vals = append(vals, p.Data)
	}
	for k := 0; k < 2; k++ {
		h.State[k] = [2]int{len(ck.State.H[k]), len(ck.State.C[k])}
		vals = append(vals, ck.State.H[k], ck.State.C[k])
	}
	js, err := json.Marshal(h)
	if err != nil {
		panic(err) // a Config always encodes
	}
	var b bytes.Buffer
	b.WriteString(modelFileMagic)
	binary.Write(&b, binary.BigEndian, uint32(modelFileFormat))
	binary.Write(&b, binary.BigEndian, uint32(len(js)))
	b.Write(js)
	var w [4]byte
	for _, v := range vals {
		for _, x := range v {
			binary.LittleEndian.PutUint32(w[:], math.Float32bits(float32(x)))
			b.Write(w[:])
		}
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// ReadModelFile decodes a model file into a Checkpoint at its iteration,
// with a fresh optimizer: what evaluation and display need. name labels
// errors. Every damage is an error matching ErrBadModelFile.
func ReadModelFile(data []byte, name string) (*Checkpoint, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadModelFile, name, fmt.Sprintf(format, args...))
	}
	if len(data) < 16+sha256.Size || string(data[:8]) != modelFileMagic {
		return nil, bad("not an mkbench model file")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, bad("checksum mismatch (the file is cut short or changed)")
	}
	if v := binary.BigEndian.Uint32(body[8:]); v != modelFileFormat {
		return nil, bad("format %d, this build reads %d", v, modelFileFormat)
	}
	// Every length below is compared with what the file still holds by
	// division, never by multiplying it out: a length of 2⁶² times 4
	// overflows to a small number that would pass.
	n := uint64(binary.BigEndian.Uint32(body[12:]))
	if n > uint64(len(body)-16) || n > maxModelHeader {
		return nil, bad("header of %d bytes in a file of %d (a header holds at most %d)", n, len(data), maxModelHeader)
	}
	var h modelHeader
	if err := json.Unmarshal(body[16:16+n], &h); err != nil {
		return nil, bad("header: %v", err)
	}
	if err := h.Config.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	vals := body[16+n:]
	take := func(what string, k int) ([]float64, error) {
		if k < 0 || k > len(vals)/4 {
			return nil, bad("%s claims %d values, the file holds %d more", what, k, len(vals)/4)
		}
		out := make([]float64, k)
		for i := range out {
			f := math.Float32frombits(binary.LittleEndian.Uint32(vals[4*i:]))
			if x := float64(f); math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, &NonFiniteParamError{File: name, Tensor: what, Value: x, kind: ErrBadModelFile}
			}
			out[i] = float64(f)
		}
		vals = vals[4*k:]
		return out, nil
	}
	tensors := func(kind string, defs []tensorDef) ([]*Param, error) {
		var ps []*Param
		for _, d := range defs {
			size, ok := shapeSize(d.Shape, len(vals)/4)
			if !ok {
				return nil, bad("%s %s has shape %v, more values than the file holds (%d)", kind, d.Name, d.Shape, len(vals)/4)
			}
			v, err := take(kind+" "+d.Name, size)
			if err != nil {
				return nil, err
			}
			ps = append(ps, &Param{Name: d.Name, Shape: d.Shape, Data: v})
		}
		return ps, nil
	}
	ck := &Checkpoint{Version: checkpointVersion, Preset: h.Preset, Source: h.Source, Config: h.Config, Iter: h.Iter,
		TrainSeconds: h.TrainSeconds, BestIter: h.BestIter, BestEval: h.BestEval}
	var err error
	if ck.Params, err = tensors("parameter", h.Params); err != nil {
		return nil, err
	}
	if ck.Buffers, err = tensors("buffer", h.Buffers); err != nil {
		return nil, err
	}
	for k := 0; k < 2; k++ {
		for j, dst := range []*[]float64{&ck.State.H[k], &ck.State.C[k]} {
			if *dst, err = take(fmt.Sprintf("context state %s[%d]", "HC"[j:j+1], k), h.State[k][j]); err != nil {
				return nil, err
			}
		}
	}
	if len(vals) != 0 {
		return nil, bad("%d bytes after the values", len(vals))
	}
	ck.Optimizer = NewOptimizer(ck.Config, ck.Params)
	return ck, nil
}

// shapeSize is the number of values of a tensor of shape, when it is at
// most limit; false for a negative side or a product past limit, found
// without overflow (each side is compared with limit divided by the
// product so far).
func shapeSize(shape []int, limit int) (int, bool) {
	size := 1
	for _, s := range shape {
		if s < 0 {
			return 0, false
		}
		if s == 0 {
			size = 0
			continue
		}
		if size > limit/s {
			return 0, false
		}
		size *= s
	}
	return size, size <= limit
}
