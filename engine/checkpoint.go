package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
)

const checkpointVersion = 2

// Checkpoint is everything needed to continue a run exactly where it
// stopped, or to evaluate it: parameters, optimizer moments, the carried
// LSTM context and the partial metrics window. Random streams are derived
// from (seed, iteration), so no RNG state is needed. Buffers is the
// model's non-trainable state, a ResNet ψ's batch-norm running statistics
// (bnBuffers): empty for other models and in checkpoints written before it
// existed, which decode unchanged.
type Checkpoint struct {
	Version      int
	Preset       string
	Source       string
	Config       Config
	Iter         int
	Params       []*Param
	Buffers      []*Param // non-trainable state (see below)
	Optimizer    *Optimizer
	State        LSTMState
	Window       window
	TrainSeconds float64
	// Best validation so far (see Config.ValEvery): its metric and
	// iteration; BestIter 0 means none yet. BestEval is that validation
	// in full (nil in checkpoints of version 1).
	BestVal  float64
	BestIter int
	BestEval *EvalResult
	// Last is the statistics of step Iter, and MsPerIter the training
	// time per iteration of the process that wrote the checkpoint, so a
	// run resumed into its final evaluation reports them truly.
	Last      StepStats
	MsPerIter float64
	// Device is the device that computed the checkpoint's last steps
	// (DeviceLabel's form), "" for the CPU: left empty there so that a CPU
	// run's checkpoint is what it was before devices. A resume on another
	// device says its bytes differ from there on (DeviceChangeNote).
	Device string

	unverified bool // read from a file without checksum (format 1)
}

// Unverified reports whether c was read from a checkpoint file written
// before checksums (format 1), whose damage cannot be detected.
func (c *Checkpoint) Unverified() bool { return c.unverified }

func newCheckpoint(preset, source string, m *Model, opt *Optimizer, iter int, win window, trainSec float64) *Checkpoint {
	return &Checkpoint{Version: checkpointVersion, Preset: preset, Source: source, Config: m.Cfg, Iter: iter,
		Params: m.Params.List, Buffers: bnBuffers(m.Cfg.ResNet, m.BN), Optimizer: opt, State: m.State, Window: win, TrainSeconds: trainSec,
		Device: checkpointDevice(m)}
}

// checkpointDevice is Checkpoint.Device for a checkpoint of m.
func checkpointDevice(m *Model) string {
	if d := m.Device(); d != CPU {
		return d
	}
	return ""
}

