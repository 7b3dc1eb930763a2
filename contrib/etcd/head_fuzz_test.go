package etcd

import (
	"bytes"
	"testing"
)

// FuzzDecodeHead: no input crashes decodeHead; a head it accepts has a
// chunk size in (0, txnBytes] and encodes back to the same bytes.
func FuzzDecodeHead(f *testing.F) {
	f.Add(head{gen: 1, size: 100, chunk: chunkSize, crc: 7}.encode())
	f.Add(head{}.encode())
	f.Add([]byte("FCS1"))
	f.Add([]byte("nonsense"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHead(b)
		if err != nil {
			return
		}
		if h.chunk == 0 || h.chunk > txnBytes {
			t.Fatalf("accepted chunk size %d", h.chunk)
		}
		if !bytes.Equal(h.encode(), b) {
			t.Fatalf("head %+v encodes to %x, decoded from %x", h, h.encode(), b)
		}
	})
}
