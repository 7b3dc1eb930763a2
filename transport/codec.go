package transport

import (
	"fmt"
	"sync"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// Ratio bounds used to refuse a declared decoded length before allocating.
//
// An LZ4 block can expand at most about 255 bytes per input byte (each
// extra match-length byte adds 255); snappy at most 64 bytes per 3-byte copy
// element (about 21.4x). The bounds below are those expansion limits rounded
// up with slack for tiny inputs; they are ours, not from either format's
// specification, and only serve to reject absurd headers early. Output that
// passes them is still checked byte-exactly by the decoder.
const (
	lz4MaxRatio    = 256
	snappyMaxRatio = 32
	ratioSlack     = 64
)

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// Valid reports whether c is a codec this package knows.
func (c Codec) Valid() bool { return c <= CodecSnappy }

// MaxCompressedLen returns the largest size that Compress can produce for n
// input bytes with codec c (0 for an unknown codec).
func MaxCompressedLen(c Codec, n int) int {
	switch c {
	case CodecNone:
		return n
	case CodecLZ4:
		return lz4.CompressBlockBound(n)
	case CodecSnappy:
		return snappy.MaxEncodedLen(n)
	}
	return 0
}

// Compress appends src encoded with codec c to dst and returns the extended
// slice. CodecLZ4 produces a raw LZ4 block (no frame, no length: the decoded
// length travels beside it, see Decompress); CodecSnappy produces a snappy
// block, which carries its decoded length as a varint prefix. The output may
// be larger than src for incompressible input; transports then send the raw
// bytes with CodecNone instead.
func Compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecLZ4:
		bound := lz4.CompressBlockBound(len(src))
		dst = grow(dst, bound)
		out := dst[len(dst) : len(dst)+bound]
		comp := lz4Compressors.Get().(*lz4.Compressor)
		n, err := comp.CompressBlock(src, out)
		lz4Compressors.Put(comp)
		if err != nil {
			return dst, fmt.Errorf("transport: lz4 compress: %w", err)
		}
		if n == 0 && len(src) > 0 {
			// Cannot happen with a buffer of CompressBlockBound bytes; kept
			// so a library change never yields a silently empty body.
			return dst, fmt.Errorf("transport: lz4 compress: no output for %d bytes", len(src))
		}
		return dst[:len(dst)+n], nil
	case CodecSnappy:
		bound := snappy.MaxEncodedLen(len(src))
		if bound < 0 {
			return dst, fmt.Errorf("%w: %d bytes is too large for snappy", ErrFrameTooLarge, len(src))
		}
		dst = grow(dst, bound)
		out := snappy.Encode(dst[len(dst):len(dst)+bound], src)
		return dst[:len(dst)+len(out)], nil
	}
	return dst, fmt.Errorf("transport: unknown codec %d", uint8(c))
}

// Decompress appends the decoding of src (produced by Compress with codec c)
// to dst and returns the extended slice. rawLen is the decoded length the
// sender declared and maxLen the largest decoded length the caller accepts.
//
// It refuses, before allocating anything, a rawLen above maxLen
// (ErrFrameTooLarge) and a rawLen that src could not possibly expand to
// (ErrCorruptFrame); it refuses any src that does not decode to exactly
// rawLen bytes (ErrCorruptFrame). It never allocates more than rawLen bytes
// beyond dst's capacity.
func Decompress(dst []byte, c Codec, src []byte, rawLen, maxLen int) ([]byte, error) {
	if err := checkDecodedLen(c, len(src), rawLen, maxLen); err != nil {
		return dst, err
	}
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecLZ4:
		if rawLen == 0 {
			if len(src) > 1 {
				return dst, fmt.Errorf("%w: lz4 body of %d bytes for empty message", ErrCorruptFrame, len(src))
			}
			return dst, nil
		}
		dst = grow(dst, rawLen)
		out := dst[len(dst) : len(dst)+rawLen]
		n, err := lz4.UncompressBlock(src, out)
		if err != nil {
			return dst, fmt.Errorf("%w: lz4: %v", ErrCorruptFrame, err)
		}
		if n != rawLen {
			return dst, fmt.Errorf("%w: lz4 decoded %d bytes, header says %d", ErrCorruptFrame, n, rawLen)
		}
		return dst[:len(dst)+n], nil
	case CodecSnappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return dst, fmt.Errorf("%w: snappy: %v", ErrCorruptFrame, err)
		}
		if n != rawLen {
			return dst, fmt.Errorf("%w: snappy block says %d bytes, header says %d", ErrCorruptFrame, n, rawLen)
		}
		dst = grow(dst, rawLen)
		out, err := snappy.Decode(dst[len(dst):len(dst)+rawLen], src)
		if err != nil {
			return dst, fmt.Errorf("%w: snappy: %v", ErrCorruptFrame, err)
		}
		if len(out) != rawLen {
			return dst, fmt.Errorf("%w: snappy decoded %d bytes, header says %d", ErrCorruptFrame, len(out), rawLen)
		}
		return dst[:len(dst)+rawLen], nil
	}
	return dst, fmt.Errorf("%w: unknown codec %d", ErrCorruptFrame, uint8(c))
}

// checkDecodedLen refuses a declared decoded length that exceeds maxLen
// (ErrFrameTooLarge) or that srcLen bytes of codec c cannot produce
// (ErrCorruptFrame). It is cheap and allocates nothing, so callers run it
// before allocating the output.
func checkDecodedLen(c Codec, srcLen, rawLen, maxLen int) error {
	if rawLen < 0 {
		return fmt.Errorf("%w: negative decoded length %d", ErrCorruptFrame, rawLen)
	}
	if rawLen > maxLen {
		return fmt.Errorf("%w: decoded length %d exceeds maximum %d", ErrFrameTooLarge, rawLen, maxLen)
	}
	switch c {
	case CodecNone:
		if srcLen != rawLen {
			return fmt.Errorf("%w: body has %d bytes, header says %d", ErrCorruptFrame, srcLen, rawLen)
		}
	case CodecLZ4:
		if rawLen > lz4MaxRatio*srcLen+ratioSlack {
			return fmt.Errorf("%w: %d lz4 bytes cannot decode to %d", ErrCorruptFrame, srcLen, rawLen)
		}
	case CodecSnappy:
		if rawLen > snappyMaxRatio*srcLen+ratioSlack {
			return fmt.Errorf("%w: %d snappy bytes cannot decode to %d", ErrCorruptFrame, srcLen, rawLen)
		}
	default:
		return fmt.Errorf("%w: unknown codec %d", ErrCorruptFrame, uint8(c))
	}
	return nil
}

// grow returns dst with room for at least n more bytes after len(dst).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	nd := make([]byte, len(dst), len(dst)+n)
	copy(nd, dst)
	return nd
}