// The checkpoint file format (checkpoint.gob, best.gob): a 24-byte header,
// then the gob encoding of a Checkpoint.
//
//	offset  size  content
//	0       8     magic "MKBCKPT\n"
//	8       4     format version, big-endian (checkpointFormat)
//	12      8     payload length in bytes, big-endian
//	20      4     CRC-32C (Castagnoli) of the payload, big-endian
//	24      …     payload: gob of Checkpoint
//
// Every load verifies the magic, version, length and checksum before
// decoding, so a damaged file is refused instead of silently changing a
// run. Files without the header, written by mkbench before format 2, hold
// a bare gob of a version-1 Checkpoint; they are still read, so earlier
// runs stay usable, but cannot be verified (Unverified), which every caller
// says; the next save of the run writes format 2.
const (
	checkpointMagic  = "MKBCKPT\n"
	checkpointFormat = 2
	checkpointHeader = 24
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encodeCheckpointFile frames a gob payload with the checksum header.
func encodeCheckpointFile(payload []byte) []byte {
	out := make([]byte, checkpointHeader, checkpointHeader+len(payload))
	copy(out, checkpointMagic)
	binary.BigEndian.PutUint32(out[8:], checkpointFormat)
	binary.BigEndian.PutUint64(out[12:], uint64(len(payload)))
	binary.BigEndian.PutUint32(out[20:], crc32.Checksum(payload, crc32c))
	return append(out, payload...)
}

// checkpointPayload verifies a checkpoint file's header and checksum and
// returns its payload; the error says what is wrong, without the path.
func checkpointPayload(data []byte) ([]byte, error) {
	if len(data) < checkpointHeader {
		if bytes.HasPrefix([]byte(checkpointMagic), data) || bytes.HasPrefix(data, []byte(checkpointMagic[:4])) {
			return nil, fmt.Errorf("it is truncated (%d bytes, shorter than its %d-byte header)", len(data), checkpointHeader)
		}
		return nil, fmt.Errorf("it is not an mkbench checkpoint (%d bytes, no checksum header)", len(data))
	}
	if string(data[:8]) != checkpointMagic {
		return nil, errors.New("its header is not mkbench's (damaged, or written by an mkbench older than checkpoint format 2, which cannot be verified)")
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != checkpointFormat {
		return nil, fmt.Errorf("its format version is %d, this mkbench reads format %d (damaged or written by another mkbench)", v, checkpointFormat)
	}
	n := binary.BigEndian.Uint64(data[12:])
	payload := data[checkpointHeader:]
	if n != uint64(len(payload)) {
		return nil, fmt.Errorf("its header says %d bytes of content but it holds %d (truncated or damaged)", n, len(payload))
	}
	if want, got := binary.BigEndian.Uint32(data[20:]), crc32.Checksum(payload, crc32c); want != got {
		return nil, fmt.Errorf("its checksum does not match (stored %08x, content %08x): the file is damaged", want, got)
	}
	return payload, nil
}

// Save writes the checkpoint atomically: to a temporary file in the same
// directory, synced, read back and verified, then renamed over the old
// one, so a crash mid-write or a bad write leaves the previous checkpoint
// intact.
func (c *Checkpoint) Save(path string) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(c); err != nil {
		return fmt.Errorf("engine: encoding checkpoint: %w", err)
	}
	data := encodeCheckpointFile(buf.Bytes())
	return runfile.WriteAtomicChecked(path, data, runfile.Private, func(back []byte) error {
		if !bytes.Equal(back, data) {
			return errors.New("the file read back differs from what was written")
		}
		return nil
	})
}

// ErrBadCheckpoint reports an unreadable or inconsistent checkpoint.
var ErrBadCheckpoint = errors.New("engine: bad checkpoint")

// damagedAdvice is what to do about a damaged checkpoint file.
func damagedAdvice(path string) string {
	switch filepath.Base(path) {
	case FileBest:
		return "delete it (or resume with --repair, which moves it aside) and it is rebuilt from the next validation; evaluate the last checkpoint instead meanwhile"
	case FileCheckpoint:
		return "it cannot be resumed from; best.gob, if the run has one, still holds the best-validation parameters for evaluation; to train again, start a new run (delete the directory or choose another --out)"
	}
	return "it cannot be used"
}

// LoadCheckpoint reads, verifies (header and checksum) and sanity-checks
// a checkpoint file. Every error names the file.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	data, err := readCheckpointFile(path)
	if err != nil {
		return nil, err
	}
	var c Checkpoint
	payload, err := checkpointPayload(data)
	if err != nil {
		// A file of format 1 is a bare gob of a version-1 checkpoint.
		if lerr := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); lerr != nil || c.Version != 1 {
			return nil, fmt.Errorf("%w: %s is damaged: %v; %s", ErrBadCheckpoint, path, err, damagedAdvice(path))
		}
		c.unverified = true
	} else {
		if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&c); err != nil {
			return nil, fmt.Errorf("%w: %s cannot be decoded (%v); %s", ErrBadCheckpoint, path, err, damagedAdvice(path))
		}
		if c.Version != checkpointVersion {
			return nil, fmt.Errorf("%w: %s has version %d, this mkbench reads version %d", ErrBadCheckpoint, path, c.Version, checkpointVersion)
		}
	}
	if err := c.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadCheckpoint, path, err)
	}
	if c.Iter < 0 || c.Optimizer == nil {
		return nil, fmt.Errorf("%w: %s is incomplete", ErrBadCheckpoint, path)
	}
	if err := c.checkShapes(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v; %s", ErrBadCheckpoint, path, err, damagedAdvice(path))
	}
	return &c, nil
}

// maxCheckpointFile bounds a checkpoint file: encoding/gob refuses a
// message of 8 GiB or more on 64-bit machines (its tooBig), so no larger
// checkpoint could ever have been written or be decoded.
const maxCheckpointFile = 8 << 30

