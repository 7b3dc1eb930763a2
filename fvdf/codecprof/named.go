package codecprof

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Named data classes: payloads taken from, or generated to the published
// layout of, data a reader can obtain. See [GoStdlib], [TPCHRows] and
// [SortRecords].

// ErrNoCorpus is returned by [Sample] when a corpus class's files cannot
// be read (no Go source tree on this machine).
var ErrNoCorpus = errors.New("codecprof: corpus not available")

// GoSourceCorpusBytes caps the Go source corpus (the first bytes, in the
// walk's lexical path order).
const GoSourceCorpusBytes = 32 << 20

var goSrc struct {
	once sync.Once
	data []byte
	err  error
}

// GoSourceCorpus returns the Go source corpus: the *.go files under
// $GOROOT/src (`go env GOROOT` when GOROOT is unset), concatenated in
// filepath.WalkDir's lexical order, up to GoSourceCorpusBytes. It is read
// once and shared; callers must not modify it. The Go distribution ships
// this tree, so the corpus is obtainable by anyone with the same Go
// version (the recorded profiles used Go 1.26).
func GoSourceCorpus() ([]byte, error) {
	goSrc.once.Do(func() {
		root := os.Getenv("GOROOT")
		if root == "" {
			root = goEnvRoot()
		}
		if root == "" {
			goSrc.err = fmt.Errorf("%w: GOROOT unknown", ErrNoCorpus)
			return
		}
		var buf []byte
		stop := errors.New("full")
		err := filepath.WalkDir(filepath.Join(root, "src"), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			buf = append(buf, b[:min(len(b), GoSourceCorpusBytes-len(buf))]...)
			if len(buf) >= GoSourceCorpusBytes {
				return stop
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			goSrc.err = fmt.Errorf("%w: %v", ErrNoCorpus, err)
			return
		}
		if len(buf) < 1<<20 {
			goSrc.err = fmt.Errorf("%w: only %d bytes of Go source under %s", ErrNoCorpus, len(buf), root)
			return
		}
		goSrc.data = buf
	})
	return goSrc.data, goSrc.err
}

// Sample returns n bytes of class c drawn with rng, like [Generate], but
// returns an error wrapping ErrNoCorpus instead of panicking when a corpus
// class cannot be read, and ErrUnknownClass for an unknown class.
func Sample(c Class, n int, rng *rand.Rand) ([]byte, error) {
	if c < 0 || c >= numClasses {
		return nil, fmt.Errorf("%w: %v", ErrUnknownClass, c)
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrBadConfig, n)
	}
	if c == GoStdlib || c == CompressedGoSrc {
		corpus, err := GoSourceCorpus()
		if c == CompressedGoSrc {
			corpus, err = compressedGoSource()
		}
		if err != nil {
			return nil, err
		}
		return sliceCorpus(corpus, n, rng), nil
	}
	return Generate(c, n, rng), nil
}

// sliceCorpus copies n bytes from a random offset of corpus, wrapping.
func sliceCorpus(corpus []byte, n int, rng *rand.Rand) []byte {
	buf := make([]byte, n)
	off := rng.IntN(len(corpus))
	for i := 0; i < n; {
		k := copy(buf[i:], corpus[off:])
		i += k
		off = 0
	}
	return buf
}

// genSortRecords fills buf with 100-byte records in the layout of gensort
// 1.2's binary records (the Sort Benchmark's generator, sortbenchmark.org;
// also Hadoop's TeraGen): a 10-byte key, the 2 break bytes 00 11, the
// 128-bit record number as 32 ASCII hex digits, the 4 break bytes
// 88 99 AA BB, 48 bytes of filler (12 hex digits of the record's random
// number, each repeated 4 times) and the 4 break bytes CC DD EE FF. The
// 128-bit random number comes from rng (PCG), not from gensort's own
// generator: the layout, which decides compressibility, is the standard's;
// the bit stream is not.
func genSortRecords(buf []byte, rng *rand.Rand) {
	const hex = "0123456789ABCDEF"
	var rec [100]byte
	start := rng.Uint64() >> 16 // a run of consecutive record numbers
	for pos, i := 0, uint64(0); pos < len(buf); i++ {
		hi, lo := rng.Uint64(), rng.Uint64()
		binary.BigEndian.PutUint64(rec[0:8], hi)
		rec[8], rec[9] = byte(lo>>56), byte(lo>>48)
		rec[10], rec[11] = 0x00, 0x11
		num := start + i
		for d := range 16 { // high 64 bits of the record number are 0
			rec[12+d] = '0'
			rec[28+d] = hex[(num>>(60-4*d))&0xF]
		}
		rec[44], rec[45], rec[46], rec[47] = 0x88, 0x99, 0xAA, 0xBB
		for d := range 12 { // hex digits 20..31 of the random number
			v := hex[(lo>>(44-4*d))&0xF]
			rec[48+4*d], rec[49+4*d], rec[50+4*d], rec[51+4*d] = v, v, v, v
		}
		rec[96], rec[97], rec[98], rec[99] = 0xCC, 0xDD, 0xEE, 0xFF
		pos += copy(buf[pos:], rec[:])
	}
}

// goEnvRoot asks the go command on PATH for its GOROOT; empty when there
// is none. (runtime.GOROOT, deprecated since Go 1.24, names the tree the
// binary was built with, which a copied binary may not have.)
func goEnvRoot() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
