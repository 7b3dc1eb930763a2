// Package record measures real lz4 and snappy compression and
// decompression speed and ratio, so that the predictors of package
// predictor are trained and evaluated on measurements rather than on a
// model of them.
//
// # Overview
//
// Record compresses a stream of chunks whose content changes between five
// data classes (float32 gradients, sparse gradients, int8-quantized values,
// text/log records, random bytes standing for already-compressed data)
// while background threads that stream through memory start and stop on a
// seeded schedule (Schedule), and emits one predictor.Record per chunk and
// codec: CPU time and wall time of one compression and one decompression,
// the sizes, the class and the contention level. predictor.WriteCSVRow
// writes them in the documented CSV format.
//
// The recorder is a measuring tool, not a pure core: it reads the clocks,
// starts goroutines locked to OS threads, and raises GOMAXPROCS while it
// runs (see Record). The schedule and the data are deterministic for a
// seed; the timings are of course not.
//
// # Usage
//
//	w := bufio.NewWriter(f)
//	predictor.WriteCSVHeader(w)
//	err := record.Record(ctx, record.Config{Chunks: 2000, Seed: 1},
//		func(r predictor.Record) error { return predictor.WriteCSVRow(w, r) })
//
// The series committed in predictor/testdata/series.csv was recorded this
// way (2000 chunks of 256 KiB, seed 1, on a 2-core x86 machine shared with
// other jobs); `go run ./examples/predictor -record -out FILE` records a new
// one.
package record
