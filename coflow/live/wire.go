package live

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/falconml/falcon/transport"
)

// Wire format of every message between agents and the coordinator, and
// between agents. A message is
//
//	version (1 byte, wireVersion) | type (1 byte) | body
//
// integers big-endian, floats as IEEE-754 bits in a uint64, names as a
// 1-byte length and the bytes. A list is a uint32 count and its entries;
// a decoder checks the count against its bound and against the bytes left
// (count × the entry's minimum size) before allocating, and refuses
// trailing bytes. Bodies:
//
//	hello      agent → coordinator request: empty
//	welcome    response: port (u32) | names: count (u32), name...
//	register   agent → coordinator request: weight (f64) | flows: count,
//	           src (u32) dst (u32) bytes (u64) class (u32) each
//	registered response: coflow id (u64)
//	unregister agent → coordinator request: coflow id (u64)
//	report     agent → coordinator request: progress: count, coflow (u64)
//	           flow (u32) acked raw bytes (u64) wire bytes (u64) each |
//	           measurements: count, class (u32) codec kind (u8) compressed
//	           raw (u64) compressed out (u64) compress ns (u64) decompressed
//	           raw (u64) decompress ns (u64) each
//	push       coordinator → agent request: epoch (u64) | flows: count,
//	           coflow (u64) flow (u32) src (u32) dst (u32) bytes (u64) class
//	           (u32) rate (f64) codec kind (u8) send cores (f64) recv cores
//	           (f64) each | failed: count, coflow (u64) reason (u8) node
//	           (name) each | gone: count, coflow (u64) each
//	chunk      agent → agent request: coflow (u64) flow (u32) class (u32)
//	           offset (u64) flow bytes (u64) codec kind (u8) raw length
//	           (u32) | payload (the rest)
//	ok         response: empty
const wireVersion = 1

// Message types.
const (
	tHello byte = iota + 1
	tWelcome
	tRegister
	tRegistered
	tUnregister
	tReport
	tPush
	tChunk
	tOK
)

// Codec kinds on the wire.
const (
	kindRaw    byte = 0
	kindLZ4    byte = 1
	kindSnappy byte = 2
)

// Failure reasons in a push.
const (
	reasonAgentDead byte = 1
	reasonBadAlloc  byte = 2
)

type wireFlow struct {
	Src, Dst uint32
	Bytes    uint64
	Class    uint32
}

type registerMsg struct {
	Weight float64
	Flows  []wireFlow
}

type welcomeMsg struct {
	Port  uint32
	Names []transport.NodeID
}

type progress struct {
	Coflow uint64
	Flow   uint32
	Acked  uint64
	Wire   uint64
}

type measurement struct {
	Class           uint32
	Kind            byte
	RawC, OutC, NsC uint64
	RawD, NsD       uint64
}

type reportMsg struct {
	Progress []progress
	Meas     []measurement
}

type pushFlow struct {
	Coflow               uint64
	Flow                 uint32
	Src, Dst             uint32
	Bytes                uint64
	Class                uint32
	Rate                 float64
	Kind                 byte
	SendCores, RecvCores float64
}

type failure struct {
	Coflow uint64
	Reason byte
	Node   transport.NodeID
}

type pushMsg struct {
	Epoch  uint64
	Flows  []pushFlow
	Failed []failure
	Gone   []uint64
}

type chunkMsg struct {
	Coflow  uint64
	Flow    uint32
	Class   uint32
	Offset  uint64
	Total   uint64
	Kind    byte
	RawLen  uint32
	Payload []byte // aliases the decoded buffer
}

// Entry sizes, for the count checks.
const (
	sizeFlow     = 4 + 4 + 8 + 4
	sizeProgress = 8 + 4 + 8 + 8
	sizeMeas     = 4 + 1 + 5*8
	sizePushFlow = 8 + 4 + 4 + 4 + 8 + 4 + 8 + 1 + 8 + 8
	sizeFailure  = 8 + 1 + 1
	chunkHeader  = 2 + 8 + 4 + 4 + 8 + 8 + 1 + 4
)

// --- encoding

type enc []byte

func header(t byte, n int) enc { return append(make(enc, 0, 2+n), wireVersion, t) }