// readCheckpointFile reads a checkpoint file whole after checking its size
// against what reading it would take: past maxCheckpointFile, or (with a
// format-2 header) a payload length other than the file's, or more than
// the machine has available (decoding holds three times the file: its
// bytes, encoding/gob's copy of the message, the values decoded), it is
// refused before its bytes are read.
func readCheckpointFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("engine: no checkpoint at %s: is this a run directory made by mkbench run?", path)
		}
		return nil, fmt.Errorf("engine: reading checkpoint %s: %w", path, err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrBadCheckpoint, path)
	}
	if size > maxCheckpointFile {
		return nil, fmt.Errorf("%w: %s is %s, more than any checkpoint can hold (%s): it is damaged or not a checkpoint; %s",
			ErrBadCheckpoint, path, runfile.Size(size), runfile.Size(maxCheckpointFile), damagedAdvice(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine: reading checkpoint %s: %w", path, err)
	}
	var head [checkpointHeader]byte
	n, _ := io.ReadFull(f, head[:])
	f.Close()
	if n == checkpointHeader && string(head[:8]) == checkpointMagic {
		if claim := binary.BigEndian.Uint64(head[12:]); claim != uint64(size-checkpointHeader) {
			return nil, fmt.Errorf("%w: %s is damaged: its header says %d bytes of content but it holds %d (truncated or damaged); %s",
				ErrBadCheckpoint, path, claim, size-checkpointHeader, damagedAdvice(path))
		}
	}
	// A small file cannot strain the machine: its memory is asked (a read
	// of /proc) only for a large one.
	if size > 64<<20 {
		if avail := MachineMemory(); avail > 0 && uint64(size) > avail/3 {
			return nil, fmt.Errorf("engine: %s is %s: reading it needs about %s, more than the %s this machine has available",
				path, runfile.Size(size), runfile.Size(3*size), runfile.Size(int64(min(avail, math.MaxInt64))))
		}
	}
	data, err := runfile.ReadBounded(path, maxCheckpointFile)
	if err != nil {
		return nil, fmt.Errorf("engine: reading checkpoint %s: %w", path, err)
	}
	return data, nil
}

// checkShapes checks what a decoded checkpoint's sizes claim against what
// it holds: each tensor's shape against its values (by division, so no
// product overflows), the optimizer's moments against the parameters.
func (c *Checkpoint) checkShapes() error {
	for _, group := range []struct {
		what string
		ps   []*Param
	}{{"parameter", c.Params}, {"buffer", c.Buffers}} {
		for i, p := range group.ps {
			if p == nil {
				return fmt.Errorf("%s %d is missing", group.what, i)
			}
			if n, ok := shapeSize(p.Shape, len(p.Data)); !ok || n != len(p.Data) {
				return fmt.Errorf("%s %s has shape %v but %d values", group.what, p.Name, p.Shape, len(p.Data))
			}
		}
	}
	o := c.Optimizer
	if len(o.M) != len(c.Params) || o.Kind == "adam" && len(o.V) != len(c.Params) {
		return fmt.Errorf("optimizer state holds %d tensors, the model %d", len(o.M), len(c.Params))
	}
	for i, p := range c.Params {
		if len(o.M[i]) != len(p.Data) || o.Kind == "adam" && len(o.V[i]) != len(p.Data) {
			return fmt.Errorf("optimizer state of %s does not match it", p.Name)
		}
	}
	return nil
}

// restore loads the checkpoint's parameters, optimizer and context into a
// model built from the same configuration.
func (c *Checkpoint) restore(m *Model, opt *Optimizer) error {
	// The host's values are replaced: a device holding the backbone's
	// takes them up at the next training step. What it held comes down
	// first, so that the optimizer that was training keeps its moments.
	if err := m.hostChanged(); err != nil {
		return err
	}
	if err := m.Params.CopyFrom(c.Params); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if len(c.Optimizer.M) != len(m.Params.List) {
		return fmt.Errorf("%w: optimizer state does not match the model", ErrBadCheckpoint)
	}
	for i, p := range m.Params.List {
		if len(c.Optimizer.M[i]) != p.Size() || (c.Optimizer.Kind == "adam" && len(c.Optimizer.V[i]) != p.Size()) {
			return fmt.Errorf("%w: optimizer state of %s does not match the model", ErrBadCheckpoint, p.Name)
		}
	}
	bufs := bnBuffers(m.Cfg.ResNet, m.BN)
	if len(c.Buffers) != len(bufs) {
		return fmt.Errorf("%w: checkpoint has %d non-trainable tensors, model has %d", ErrBadCheckpoint, len(c.Buffers), len(bufs))
	}
	for i, b := range bufs {
		if c.Buffers[i] == nil || c.Buffers[i].Name != b.Name || len(c.Buffers[i].Data) != len(b.Data) {
			return fmt.Errorf("%w: checkpoint's non-trainable tensor %d does not match the model's %s[%d]", ErrBadCheckpoint, i, b.Name, len(b.Data))
		}
	}
	for i, b := range bufs {
		copy(b.Data, c.Buffers[i].Data)
	}
	*opt = *c.Optimizer
	for k := 0; k < 2; k++ {
		if len(c.State.H[k]) != len(m.State.H[k]) || len(c.State.C[k]) != len(m.State.C[k]) {
			return fmt.Errorf("%w: context state does not match the model", ErrBadCheckpoint)
		}
	}
	m.State = c.State.clone()
	return nil
}

// Model rebuilds the checkpoint's model on its task family src.
func (c *Checkpoint) Model(src task.Source) (*Model, error) {
	if c.Source != src.Name() {
		return nil, fmt.Errorf("%w: trained on %q, not %q", ErrBadCheckpoint, c.Source, src.Name())
	}
	m, err := NewModel(c.Config, src)
	if err != nil {
		return nil, err
	}
	if err := c.restore(m, NewOptimizer(c.Config, m.Params.List)); err != nil {
		return nil, err
	}
	return m, nil
}

// LoadEvalCheckpoint loads the checkpoint a run directory's evaluation
// tests, refusing one whose values are not finite (a
// *NonFiniteParamError): best.gob (which = "best") when the run validated, else
// checkpoint.gob ("last"). note, when not empty, says why the choice is
// not the one summary.json made: best.gob is missing, so the last
// checkpoint stands in and the number will differ. A damaged file is an
// error naming it, never a silent fallback. Hold LockRunToRead while using it.
func LoadEvalCheckpoint(dir string) (ck *Checkpoint, which, note string, err error) {
	bestPath, lastPath := filepath.Join(dir, FileBest), filepath.Join(dir, FileCheckpoint)
	if _, serr := os.Stat(bestPath); serr == nil {
		ck, err := LoadCheckpoint(bestPath)
		if err != nil {
			return nil, "", "", err
		}
		if err := ck.checkFinite(bestPath, ErrBadCheckpoint); err != nil {
			return nil, "", "", err
		}
		return ck, "best", unverifiedNote(ck, bestPath), nil
	}
	ck, err = LoadCheckpoint(lastPath)
	if err != nil {
		return nil, "", "", err
	}
	// A diverged run's last checkpoint may hold NaN and still be its
	// record; it is refused here, where its parameters are to be used.
	if err := ck.checkFinite(lastPath, ErrBadCheckpoint); err != nil {
		return nil, "", "", err
	}
	note = unverifiedNote(ck, lastPath)
	if ck.BestIter > 0 || ck.Config.ValEvery > 0 && ck.Iter >= ck.Config.ValEvery {
		if note != "" {
			note += "; "
		}
		note += fmt.Sprintf("%s is missing: evaluating the last checkpoint (iteration %d) instead of the best validation's", bestPath, ck.Iter)
		if ck.BestIter > 0 {
			note += fmt.Sprintf(" (iteration %d)", ck.BestIter)
		}
		note += ", so the number differs from the run's summary.json"
	}
	return ck, "last", note, nil
}

// unverifiedNote is the note for a checkpoint read without a checksum, or
// "" for a verified one.
func unverifiedNote(ck *Checkpoint, path string) string {
	if !ck.Unverified() {
		return ""
	}
	return fmt.Sprintf("%s was written by an mkbench without checkpoint checksums, so damage to it cannot be detected", path)
}
