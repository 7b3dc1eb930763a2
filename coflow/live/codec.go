package live

import (
	"fmt"
	"strings"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// codecKind maps a fabric codec's name to the codec an agent runs.
func codecKind(name string) byte {
	switch strings.ToLower(name) {
	case "lz4":
		return kindLZ4
	case "snappy":
		return kindSnappy
	}
	return kindRaw
}

// compress compresses raw with codec k into a buffer it allocates and
// reports whether the result is smaller than raw; when it is not, the chunk
// is to be sent raw (the caller still counts the attempt's ratio).
func compress(k byte, raw []byte) (out []byte, n int, smaller bool) {
	switch k {
	case kindLZ4:
		out = make([]byte, lz4.CompressBlockBound(len(raw)))
		c, err := lz4.CompressBlock(raw, out, nil)
		if err != nil || c == 0 { // 0: incompressible
			return nil, len(raw), false
		}
		return out[:c], c, c < len(raw)
	case kindSnappy:
		out = snappy.Encode(make([]byte, snappy.MaxEncodedLen(len(raw))), raw)
		return out, len(out), len(out) < len(raw)
	}
	return nil, len(raw), false
}

// decompress restores exactly len(dst) bytes of codec k from src into dst.
// It never allocates: dst is the flow's receive buffer.
func decompress(k byte, src, dst []byte) error {
	switch k {
	case kindLZ4:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil || n != len(dst) {
			return fmt.Errorf("%w: lz4 chunk gave %d of %d bytes (%v)", ErrMalformed, n, len(dst), err)
		}
		return nil
	case kindSnappy:
		n, err := snappy.DecodedLen(src)
		if err != nil || n != len(dst) {
			return fmt.Errorf("%w: snappy chunk declares %d of %d bytes (%v)", ErrMalformed, n, len(dst), err)
		}
		out, err := snappy.Decode(dst, src)
		if err != nil || len(out) != len(dst) || &out[0] != &dst[0] {
			return fmt.Errorf("%w: snappy chunk (%v)", ErrMalformed, err)
		}
		return nil
	case kindRaw:
		if len(src) != len(dst) {
			return fmt.Errorf("%w: raw chunk of %d bytes, want %d", ErrMalformed, len(src), len(dst))
		}
		copy(dst, src)
		return nil
	}
	return fmt.Errorf("%w: codec %d", ErrMalformed, k)
}