func (e enc) u8(v byte) enc     { return append(e, v) }
func (e enc) u32(v uint32) enc  { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc  { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) f64(v float64) enc { return e.u64(math.Float64bits(v)) }
func (e enc) name(n transport.NodeID) enc {
	if len(n) > MaxNameBytes {
		n = n[:MaxNameBytes]
	}
	return append(e.u8(byte(len(n))), n...)
}

func encodeEmpty(t byte) []byte { return header(t, 0) }

func encodeWelcome(m welcomeMsg) []byte {
	e := header(tWelcome, 8+len(m.Names)*16).u32(m.Port).u32(uint32(len(m.Names)))
	for _, n := range m.Names {
		e = e.name(n)
	}
	return e
}

func encodeRegister(m registerMsg) []byte {
	e := header(tRegister, 12+len(m.Flows)*sizeFlow).f64(m.Weight).u32(uint32(len(m.Flows)))
	for _, f := range m.Flows {
		e = e.u32(f.Src).u32(f.Dst).u64(f.Bytes).u32(f.Class)
	}
	return e
}

func encodeID(t byte, id uint64) []byte { return header(t, 8).u64(id) }

func encodeReport(m reportMsg) []byte {
	e := header(tReport, 8+len(m.Progress)*sizeProgress+len(m.Meas)*sizeMeas).u32(uint32(len(m.Progress)))
	for _, p := range m.Progress {
		e = e.u64(p.Coflow).u32(p.Flow).u64(p.Acked).u64(p.Wire)
	}
	e = e.u32(uint32(len(m.Meas)))
	for _, x := range m.Meas {
		e = e.u32(x.Class).u8(x.Kind).u64(x.RawC).u64(x.OutC).u64(x.NsC).u64(x.RawD).u64(x.NsD)
	}
	return e
}

func encodePush(m pushMsg) []byte {
	e := header(tPush, 20+len(m.Flows)*sizePushFlow+len(m.Failed)*(sizeFailure+16)+len(m.Gone)*8).u64(m.Epoch)
	e = e.u32(uint32(len(m.Flows)))
	for _, f := range m.Flows {
		e = e.u64(f.Coflow).u32(f.Flow).u32(f.Src).u32(f.Dst).u64(f.Bytes).u32(f.Class).
			f64(f.Rate).u8(f.Kind).f64(f.SendCores).f64(f.RecvCores)
	}
	e = e.u32(uint32(len(m.Failed)))
	for _, f := range m.Failed {
		e = e.u64(f.Coflow).u8(f.Reason).name(f.Node)
	}
	e = e.u32(uint32(len(m.Gone)))
	for _, g := range m.Gone {
		e = e.u64(g)
	}
	return e
}

// chunkHead encodes a chunk's header; the payload follows it (sent as a
// second piece with transport.RequestAppendV, so it is not copied).
func chunkHead(m chunkMsg) []byte {
	return header(tChunk, chunkHeader).u64(m.Coflow).u32(m.Flow).u32(m.Class).u64(m.Offset).
		u64(m.Total).u8(m.Kind).u32(m.RawLen)
}

// --- decoding

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
	}
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("%d bytes wanted, %d left", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *dec) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *dec) name() transport.NodeID {
	n := int(d.u8())
	return transport.NodeID(d.take(n))
}

// count reads a list count and checks it against max and the bytes left,
// each entry taking at least min bytes.
func (d *dec) count(max, min int) int {
	n := d.u32()
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(max) || uint64(n)*uint64(min) > uint64(len(d.b)) {
		d.fail("list of %d entries (bound %d, %d bytes left)", n, max, len(d.b))
		return 0
	}
	return int(n)
}

func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// open checks the version and type and returns a decoder of the body.
func open(b []byte, t byte) *dec {
	d := &dec{b: b}
	if v := d.u8(); d.err == nil && v != wireVersion {
		d.fail("version %d (want %d)", v, wireVersion)
	}
	if got := d.u8(); d.err == nil && got != t {
		d.fail("type %d (want %d)", got, t)
	}
	return d
}

func msgType(b []byte) byte {
	if len(b) < 2 || b[0] != wireVersion {
		return 0
	}
	return b[1]
}

func decodeEmpty(b []byte, t byte) error { return open(b, t).end() }

func decodeID(b []byte, t byte) (uint64, error) {
	d := open(b, t)
	id := d.u64()
	return id, d.end()
}

