package predictor

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Record is one row of a recorded series: one chunk compressed and
// decompressed once by one codec. See CSVHeader for the file format.
type Record struct {
	At              time.Duration // end of the measurement, since the start of the recording
	Codec           string        // codec name, e.g. "lz4", "snappy"
	Class           int           // data-class id (1-based; 0 = unknown)
	ClassName       string        // data-class name, e.g. "float32"
	Contention      float64       // background busy threads per core while measuring
	RawBytes        int           // uncompressed chunk size
	CompressedBytes int           // compressed size
	CompressNs      int64         // CPU time of one compression, ns
	DecompressNs    int64         // CPU time of one decompression, ns
	// Wall-clock times of the same operations (they include time the
	// measuring thread was descheduled).
	CompressWallNs   int64
	DecompressWallNs int64
}

// Measurement converts r: speed = raw bytes / CPU time (bytes per second on
// one core); ratio = compressed / raw.
func (r Record) Measurement() Measurement {
	m := Measurement{At: r.At, Contention: r.Contention, Class: r.Class}
	if r.CompressNs > 0 {
		m.CompressSpeed = float64(r.RawBytes) * 1e9 / float64(r.CompressNs)
	}
	if r.DecompressNs > 0 {
		m.DecompressSpeed = float64(r.RawBytes) * 1e9 / float64(r.DecompressNs)
	}
	if r.RawBytes > 0 {
		m.Ratio = float64(r.CompressedBytes) / float64(r.RawBytes)
	}
	return m
}

// CSVHeader is the header line of a series CSV. Columns:
//
//	time_ns          end of the measurement, ns since the start of the recording
//	codec            codec name ("lz4", "snappy")
//	class            data-class id, 1-based (0 = unknown)
//	class_name       data-class name ("float32", "sparse", "int8", "text", "random")
//	contention       background busy threads per core while measuring (0 = idle)
//	raw_bytes        chunk size before compression
//	compressed_bytes chunk size after compression
//	compress_ns      CPU time of one compression of the chunk (measuring thread), ns
//	decompress_ns    CPU time of one decompression of the chunk, ns
//	compress_wall_ns wall time of the same compression, ns
//	decompress_wall_ns wall time of the same decompression, ns
//	compress_Bps     raw_bytes / compress_ns · 1e9 (derived, bytes/s per core)
//	decompress_Bps   raw_bytes / decompress_ns · 1e9 (derived, bytes/s per core)
//	ratio            compressed_bytes / raw_bytes (derived)
//
// The derived columns are written for readers of the file; ReadCSV
// recomputes them from the primary columns.
const CSVHeader = "time_ns,codec,class,class_name,contention,raw_bytes,compressed_bytes,compress_ns,decompress_ns,compress_wall_ns,decompress_wall_ns,compress_Bps,decompress_Bps,ratio"

// WriteCSVHeader writes CSVHeader and a newline.
func WriteCSVHeader(w io.Writer) error {
	_, err := io.WriteString(w, CSVHeader+"\n")
	return err
}

// WriteCSVRow writes r as one CSV line. Codec and class names must not
// contain commas or newlines.
func WriteCSVRow(w io.Writer, r Record) error {
	m := r.Measurement()
	_, err := fmt.Fprintf(w, "%d,%s,%d,%s,%s,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g\n",
		r.At.Nanoseconds(), r.Codec, r.Class, r.ClassName,
		strconv.FormatFloat(r.Contention, 'g', -1, 64),
		r.RawBytes, r.CompressedBytes, r.CompressNs, r.DecompressNs, r.CompressWallNs, r.DecompressWallNs,
		m.CompressSpeed, m.DecompressSpeed, m.Ratio)
	return err
}

// ReadCSV parses a series CSV written by WriteCSVHeader/WriteCSVRow. It
// checks the header, the column count and every number; errors wrap ErrCSV
// and name the line.
func ReadCSV(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []Record
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimRight(sc.Text(), "\r")
		if line == 1 {
			if s != CSVHeader {
				return nil, fmt.Errorf("%w: line 1: header %q, want %q", ErrCSV, s, CSVHeader)
			}
			continue
		}
		if s == "" {
			continue
		}
		rec, err := parseRow(s)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrCSV, line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrCSV, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: empty input (no header)", ErrCSV)
	}
	return out, nil
}

func parseRow(s string) (Record, error) {
	f := strings.Split(s, ",")
	if len(f) != 14 {
		return Record{}, fmt.Errorf("%d columns, want 14", len(f))
	}
	var r Record
	var err error
	ints := func(i int, name string, lo int64) int64 {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseInt(f[i], 10, 64)
		if e != nil || v < lo {
			err = fmt.Errorf("column %s: %q is not an integer >= %d", name, f[i], lo)
		}
		return v
	}
	r.At = time.Duration(ints(0, "time_ns", 0))
	r.Codec = f[1]
	r.Class = int(ints(2, "class", 0))
	r.ClassName = f[3]
	r.RawBytes = int(ints(5, "raw_bytes", 1))
	r.CompressedBytes = int(ints(6, "compressed_bytes", 0))
	r.CompressNs = ints(7, "compress_ns", 1)
	r.DecompressNs = ints(8, "decompress_ns", 1)
	r.CompressWallNs = ints(9, "compress_wall_ns", 1)
	r.DecompressWallNs = ints(10, "decompress_wall_ns", 1)
	if err != nil {
		return Record{}, err
	}
	if r.Codec == "" {
		return Record{}, fmt.Errorf("column codec: empty")
	}
	c, e := strconv.ParseFloat(f[4], 64)
	if e != nil || c < 0 || math.IsInf(c, 0) || math.IsNaN(c) {
		return Record{}, fmt.Errorf("column contention: %q is not a finite number >= 0", f[4])
	}
	r.Contention = c
	for i := 11; i < 14; i++ {
		if _, e := strconv.ParseFloat(f[i], 64); e != nil {
			return Record{}, fmt.Errorf("column %d: %q is not a number", i+1, f[i])
		}
	}
	return r, nil
}

// Split groups records by codec, keeping their order, and returns the codec
// names in order of first appearance.
func Split(recs []Record) (codecs []string, byCodec map[string][]Measurement) {
	byCodec = make(map[string][]Measurement)
	for _, r := range recs {
		if _, ok := byCodec[r.Codec]; !ok {
			codecs = append(codecs, r.Codec)
		}
		byCodec[r.Codec] = append(byCodec[r.Codec], r.Measurement())
	}
	return codecs, byCodec
}
