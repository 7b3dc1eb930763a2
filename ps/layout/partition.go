package layout

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/falconml/falcon/ps/internal/codec"
)

// Segment is a contiguous part [Off, Off+Len) of one key's value, held by
// server Server (an index into the client's server list).
type Segment struct {
	Key      uint64
	Off, Len int
	Server   int
}

// Partitioner decides which servers hold each key. It must be a pure
// function of its configuration: every client and server of a cluster uses
// the same partitioner, and a key's placement never changes.
//
// Locate appends to dst the segments of key (whose value has n elements),
// in increasing Off order, covering [0, n) exactly, with at most one segment
// per server.
type Partitioner interface {
	Locate(dst []Segment, key uint64, n int) []Segment
}

// DefaultMaxSegment is the value length above which the default partitioner
// splits a key across servers: 1<<16 float32s = 256 KiB (our choice: large
// enough that splitting never costs a round trip for ordinary tensors).
const DefaultMaxSegment = 1 << 16

// KeyRange is the default partitioner (ps-lite's): the key space
// [0, KeySpace) is cut into Servers equal ranges and server i owns range i;
// keys ≥ KeySpace belong to the last server. KeySpace 0 means the whole
// uint64 range. A value longer than MaxSegment is split into
// k = min(Servers, ⌈n/MaxSegment⌉) near-equal contiguous segments placed on
// the owner and the next k−1 servers (wrapping); MaxSegment 0 never splits.
type KeyRange struct {
	Servers    int
	KeySpace   uint64
	MaxSegment int
}

var _ Partitioner = KeyRange{}

// Validate checks the configuration.
func (p KeyRange) Validate() error {
	if p.Servers <= 0 {
		return errors.New("ps: KeyRange needs Servers > 0")
	}
	if p.MaxSegment < 0 {
		return errors.New("ps: KeyRange.MaxSegment < 0")
	}
	return nil
}

// Owner is the server owning key (its first segment).
func (p KeyRange) Owner(key uint64) int {
	if p.Servers <= 1 {
		return 0
	}
	if p.KeySpace == 0 {
		// ⌊key·S / 2^64⌋
		hi, _ := bits.Mul64(key, uint64(p.Servers))
		return int(hi)
	}
	if key >= p.KeySpace {
		return p.Servers - 1
	}
	hi, lo := bits.Mul64(key, uint64(p.Servers))
	q, _ := bits.Div64(hi, lo, p.KeySpace)
	return int(q)
}

// Locate implements Partitioner.
func (p KeyRange) Locate(dst []Segment, key uint64, n int) []Segment {
	return splitSegments(dst, key, n, p.Owner(key), p.Servers, p.MaxSegment)
}

// Hash places key on server codec.Mix64(key) mod Servers, spreading dense small
// keys evenly; large values split as in KeyRange.
type Hash struct {
	Servers    int
	MaxSegment int
}

var _ Partitioner = Hash{}

// Locate implements Partitioner.
func (p Hash) Locate(dst []Segment, key uint64, n int) []Segment {
	s := max(p.Servers, 1)
	return splitSegments(dst, key, n, int(codec.Mix64(key)%uint64(s)), s, p.MaxSegment)
}

// Modulo places key on server key mod Servers: dense small keys 0..n−1,
// as models number their tensors, go round-robin, so every server holds
// ⌊n/Servers⌋ or ⌈n/Servers⌉ of them. It is the default partitioner of
// Client and Cluster. Keys that share a stride with Servers (all even keys
// on 2 servers) pile up on one server: use Hash for those. Large values
// split as in KeyRange.
type Modulo struct {
	Servers    int
	MaxSegment int
}

var _ Partitioner = Modulo{}

// Locate implements Partitioner.
func (p Modulo) Locate(dst []Segment, key uint64, n int) []Segment {
	s := max(p.Servers, 1)
	return splitSegments(dst, key, n, int(key%uint64(s)), s, p.MaxSegment)
}

// splitSegments cuts [0,n) into k = min(servers, ⌈n/maxSeg⌉) near-equal
// parts (the first n mod k parts one element longer) on servers
// home, home+1, … (mod servers).
func splitSegments(dst []Segment, key uint64, n, home, servers, maxSeg int) []Segment {
	k := 1
	if maxSeg > 0 && n > maxSeg && servers > 1 {
		k = min(servers, (n+maxSeg-1)/maxSeg)
	}
	if k == 1 {
		return append(dst, Segment{Key: key, Off: 0, Len: n, Server: home})
	}
	q, r := n/k, n%k
	off := 0
	for j := 0; j < k; j++ {
		l := q
		if j < r {
			l++
		}
		dst = append(dst, Segment{Key: key, Off: off, Len: l, Server: (home + j) % servers})
		off += l
	}
	return dst
}

// CheckSegments validates what a Partitioner returned for one key of n
// values over servers servers: contiguous segments from offset 0 covering
// [0, n), at most one per server.
func CheckSegments(segs []Segment, key uint64, n, servers int) error {
	off := 0
	seen := uint64(0)
	for _, s := range segs {
		if s.Key != key || s.Off != off || s.Len <= 0 || s.Server < 0 || s.Server >= servers {
			return fmt.Errorf("ps: partitioner returned bad segment %+v for key %d (n=%d)", s, key, n)
		}
		if s.Server < 64 {
			if seen&(1<<s.Server) != 0 {
				return fmt.Errorf("ps: partitioner placed two segments of key %d on server %d", key, s.Server)
			}
			seen |= 1 << s.Server
		}
		off += s.Len
	}
	if off != n {
		return fmt.Errorf("ps: partitioner segments of key %d cover %d of %d values", key, off, n)
	}
	return nil
}

// Fingerprint fingerprints a layout (the partitioner p over servers
// servers) by what it does: FNV-1a, 64 bits (Fowler, Noll and Vo), over
// servers and the segments p returns for a fixed set of probes — the
// keys 0…255, 64 keys i·0x9E3779B97F4A7C15 spread over the key space by
// the golden-ratio multiplier (Knuth's multiplicative hashing) and
// 2⁶⁴−1, each of length 1, and the keys 0, 1, 7 and 2⁶³ at every length
// 2^k+1, k = 4…24, which finds any split threshold (MaxSegment) up to
// 16 Mi values. Any deterministic
// Partitioner can be fingerprinted, whatever its fields. Two layouts that
// place every probe alike hash alike: the hash tells layouts apart that
// differ in the number of servers, the placement of small keys or the
// split of long ones, not ones that differ only on keys or lengths no
// probe has.
func Fingerprint(p Partitioner, servers int) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= prime
			v >>= 8
		}
	}
	mix(uint64(servers))
	var segs []Segment
	probe := func(key uint64, n int) {
		segs = p.Locate(segs[:0], key, n)
		mix(key)
		mix(uint64(n))
		mix(uint64(len(segs)))
		for _, s := range segs {
			mix(uint64(s.Off))
			mix(uint64(s.Len))
			mix(uint64(s.Server))
		}
	}
	for k := range uint64(256) {
		probe(k, 1)
	}
	for i := range uint64(64) {
		probe(i*0x9E3779B97F4A7C15, 1)
	}
	probe(1<<64-1, 1)
	for k := 4; k <= 24; k++ {
		for _, key := range []uint64{0, 1, 7, 1 << 63} {
			probe(key, 1<<k+1)
		}
	}
	return h
}
