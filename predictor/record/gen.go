package record

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
)

// generator fills chunks with seeded synthetic data of each class.
type generator struct {
	rng  *rand.Rand
	line []byte
}

func newGenerator(rng *rand.Rand) *generator { return &generator{rng: rng} }

// fill overwrites b with data of class c:
//
//   - float32: little-endian float32 gradients ~ N(0, 0.01²);
//   - sparse: float32, 95 % exact zeros, the rest ~ N(0, 0.01²);
//   - int8: gradients quantized to int8, round(N(0, 1)·20) clamped to ±127;
//   - text: log records "2026-11-29T17:04:05.123Z INFO worker=3 step=812 loss=0.4123 lr=0.01 msg=...";
//   - random: uniform random bytes (stands for already-compressed data).
//
// The distributions are ours: they are chosen to span the range of
// compressibility of parameter-server traffic, not measured from a system.
func (g *generator) fill(b []byte, c int) {
	r := g.rng
	switch c {
	case ClassFloat32:
		for i := 0; i+4 <= len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.NormFloat64()*0.01)))
		}
	case ClassSparse:
		for i := 0; i+4 <= len(b); i += 4 {
			v := float32(0)
			if r.IntN(20) == 0 {
				v = float32(r.NormFloat64() * 0.01)
			}
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
		}
	case ClassInt8:
		for i := range b {
			q := math.Round(r.NormFloat64() * 20)
			b[i] = byte(int8(max(-127, min(127, q))))
		}
	case ClassText:
		g.text(b)
	default:
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], r.Uint64())
		}
	}
}

var (
	levels = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	msgs   = []string{
		"pushed gradients to server", "pulled parameters", "clock advanced",
		"straggler detected, transferring samples", "checkpoint written",
		"connection reset by peer, reconnecting", "barrier reached",
	}
)

func (g *generator) text(b []byte) {
	r := g.rng
	n := 0
	for n < len(b) {
		l := g.line[:0]
		l = append(l, "2026-11-29T17:"...)
		l = appendPad(l, r.IntN(60))
		l = append(l, ':')
		l = appendPad(l, r.IntN(60))
		l = append(l, '.')
		l = strconv.AppendInt(l, int64(100+r.IntN(900)), 10)
		l = append(l, "Z "...)
		l = append(l, levels[r.IntN(len(levels))]...)
		l = append(l, " worker="...)
		l = strconv.AppendInt(l, int64(r.IntN(16)), 10)
		l = append(l, " step="...)
		l = strconv.AppendInt(l, int64(r.IntN(100000)), 10)
		l = append(l, " loss="...)
		l = strconv.AppendFloat(l, r.Float64()*2, 'f', 4, 64)
		l = append(l, " lr=0.01 msg=\""...)
		l = append(l, msgs[r.IntN(len(msgs))]...)
		l = append(l, "\"\n"...)
		g.line = l
		n += copy(b[n:], l)
	}
}

func appendPad(b []byte, v int) []byte {
	if v < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(v), 10)
}
