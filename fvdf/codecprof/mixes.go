package codecprof

import (
	"fmt"
	"sort"
)

// The declared data mixes of the coflow study, all in this one file; each
// weight names its source. They were committed (2026-12-01) before any
// comparison run that uses them, and are not to be changed after seeing
// results: a change is a new, dated mix under a new name.
//
// A mix is a distribution over data classes. In the study each coflow
// (one job's shuffle) draws one class from it (coflow.AssignClasses), so a
// weight is the probability that a job moves that kind of data, and the
// class's expected share of the bytes.

// Weight is one class's share in a named mix, with where it comes from.
type Weight struct {
	Class  Class
	W      float64
	Source string
}

// NamedMix is a declared mix.
type NamedMix struct {
	Name    string
	Summary string
	Weights []Weight
}

// Mix returns the weights as a Mix.
func (n NamedMix) Mix() Mix {
	m := Mix{}
	for _, w := range n.Weights {
		m[w.Class] += w.W
	}
	return m
}

var namedMixes = []NamedMix{
	{
		Name:    "spark-sql-shuffle",
		Summary: "Spark SQL job shuffles: serialized rows, sort records and text",
		Weights: []Weight{
			{TPCHRows, 0.70, "Spark SQL shuffles UnsafeRow records (UnsafeRowSerializer); TPC-H/TPC-DS are the SQL benchmarks Spark's own shuffle-codec measurements use (apache/spark PR #32286: TPC-DS 3 TB). The 70 % share is ours (most jobs of a SQL warehouse are queries; the FB2010 trace is a Hive/MapReduce cluster)."},
			{SortRecords, 0.15, "Sort-by-key jobs (TeraSort input, gensort layout, sortbenchmark.org), the shuffle benchmark of the Hadoop and Spark example suites. The 15 % share is ours."},
			{GoStdlib, 0.15, "Text payloads (string-heavy rows, logs, JSON), as real text: the Go 1.26 source tree. The 15 % share is ours."},
		},
	},
	{
		Name:    "ml-ps",
		Summary: "parameter-server traffic of data-parallel training",
		Weights: []Weight{
			{Float32Grad, 0.60, "Dense float32 gradients and parameters (package ps pushes and pulls; measured ρ ≈ 1.00 with lz4/snappy). The 60 % share is ours."},
			{SparseGrad, 0.30, "Sparse updates (embedding rows, top-k), 90 % zeros (SparseZeroFraction). The 30 % share is ours."},
			{Int8Quant, 0.10, "8-bit quantized pushes (linear quantization). The 10 % share is ours."},
		},
	},
	{
		Name:    "shuffle",
		Summary: "the earlier protocol's blended mix (ShuffleMix), kept for comparison",
		Weights: []Weight{
			{Float32Grad, 0.30, "ShuffleMix, the 2026-11-29 protocol (ours)."},
			{SparseGrad, 0.20, "ShuffleMix, the 2026-11-29 protocol (ours)."},
			{Int8Quant, 0.10, "ShuffleMix, the 2026-11-29 protocol (ours)."},
			{Text, 0.25, "ShuffleMix, the 2026-11-29 protocol (ours); synthetic log lines."},
			{Random, 0.15, "ShuffleMix, the 2026-11-29 protocol (ours); already-compressed blobs."},
		},
	},
	{
		// Declared 2026-12-05 (issue 29), before any run that uses it.
		Name:    "media-logs",
		Summary: "encrypted and already-compressed blocks beside highly compressible access logs",
		Weights: []Weight{
			{EncryptedBlocks, 0.25, "Encrypted blocks (encrypted storage, TLS-terminated payloads): the AES-128-CTR keystream of crypto/aes and crypto/cipher under a seeded key; AES-CTR output is indistinguishable from random bytes. Measured ρ 1.004 (lz4), 1.000 (snappy). The 25 % share is ours."},
			{CompressedGoSrc, 0.25, "Already-compressed files (media, pre-compressed columns): lz4 block output (pierrec/lz4/v4) of the Go 1.26 source tree in 64 KiB blocks. Measured ρ 0.985 (lz4), 0.979 (snappy). The 25 % share is ours."},
			{ApacheLogs, 0.50, "Web access logs in the Apache HTTP Server's Common Log Format (httpd.apache.org/docs/2.4/logs.html), field values from a seeded generator. Measured ρ 0.249 (lz4), 0.233 (snappy). The 50 % share is ours."},
		},
	},
}

// NamedMixes returns the declared mixes, sorted by name.
func NamedMixes() []NamedMix {
	out := append([]NamedMix(nil), namedMixes...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupMix returns the declared mix called name.
func LookupMix(name string) (NamedMix, error) {
	for _, n := range namedMixes {
		if n.Name == name {
			return n, nil
		}
	}
	return NamedMix{}, fmt.Errorf("%w: no declared mix %q", ErrBadMix, name)
}
