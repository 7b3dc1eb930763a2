package mnist

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// TestReadImages_HugeHeaderBounded: a 16-byte header that declares
// 10,000,000 images of 1024×1024 (10 TB) and no data is refused, and the
// reader allocates about what the input holds, not what it declares (it
// used to allocate the whole declared size: fatal out of memory).
func TestReadImages_HugeHeaderBounded(t *testing.T) {
	in := idx(magicImages, []uint32{maxItems, 1024, 1024}, []byte{1, 2, 3})
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	_, err := ReadImages(bytes.NewReader(in))
	runtime.ReadMemStats(&b)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	if got := b.TotalAlloc - a.TotalAlloc; got > 4*readChunk {
		t.Fatalf("allocated %d bytes for a %d-byte input", got, len(in))
	}
	_, err = ReadLabels(bytes.NewReader(idx(magicLabels, []uint32{maxItems}, nil)))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("labels: err = %v, want ErrMalformed", err)
	}
}

// TestReadDeclared reads across chunk boundaries and refuses short input.
func TestReadDeclared(t *testing.T) {
	data := make([]byte, 2*readChunk+5)
	for i := range data {
		data[i] = byte(i)
	}
	got, err := readDeclared(bytes.NewReader(data), len(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("full read: err %v, equal %v", err, bytes.Equal(got, data))
	}
	if _, err := readDeclared(bytes.NewReader(data), len(data)+1); err == nil {
		t.Fatal("short input accepted")
	}
}

func FuzzReadIDX(f *testing.F) {
	f.Add(idx(magicImages, []uint32{2, 2, 3}, []byte{0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
	f.Add(idx(magicLabels, []uint32{3}, []byte{1, 2, 3}))
	f.Add(gz(idx(magicLabels, []uint32{3}, []byte{1, 2, 3})))
	f.Add(idx(magicImages, []uint32{maxItems, 1024, 1024}, nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		if img, err := ReadImages(bytes.NewReader(in)); err == nil && len(img.Pix) != img.N*img.Rows*img.Cols {
			t.Fatalf("%d pixels for %dx%dx%d", len(img.Pix), img.N, img.Rows, img.Cols)
		}
		if lab, err := ReadLabels(bytes.NewReader(in)); err == nil && len(lab) > len(in) && in[0] != 0x1f {
			t.Fatalf("%d labels from %d bytes", len(lab), len(in))
		}
	})
}
