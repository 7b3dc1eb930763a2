package predictor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Model file format, version 1 (all integers and floats little-endian):
//
//	offset  size  field
//	0       8     magic "FLCNRNN\x00"
//	8       4     version (uint32) = 1
//	12      1     cell (1 = LSTM, 2 = GRU)
//	13      3     reserved, zero
//	16      4     In (uint32)
//	20      4     Hidden (uint32)
//	24      4     Out (uint32)
//	28      4     NumClasses (uint32)
//	32      8     Alpha (float64 bits)
//	40      32    Norm.Mean[0..3] (float64 bits)
//	72      32    Norm.Std[0..3] (float64 bits)
//	104     8     number of parameters P (uint64)
//	112     8·P   Params (float64 bits, in Network.Params order)
//	112+8P  4     CRC-32 (IEEE) of all preceding bytes
//
// Floats are stored as their exact bits, so a loaded network predicts
// bit-identically to the saved one.
const (
	modelMagic   = "FLCNRNN\x00"
	ModelVersion = 1 // the version Save writes and Load accepts
	headerSize   = 112
)

// Save writes n in the versioned binary format above.
func (n *Network) Save(w io.Writer) error {
	if err := n.check(); err != nil {
		return err
	}
	b := make([]byte, headerSize+8*len(n.Params)+4)
	copy(b, modelMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], ModelVersion)
	b[12] = byte(n.Cell)
	le.PutUint32(b[16:], uint32(n.In))
	le.PutUint32(b[20:], uint32(n.Hidden))
	le.PutUint32(b[24:], uint32(n.Out))
	le.PutUint32(b[28:], uint32(n.Norm.NumClasses))
	le.PutUint64(b[32:], math.Float64bits(n.Norm.Alpha))
	for k := 0; k < 4; k++ {
		le.PutUint64(b[40+8*k:], math.Float64bits(n.Norm.Mean[k]))
		le.PutUint64(b[72+8*k:], math.Float64bits(n.Norm.Std[k]))
	}
	le.PutUint64(b[104:], uint64(len(n.Params)))
	for i, v := range n.Params {
		le.PutUint64(b[headerSize+8*i:], math.Float64bits(v))
	}
	end := headerSize + 8*len(n.Params)
	le.PutUint32(b[end:], crc32.ChecksumIEEE(b[:end]))
	_, err := w.Write(b)
	return err
}

// MarshalBinary returns the Save encoding of n.
func (n *Network) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	err := n.Save(&buf)
	return buf.Bytes(), err
}

// maxModelParams bounds P so that a corrupt header cannot make Load
// allocate without limit (2^24 parameters = 128 MiB; ours).
const maxModelParams = 1 << 24

// Load reads a network written by Save. It returns an error wrapping
// ErrBadMagic if r does not start with the magic, ErrVersion for another
// format version, and ErrCorrupt for a truncated file, a checksum mismatch
// or inconsistent sizes.
func Load(r io.Reader) (*Network, error) {
	h := make([]byte, headerSize)
	if _, err := io.ReadFull(r, h[:12]); err != nil {
		return nil, fmt.Errorf("%w: reading header: %v", ErrBadMagic, err)
	}
	if string(h[:8]) != modelMagic {
		return nil, fmt.Errorf("%w: got %q", ErrBadMagic, h[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(h[8:]); v != ModelVersion {
		return nil, fmt.Errorf("%w: file has version %d, this build reads version %d", ErrVersion, v, ModelVersion)
	}
	if _, err := io.ReadFull(r, h[12:]); err != nil {
		return nil, fmt.Errorf("%w: truncated header: %v", ErrCorrupt, err)
	}
	np := le.Uint64(h[104:])
	if np > maxModelParams {
		return nil, fmt.Errorf("%w: %d parameters (limit %d)", ErrCorrupt, np, maxModelParams)
	}
	body := make([]byte, 8*np+4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("%w: truncated parameters: %v", ErrCorrupt, err)
	}
	crc := crc32.NewIEEE()
	crc.Write(h)
	crc.Write(body[:8*np])
	if got, want := le.Uint32(body[8*np:]), crc.Sum32(); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	n := &Network{Cell: Cell(h[12]), In: int(le.Uint32(h[16:])), Hidden: int(le.Uint32(h[20:])), Out: int(le.Uint32(h[24:])),
		Params: make([]float64, np)}
	n.Norm.NumClasses = int(le.Uint32(h[28:]))
	n.Norm.Alpha = math.Float64frombits(le.Uint64(h[32:]))
	for k := 0; k < 4; k++ {
		n.Norm.Mean[k] = math.Float64frombits(le.Uint64(h[40+8*k:]))
		n.Norm.Std[k] = math.Float64frombits(le.Uint64(h[72+8*k:]))
	}
	for i := range n.Params {
		n.Params[i] = math.Float64frombits(le.Uint64(body[8*i:]))
	}
	if err := n.check(); err != nil {
		return nil, err
	}
	if !(n.Norm.Alpha > 0 && n.Norm.Alpha <= 1) || n.Norm.NumClasses < 0 {
		return nil, fmt.Errorf("%w: normalisation alpha %v, classes %d", ErrCorrupt, n.Norm.Alpha, n.Norm.NumClasses)
	}
	for k := 0; k < 4; k++ {
		if !(n.Norm.Std[k] > 0) || math.IsInf(n.Norm.Std[k], 0) || math.IsNaN(n.Norm.Mean[k]) || math.IsInf(n.Norm.Mean[k], 0) {
			return nil, fmt.Errorf("%w: normalisation of feature %d: mean %v std %v", ErrCorrupt, k, n.Norm.Mean[k], n.Norm.Std[k])
		}
	}
	return n, nil
}

// UnmarshalBinary decodes data written by MarshalBinary into n.
func (n *Network) UnmarshalBinary(data []byte) error {
	r := bytes.NewReader(data)
	m, err := Load(r)
	if err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, r.Len())
	}
	*n = *m
	return nil
}
