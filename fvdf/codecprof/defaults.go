package codecprof

import (
	"fmt"
	"strings"

	"github.com/falconml/falcon/transport"
)

// Defaults returns the profiles recorded on the machine this package was
// developed on (a shared 2-core x86-64 VM, Go 1.26, lz4/v4 v4.1.33 block
// API, snappy v1.0.0, [DefaultCalibrateConfig]: 4 MiB per class in 64 KiB
// blocks, best of 3 runs of ≥ 50 ms each, seed 1). They are measurements,
// not tuned values; they stand in when calibration is not wanted (tests,
// simulations). Regenerate them on your machine with
//
//	go run ./examples/fvdf -calibrate
//
// which prints this table as Go source, or call [Calibrate] at start-up.
//
// Float32Grad, Int8Quant and Random do not shrink under LZ-family codecs
// (ratio ≈ 1.0: random mantissas and 5-bit-entropy bytes have no repeated
// 4-byte sequences; lz4 and snappy then skip ahead, hence the very high
// speeds). SparseGrad and Text do.
func Defaults() Profiles {
	return Profiles{Entries: append([]Profile(nil), recorded...)}
}

// recorded is the output of `go run ./examples/fvdf -calibrate` on the
// development machine, 2026-11-29.
var recorded = []Profile{
	{Codec: transport.CodecLZ4, Class: Float32Grad, CompressBps: 11540e6, DecompressBps: 54132e6, Ratio: 1.0039},
	{Codec: transport.CodecSnappy, Class: Float32Grad, CompressBps: 34384e6, DecompressBps: 58237e6, Ratio: 1.0001},
	{Codec: transport.CodecLZ4, Class: SparseGrad, CompressBps: 1025e6, DecompressBps: 3100e6, Ratio: 0.2014},
	{Codec: transport.CodecSnappy, Class: SparseGrad, CompressBps: 1247e6, DecompressBps: 2145e6, Ratio: 0.1946},
	{Codec: transport.CodecLZ4, Class: Int8Quant, CompressBps: 13342e6, DecompressBps: 55330e6, Ratio: 1.0039},
	{Codec: transport.CodecSnappy, Class: Int8Quant, CompressBps: 34722e6, DecompressBps: 55547e6, Ratio: 1.0001},
	{Codec: transport.CodecLZ4, Class: Text, CompressBps: 602e6, DecompressBps: 4894e6, Ratio: 0.3593},
	{Codec: transport.CodecSnappy, Class: Text, CompressBps: 679e6, DecompressBps: 1554e6, Ratio: 0.3575},
	{Codec: transport.CodecLZ4, Class: Random, CompressBps: 12577e6, DecompressBps: 54854e6, Ratio: 1.0039},
	{Codec: transport.CodecSnappy, Class: Random, CompressBps: 32241e6, DecompressBps: 58424e6, Ratio: 1.0001},
	// The named classes, measured 2026-12-01 by the same command on the
	// same kind of machine (Go 1.26 source tree for GoStdlib). The rows
	// above were not re-measured: that run gave the same ratios, and
	// speeds 0.37–1.01× of theirs (the machine was shared; the
	// incompressible classes, where the codecs skip ahead, slowed most).
	{Codec: transport.CodecLZ4, Class: GoStdlib, CompressBps: 497e6, DecompressBps: 3828e6, Ratio: 0.3445},
	{Codec: transport.CodecSnappy, Class: GoStdlib, CompressBps: 669e6, DecompressBps: 1403e6, Ratio: 0.3368},
	{Codec: transport.CodecLZ4, Class: TPCHRows, CompressBps: 606e6, DecompressBps: 3416e6, Ratio: 0.3626},
	{Codec: transport.CodecSnappy, Class: TPCHRows, CompressBps: 683e6, DecompressBps: 1300e6, Ratio: 0.3788},
	{Codec: transport.CodecLZ4, Class: SortRecords, CompressBps: 666e6, DecompressBps: 4054e6, Ratio: 0.3746},
	{Codec: transport.CodecSnappy, Class: SortRecords, CompressBps: 759e6, DecompressBps: 2216e6, Ratio: 0.4158},
	// The media-logs mix's classes, measured 2026-12-05 by the same
	// command on the same kind of machine (Go 1.26 source tree for
	// CompressedGoSrc). The rows above were not re-measured: that run gave
	// the same ratios (to 0.001) and speeds 0.86–1.28× of theirs.
	{Codec: transport.CodecLZ4, Class: EncryptedBlocks, CompressBps: 10459e6, DecompressBps: 54840e6, Ratio: 1.0039},
	{Codec: transport.CodecSnappy, Class: EncryptedBlocks, CompressBps: 33674e6, DecompressBps: 62909e6, Ratio: 1.0001},
	{Codec: transport.CodecLZ4, Class: CompressedGoSrc, CompressBps: 1689e6, DecompressBps: 44370e6, Ratio: 0.9853},
	{Codec: transport.CodecSnappy, Class: CompressedGoSrc, CompressBps: 2608e6, DecompressBps: 7245e6, Ratio: 0.9791},
	{Codec: transport.CodecLZ4, Class: ApacheLogs, CompressBps: 882e6, DecompressBps: 4367e6, Ratio: 0.2492},
	{Codec: transport.CodecSnappy, Class: ApacheLogs, CompressBps: 1173e6, DecompressBps: 2243e6, Ratio: 0.2330},
}

var codecIdent = map[transport.Codec]string{transport.CodecLZ4: "transport.CodecLZ4", transport.CodecSnappy: "transport.CodecSnappy", transport.CodecNone: "transport.CodecNone"}
var classIdent = [...]string{"Float32Grad", "SparseGrad", "Int8Quant", "Text", "Random", "GoStdlib", "TPCHRows", "SortRecords", "EncryptedBlocks", "CompressedGoSrc", "ApacheLogs"}

// GoSource formats ps as the Go literal used for the recorded defaults
// (speeds rounded to MB/s, ratios to 4 decimals).
func GoSource(ps Profiles) string {
	var b strings.Builder
	b.WriteString("var recorded = []Profile{\n")
	for _, p := range ps.Entries {
		cls := p.Class.String()
		if p.Class >= 0 && p.Class < numClasses {
			cls = classIdent[p.Class]
		}
		cd, ok := codecIdent[p.Codec]
		if !ok {
			cd = fmt.Sprintf("transport.Codec(%d)", uint8(p.Codec))
		}
		fmt.Fprintf(&b, "\t{Codec: %s, Class: %s, CompressBps: %.0fe6, DecompressBps: %.0fe6, Ratio: %.4f},\n",
			cd, cls, p.CompressBps/1e6, p.DecompressBps/1e6, p.Ratio)
	}
	b.WriteString("}\n")
	return b.String()
}
