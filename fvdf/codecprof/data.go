package codecprof

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Class is a class of payload that shuffles and parameter servers move.
type Class int

// The data classes. Their generators are in [Generate].
const (
	// Float32Grad is dense float32 gradients: little-endian IEEE-754 values
	// drawn from N(0, 1e-3²). The exponents repeat, the mantissas are noise.
	Float32Grad Class = iota
	// SparseGrad is float32 gradients of which SparseZeroFraction are exactly
	// zero (dropped or untouched embedding rows), the rest as Float32Grad.
	SparseGrad
	// Int8Quant is 8-bit quantized values: round(N(0, 8²)) clipped to int8,
	// as produced by linear quantization of gradients.
	Int8Quant
	// Text is log/record text: timestamped key=value lines from a seeded
	// generator with a small vocabulary (shuffle records, logs, CSV-like).
	Text
	// Random is already-compressed (or encrypted) data: uniform random bytes.
	Random
	// GoStdlib is real text: slices of the Go standard library's source
	// tree as the Go distribution ships it ([GoSourceCorpus]).
	GoStdlib
	// TPCHRows is Spark SQL shuffle data: TPC-H lineitem rows from a
	// dbgen-like generator, serialized in Spark's UnsafeRow layout with
	// length prefixes (see genTPCHRows in tpch.go).
	TPCHRows
	// SortRecords is sort-benchmark data: 100-byte records in gensort's
	// binary layout (TeraSort's input; see genSortRecords in named.go).
	SortRecords
	// EncryptedBlocks is encrypted data: the AES-128-CTR keystream under
	// a key and IV drawn from the seed (see genEncrypted in mixdata.go).
	// CTR ciphertext of any plaintext is the plaintext XOR this
	// keystream, and AES-CTR output is indistinguishable from uniform
	// random bytes, so it stands for encrypted blocks of any content.
	EncryptedBlocks
	// CompressedGoSrc is already-compressed data from a named corpus: the
	// lz4 block output (pierrec/lz4/v4, default level) of consecutive
	// 64 KiB blocks of the Go source corpus ([GoSourceCorpus]), as a
	// shuffle of pre-compressed files or media would carry.
	CompressedGoSrc
	// ApacheLogs is web-server access logs in the Apache HTTP Server's
	// Common Log Format (httpd.apache.org/docs/2.4/logs.html, "Common Log
	// Format"): host ident authuser [date] "request" status bytes; the
	// field values come from a seeded generator (genApacheLogs).
	ApacheLogs
	numClasses
)

// SparseZeroFraction is the fraction of exact zeros in SparseGrad payloads.
// The value is ours (a typical top-k / untouched-row sparsity), not measured
// from a workload.
const SparseZeroFraction = 0.9

// Classes lists every class in declaration order.
func Classes() []Class {
	return []Class{Float32Grad, SparseGrad, Int8Quant, Text, Random, GoStdlib, TPCHRows, SortRecords, EncryptedBlocks, CompressedGoSrc, ApacheLogs}
}

var classNames = [...]string{"float32", "sparse", "int8", "text", "random", "gosrc", "tpch-rows", "gensort", "aes-ctr", "gosrc-lz4", "apache-clf"}

// String returns the class's short name, as accepted by [ParseClass].
func (c Class) String() string {
	if c >= 0 && c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ParseClass parses a class name ("float32", "sparse", "int8", "text",
// "random", "gosrc", "tpch-rows", "gensort", "aes-ctr", "gosrc-lz4",
// "apache-clf").
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownClass, s)
}

// Generate returns n bytes of class c drawn from rng. The same rng state
// gives the same bytes. It panics on an unknown class or negative n, and
// for GoStdlib when the Go source tree cannot be read ([Sample] returns an
// error instead).
func Generate(c Class, n int, rng *rand.Rand) []byte {
	if n < 0 {
		panic("codecprof: negative size")
	}
	buf := make([]byte, n)
	switch c {
	case Float32Grad, SparseGrad:
		var w [4]byte
		for i := 0; i < n; i += 4 {
			v := float32(0)
			if c == Float32Grad || rng.Float64() >= SparseZeroFraction {
				v = float32(rng.NormFloat64() * 1e-3)
			}
			binary.LittleEndian.PutUint32(w[:], math.Float32bits(v))
			copy(buf[i:], w[:])
		}
	case Int8Quant:
		for i := range buf {
			v := math.Round(rng.NormFloat64() * 8)
			v = math.Max(-128, math.Min(127, v))
			buf[i] = byte(int8(v))
		}
	case Text:
		genText(buf, rng)
	case GoStdlib:
		corpus, err := GoSourceCorpus()
		if err != nil {
			panic(err)
		}
		return sliceCorpus(corpus, n, rng)
	case TPCHRows:
		genTPCHRows(buf, rng)
	case SortRecords:
		genSortRecords(buf, rng)
	case EncryptedBlocks:
		genEncrypted(buf, rng)
	case CompressedGoSrc:
		corpus, err := compressedGoSource()
		if err != nil {
			panic(err)
		}
		return sliceCorpus(corpus, n, rng)
	case ApacheLogs:
		genApacheLogs(buf, rng)
	case Random:
		var x uint64
		for i := range buf {
			if i%8 == 0 {
				x = rng.Uint64()
			}
			buf[i] = byte(x)
			x >>= 8
		}
	default:
		panic("codecprof: unknown class " + c.String())
	}
	return buf
}

var (
	levels  = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	comps   = []string{"shuffle.fetch", "ps.push", "ps.pull", "scheduler", "mapper", "reducer", "storage.put"}
	keys    = []string{"key", "bytes", "latency_ms", "partition", "attempt", "host", "status"}
	hosts   = []string{"node-01", "node-02", "node-03", "node-04", "node-17", "node-23"}
	statusV = []string{"ok", "ok", "ok", "retry", "timeout"}
)

// genText fills buf with log lines such as
//
//	2026-11-29T17:08:43.123Z INFO ps.push host=node-03 key=8812 bytes=4096 latency_ms=3.21 status=ok
func genText(buf []byte, rng *rand.Rand) {
	line := make([]byte, 0, 160)
	ms := int64(1_700_000_000_000)
	pos := 0
	for pos < len(buf) {
		ms += int64(rng.IntN(50))
		line = line[:0]
		line = append(line, "2026-11-29T"...)
		s := (ms / 1000) % 86400
		line = append(line, fmt.Sprintf("%02d:%02d:%02d.%03dZ ", s/3600, s/60%60, s%60, ms%1000)...)
		line = append(line, levels[rng.IntN(len(levels))]...)
		line = append(line, ' ')
		line = append(line, comps[rng.IntN(len(comps))]...)
		nf := 2 + rng.IntN(4)
		for f := 0; f < nf; f++ {
			k := keys[rng.IntN(len(keys))]
			line = append(line, ' ')
			line = append(line, k...)
			line = append(line, '=')
			switch k {
			case "host":
				line = append(line, hosts[rng.IntN(len(hosts))]...)
			case "status":
				line = append(line, statusV[rng.IntN(len(statusV))]...)
			case "latency_ms":
				line = strconv.AppendFloat(line, rng.ExpFloat64()*5, 'f', 2, 64)
			default:
				line = strconv.AppendInt(line, int64(rng.IntN(100000)), 10)
			}
		}
		line = append(line, '\n')
		pos += copy(buf[pos:], line)
	}
}
