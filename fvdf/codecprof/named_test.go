package codecprof

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/falconml/falcon/transport"
)

func TestSortRecords_Layout(t *testing.T) {
	b := Generate(SortRecords, 100*50, rand.New(rand.NewPCG(1, 2)))
	var prev []byte
	for r := 0; r < 50; r++ {
		rec := b[100*r : 100*(r+1)]
		if !bytes.Equal(rec[10:12], []byte{0x00, 0x11}) || !bytes.Equal(rec[44:48], []byte{0x88, 0x99, 0xAA, 0xBB}) ||
			!bytes.Equal(rec[96:100], []byte{0xCC, 0xDD, 0xEE, 0xFF}) {
			t.Fatalf("record %d: break bytes wrong: %x", r, rec)
		}
		for i := 12; i < 44; i++ {
			if c := rec[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
				t.Fatalf("record %d: record number byte %d = %q", r, i, c)
			}
		}
		for g := 0; g < 12; g++ {
			f := rec[48+4*g : 52+4*g]
			if f[0] != f[1] || f[1] != f[2] || f[2] != f[3] {
				t.Fatalf("record %d: filler group %d = %q", r, g, f)
			}
		}
		if prev != nil && string(rec[12:44]) <= string(prev[12:44]) {
			t.Fatalf("record numbers not increasing: %q then %q", prev[12:44], rec[12:44])
		}
		prev = rec
	}
}

// TestTPCHRows_Layout parses the serialized rows back: length prefixes,
// the UnsafeRow slots' string offsets and the column ranges of the
// specification.
func TestTPCHRows_Layout(t *testing.T) {
	b := Generate(TPCHRows, 64<<10, rand.New(rand.NewPCG(3, 4)))
	rows := 0
	for pos := 0; pos+4 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		if pos+n > len(b) {
			break // the last row is cut by the buffer end
		}
		row := b[pos : pos+n]
		pos += n
		head := 8 + 8*tpchFields
		if n < head || n%8 != 0 {
			t.Fatalf("row %d: length %d", rows, n)
		}
		slot := func(i int) uint64 { return binary.LittleEndian.Uint64(row[8+8*i:]) }
		str := func(i int) string {
			v := slot(i)
			off, l := int(v>>32), int(v&0xffffffff)
			if off < head || off+l > n {
				t.Fatalf("row %d slot %d: string [%d,%d) outside row of %d", rows, i, off, off+l, n)
			}
			return string(row[off : off+l])
		}
		if q := slot(4); q < 100 || q > 5000 || q%100 != 0 {
			t.Fatalf("row %d: quantity %d", rows, q)
		}
		if d := slot(6); d > 10 {
			t.Fatalf("row %d: discount %d", rows, d)
		}
		if f := str(8); f != "R" && f != "A" && f != "N" {
			t.Fatalf("row %d: return flag %q", rows, f)
		}
		if ship, rec := slot(10), slot(12); rec <= ship || rec > ship+30 {
			t.Fatalf("row %d: ship %d receipt %d", rows, ship, rec)
		}
		if c := str(15); len(c) < 10 || len(c) > 43 {
			t.Fatalf("row %d: comment %q", rows, c)
		}
		rows++
	}
	if rows < 100 {
		t.Fatalf("only %d rows in 64 KiB", rows)
	}
}

func TestSample(t *testing.T) {
	if _, err := Sample(numClasses, 10, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("unknown class: %v", err)
	}
	b, err := Sample(GoStdlib, 4096, rand.New(rand.NewPCG(1, 1)))
	if errors.Is(err, ErrNoCorpus) {
		t.Skip("no Go source tree here:", err)
	}
	if err != nil || len(b) != 4096 {
		t.Fatalf("Sample(GoStdlib) = %d bytes, %v", len(b), err)
	}
}

func TestNamedMixes(t *testing.T) {
	for _, n := range NamedMixes() {
		var sum float64
		for _, w := range n.Weights {
			if w.Source == "" || w.W <= 0 {
				t.Fatalf("%s: weight %+v without source or positive value", n.Name, w)
			}
			if _, ok := Defaults().Lookup(transport.CodecLZ4, w.Class); !ok {
				t.Fatalf("%s: class %v has no default profile", n.Name, w.Class)
			}
			sum += w.W
		}
		if sum < 1-1e-12 || sum > 1+1e-12 {
			t.Fatalf("%s: weights sum to %v", n.Name, sum)
		}
	}
	if m, err := LookupMix("shuffle"); err != nil || m.Mix().String() != ShuffleMix().String() {
		t.Fatalf("shuffle mix = %v, %v; want ShuffleMix", m.Mix(), err)
	}
	if _, err := LookupMix("nope"); !errors.Is(err, ErrBadMix) {
		t.Fatalf("unknown mix: %v", err)
	}
	if m, err := ParseMix("spark-sql-shuffle"); err != nil || m[TPCHRows] != 0.70 {
		t.Fatalf("ParseMix(spark-sql-shuffle) = %v, %v", m, err)
	}
}
