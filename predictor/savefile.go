package predictor

import (
	"io"
	"os"

	"github.com/falconml/falcon/internal/atomicfile"
)

// SaveFile writes n to path atomically: the model goes to a temporary file
// in the same directory, which is fsynced, renamed over path and followed
// by an fsync of the directory, so a crash at any moment leaves either the
// previous model or the new one, never a part of it (the rename-and-sync
// sequence of Pillai et al., OSDI 2014). On error path is untouched.
func (n *Network) SaveFile(path string) error {
	b, err := n.MarshalBinary()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// LoadFile reads a model written by SaveFile (or Save).
func LoadFile(path string) (*Network, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}
