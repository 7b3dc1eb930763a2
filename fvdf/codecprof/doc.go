// Package codecprof measures how fast lz4 and snappy compress and
// decompress, per CPU core, and how much they shrink, on the kinds of data
// that shuffles and parameter servers move.
//
// # Overview
//
// A [Profile] is (s, u, ρ): raw bytes compressed per second per core,
// raw bytes produced per second per core when decompressing, and
// compressed/raw size. These are the three numbers the FVDF scheduler
// (package fvdf) and the coflow simulator need to decide whether
// compressing a flow shortens its disposal: pipelined, a flow with k_s
// sender cores, k_r receiver cores and network rate r disposes of raw
// volume at min(k_s·s, r/ρ, k_r·u) bytes/s, against r raw.
//
// Data classes ([Class]) are generated from a seeded source by [Generate]:
// dense float32 gradients, sparse gradients (90 % zeros), int8 quantized
// values, text/log records and already-compressed (random) bytes; and three
// named classes a reader can obtain or regenerate: GoStdlib (slices of the
// Go distribution's source tree, real text), TPCHRows (TPC-H lineitem rows
// from a dbgen-like generator in Spark's UnsafeRow shuffle layout) and
// SortRecords (gensort's 100-byte sort-benchmark records); and the
// classes of the media-logs mix, whose compressibility differs by 4×:
// EncryptedBlocks (the AES-128-CTR keystream under a seeded key),
// CompressedGoSrc (lz4 output of the Go source corpus) and ApacheLogs
// (lines in the Apache HTTP Server's Common Log Format). The declared
// mixes are in mixes.go ([NamedMixes]). [Sample] is
// Generate with errors instead of panics. A [Mix]
// weights classes by raw bytes; [Profiles.ForMix] turns a mix into one
// effective profile (ratios average, times per byte add up).
//
// [Calibrate] re-measures on the running machine; [Defaults] are the values
// recorded on the development machine (see its doc for how to regenerate).
//
// # Usage
//
//	ps := codecprof.Defaults() // or codecprof.Calibrate(ctx, codecprof.DefaultCalibrateConfig())
//	p, err := ps.ForMix(transport.CodecLZ4, codecprof.ShuffleMix())
//	// p.CompressBps, p.DecompressBps, p.Ratio
package codecprof
