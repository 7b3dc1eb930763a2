package codecprof

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/falconml/falcon/transport"
	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// lz4Ratio is compressed/raw of b with lz4 blocks of CompressedBlock.
func lz4Ratio(t *testing.T, b []byte) float64 {
	t.Helper()
	var c lz4.Compressor
	dst := make([]byte, lz4.CompressBlockBound(CompressedBlock))
	var out int
	for off := 0; off < len(b); off += CompressedBlock {
		blk := b[off:min(len(b), off+CompressedBlock)]
		n, err := c.CompressBlock(blk, dst)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			n = len(blk)
		}
		out += n
	}
	return float64(out) / float64(len(b))
}

// TestMediaLogs_Classes: the media-logs classes are deterministic for a
// seed, differ between seeds, and compress in the measured order
// apache-clf < gosrc-lz4 ≤ aes-ctr, as the recorded profiles say (ρ 0.25,
// 0.985, 1.004 with lz4), within 0.05 of the recorded ratio.
func TestMediaLogs_Classes(t *testing.T) {
	const n = 1 << 20
	ratio := map[Class]float64{}
	for _, k := range []Class{ApacheLogs, EncryptedBlocks, CompressedGoSrc} {
		a, err := Sample(k, n, rand.New(rand.NewPCG(3, 9)))
		if errors.Is(err, ErrNoCorpus) {
			t.Skip("no Go source tree here:", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Sample(k, n, rand.New(rand.NewPCG(3, 9)))
		c, _ := Sample(k, n, rand.New(rand.NewPCG(4, 9)))
		if len(a) != n || !bytes.Equal(a, b) || bytes.Equal(a, c) {
			t.Fatalf("%v: not deterministic per seed (len %d, same seed equal %v, other seed equal %v)", k, len(a), bytes.Equal(a, b), bytes.Equal(a, c))
		}
		ratio[k] = lz4Ratio(t, a)
		p, ok := Defaults().Lookup(transport.CodecLZ4, k)
		if !ok {
			t.Fatalf("%v: no recorded profile", k)
		}
		if d := ratio[k] - p.Ratio; d > 0.05 || d < -0.05 {
			t.Fatalf("%v: lz4 ratio %.3f here, recorded %.3f", k, ratio[k], p.Ratio)
		}
		if len(snappy.Encode(nil, a[:CompressedBlock])) == 0 {
			t.Fatal("snappy")
		}
	}
	if !(ratio[ApacheLogs] < 0.4 && ratio[ApacheLogs] < ratio[CompressedGoSrc] && ratio[CompressedGoSrc] <= ratio[EncryptedBlocks]+1e-3 && ratio[CompressedGoSrc] > 0.9) {
		t.Fatalf("ratios out of the measured order: %v", ratio)
	}
}

// TestApacheLogs_Format: every generated line is a Common Log Format line.
func TestApacheLogs_Format(t *testing.T) {
	b := Generate(ApacheLogs, 64<<10, rand.New(rand.NewPCG(1, 2)))
	re := regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+ - \S+ \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] "[A-Z]+ /\S* HTTP/1\.1" \d{3} (\d+|-)$`)
	lines := bytes.Split(b, []byte("\n"))
	for _, l := range lines[:len(lines)-1] { // the last one is cut at 64 KiB
		if !re.Match(l) {
			t.Fatalf("not a Common Log Format line: %q", l)
		}
	}
	if len(lines) < 300 {
		t.Fatalf("only %d lines in 64 KiB", len(lines))
	}
}

// TestMediaLogs_Mix: the mix's classes have measured ρ that differ by
// more than 3× (the point of the mix), unlike spark-sql-shuffle's.
func TestMediaLogs_Mix(t *testing.T) {
	spread := func(name string) float64 {
		m, err := LookupMix(name)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 2.0, 0.0
		for _, w := range m.Weights {
			p, _ := Defaults().Lookup(transport.CodecLZ4, w.Class)
			lo, hi = min(lo, p.Ratio), max(hi, p.Ratio)
		}
		return hi / lo
	}
	if s := spread("media-logs"); s < 3 {
		t.Fatalf("media-logs ρ spread %.2f, want ≥ 3", s)
	}
	if s := spread("spark-sql-shuffle"); s > 1.3 {
		t.Fatalf("spark-sql-shuffle ρ spread %.2f", s)
	}
}