func decodeWelcome(b []byte) (welcomeMsg, error) {
	d := open(b, tWelcome)
	var m welcomeMsg
	m.Port = d.u32()
	n := d.count(MaxPorts, 1)
	if n > 0 {
		m.Names = make([]transport.NodeID, 0, n)
	}
	for range n {
		m.Names = append(m.Names, d.name())
	}
	if d.err == nil && int(m.Port) >= len(m.Names) {
		d.fail("port %d of %d", m.Port, len(m.Names))
	}
	return m, d.end()
}

func decodeRegister(b []byte) (registerMsg, error) {
	d := open(b, tRegister)
	var m registerMsg
	m.Weight = d.f64()
	if d.err == nil && !finiteNonNeg(m.Weight) {
		d.fail("weight %v", m.Weight)
	}
	n := d.count(MaxFlowsPerCoflow, sizeFlow)
	if n > 0 {
		m.Flows = make([]wireFlow, n)
	}
	for i := range m.Flows {
		m.Flows[i] = wireFlow{Src: d.u32(), Dst: d.u32(), Bytes: d.u64(), Class: d.u32()}
	}
	return m, d.end()
}

func decodeReport(b []byte) (reportMsg, error) {
	d := open(b, tReport)
	var m reportMsg
	n := d.count(maxEntries, sizeProgress)
	if n > 0 {
		m.Progress = make([]progress, n)
	}
	for i := range m.Progress {
		m.Progress[i] = progress{Coflow: d.u64(), Flow: d.u32(), Acked: d.u64(), Wire: d.u64()}
	}
	n = d.count(maxEntries, sizeMeas)
	if n > 0 {
		m.Meas = make([]measurement, n)
	}
	for i := range m.Meas {
		m.Meas[i] = measurement{Class: d.u32(), Kind: d.u8(), RawC: d.u64(), OutC: d.u64(), NsC: d.u64(), RawD: d.u64(), NsD: d.u64()}
	}
	return m, d.end()
}

func decodePush(b []byte) (pushMsg, error) {
	d := open(b, tPush)
	var m pushMsg
	m.Epoch = d.u64()
	n := d.count(maxEntries, sizePushFlow)
	if n > 0 {
		m.Flows = make([]pushFlow, n)
	}
	for i := range m.Flows {
		m.Flows[i] = pushFlow{Coflow: d.u64(), Flow: d.u32(), Src: d.u32(), Dst: d.u32(), Bytes: d.u64(),
			Class: d.u32(), Rate: d.f64(), Kind: d.u8(), SendCores: d.f64(), RecvCores: d.f64()}
		if f := &m.Flows[i]; d.err == nil && (!finiteNonNeg(f.Rate) || !finiteNonNeg(f.SendCores) || !finiteNonNeg(f.RecvCores) || f.Kind > kindSnappy) {
			d.fail("flow %d/%d: rate %v, cores %v/%v, codec %d", f.Coflow, f.Flow, f.Rate, f.SendCores, f.RecvCores, f.Kind)
		}
	}
	n = d.count(maxEntries, sizeFailure)
	if n > 0 {
		m.Failed = make([]failure, n)
	}
	for i := range m.Failed {
		m.Failed[i] = failure{Coflow: d.u64(), Reason: d.u8(), Node: d.name()}
	}
	n = d.count(maxEntries, 8)
	if n > 0 {
		m.Gone = make([]uint64, n)
	}
	for i := range m.Gone {
		m.Gone[i] = d.u64()
	}
	return m, d.end()
}

// decodeChunk decodes a chunk; Payload aliases b.
func decodeChunk(b []byte) (chunkMsg, error) {
	d := open(b, tChunk)
	m := chunkMsg{Coflow: d.u64(), Flow: d.u32(), Class: d.u32(), Offset: d.u64(), Total: d.u64(), Kind: d.u8(), RawLen: d.u32()}
	if d.err == nil {
		switch {
		case m.Kind > kindSnappy:
			d.fail("codec %d", m.Kind)
		case m.RawLen == 0 || m.RawLen > MaxChunkBytes:
			d.fail("raw length %d (want 1..%d)", m.RawLen, MaxChunkBytes)
		case m.Offset > m.Total || uint64(m.RawLen) > m.Total-m.Offset:
			d.fail("chunk [%d, +%d) beyond the flow's %d bytes", m.Offset, m.RawLen, m.Total)
		case m.Kind == kindRaw && len(d.b) != int(m.RawLen):
			d.fail("raw chunk of %d bytes declares %d", len(d.b), m.RawLen)
		}
	}
	if d.err != nil {
		return chunkMsg{}, d.err
	}
	m.Payload = d.b
	return m, nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
