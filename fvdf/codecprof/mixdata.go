package codecprof

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// The classes of the media-logs mix (mixes.go): encrypted blocks,
// already-compressed data and access logs, each named and obtainable.

// genEncrypted fills buf with the AES-128-CTR keystream (crypto/aes,
// crypto/cipher.NewCTR) under a 16-byte key and IV drawn from rng: the
// encryption of zeros. The same rng state gives the same bytes.
func genEncrypted(buf []byte, rng *rand.Rand) {
	var key, iv [16]byte
	for i := range key {
		key[i], iv[i] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic("codecprof: aes: " + err.Error()) // a 16-byte key is always valid
	}
	clear(buf)
	cipher.NewCTR(b, iv[:]).XORKeyStream(buf, buf)
}

// CompressedBlock is the block size the CompressedGoSrc corpus is
// compressed in (the calibration's and the transport's block size).
const CompressedBlock = 64 << 10

var lzSrc struct {
	once sync.Once
	data []byte
	err  error
}

// compressedGoSource returns the Go source corpus compressed with lz4
// (pierrec/lz4/v4 CompressBlock, default level) in consecutive
// CompressedBlock blocks, the compressed blocks concatenated. Read once
// and shared.
func compressedGoSource() ([]byte, error) {
	lzSrc.once.Do(func() {
		src, err := GoSourceCorpus()
		if err != nil {
			lzSrc.err = err
			return
		}
		var c lz4.Compressor
		dst := make([]byte, lz4.CompressBlockBound(CompressedBlock))
		out := make([]byte, 0, len(src)/3)
		for off := 0; off < len(src); off += CompressedBlock {
			b := src[off:min(len(src), off+CompressedBlock)]
			n, err := c.CompressBlock(b, dst)
			if err != nil {
				lzSrc.err = fmt.Errorf("codecprof: lz4 of the Go source corpus: %w", err)
				return
			}
			if n == 0 { // incompressible block: lz4 stores it raw
				out = append(out, b...)
				continue
			}
			out = append(out, dst[:n]...)
		}
		lzSrc.data = out
	})
	return lzSrc.data, lzSrc.err
}

// Field values of the access-log generator (ours): a pool of client
// addresses, users and request paths, drawn with a skew (a few hot
// pages), the status codes and methods a web server logs most.
var (
	clfPaths   = []string{"/", "/index.html", "/favicon.ico", "/robots.txt", "/css/site.css", "/js/app.js", "/api/v1/items", "/api/v1/items/search", "/images/logo.png", "/login", "/logout", "/cart", "/checkout", "/products/list", "/products/detail", "/static/fonts/roboto.woff2"}
	clfMethods = []string{"GET", "GET", "GET", "GET", "GET", "POST", "POST", "HEAD"}
	clfStatus  = []int{200, 200, 200, 200, 200, 200, 304, 304, 302, 404, 500}
	clfUsers   = []string{"-", "-", "-", "-", "frank", "alice", "bob"}
	clfMonths  = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// genApacheLogs fills buf with lines in the Common Log Format, such as
// the Apache documentation's example
//
//	127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326
//
// Clients come from a pool of 256 addresses in 10.0.0.0/16, paths from
// clfPaths with a query id on API calls, timestamps advance by 0–199 ms a
// line from 29/Nov/2026:00:00:00 +0000 (wrapping at midnight), sizes are exponential (mean
// 4 KiB; "-" for 304).
func genApacheLogs(buf []byte, rng *rand.Rand) {
	var hosts [256][4]int
	for i := range hosts {
		hosts[i] = [4]int{10, 0, rng.IntN(256), 1 + rng.IntN(254)}
	}
	line := make([]byte, 0, 200)
	ms := int64(0)
	for pos := 0; pos < len(buf); {
		ms += int64(rng.IntN(200))
		h := hosts[min(rng.IntN(256), rng.IntN(256))] // skewed to low indices
		line = line[:0]
		for i, o := range h {
			if i > 0 {
				line = append(line, '.')
			}
			line = strconv.AppendInt(line, int64(o), 10)
		}
		line = append(line, " - "...)
		line = append(line, clfUsers[rng.IntN(len(clfUsers))]...)
		s := ms / 1000
		hh, mm, ss := s/3600%24, s/60%60, s%60
		line = fmt.Appendf(line, " [29/%s/2026:%02d:%02d:%02d +0000] \"", clfMonths[10], hh, mm, ss)
		line = append(line, clfMethods[rng.IntN(len(clfMethods))]...)
		line = append(line, ' ')
		p := clfPaths[min(rng.IntN(len(clfPaths)), rng.IntN(len(clfPaths)))]
		line = append(line, p...)
		if len(p) > 4 && p[:5] == "/api/" {
			line = append(line, "?id="...)
			line = strconv.AppendInt(line, int64(rng.IntN(100000)), 10)
		}
		line = append(line, " HTTP/1.1\" "...)
		st := clfStatus[rng.IntN(len(clfStatus))]
		line = strconv.AppendInt(line, int64(st), 10)
		line = append(line, ' ')
		if st == 304 {
			line = append(line, '-')
		} else {
			line = strconv.AppendInt(line, int64(1+rng.ExpFloat64()*4096), 10)
		}
		line = append(line, '\n')
		pos += copy(buf[pos:], line)
	}
}
