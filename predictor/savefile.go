package predictor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SaveFile writes n to path atomically: the model goes to a temporary file
// in the same directory, which is fsynced, renamed over path and followed
// by an fsync of the directory, so a crash at any moment leaves either the
// previous model or the new one, never a part of it (the rename-and-sync
// sequence of Pillai et al., OSDI 2014). On error path is untouched.
func (n *Network) SaveFile(path string) (err error) {
	b, err := n.MarshalBinary()
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("predictor: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("predictor: fsync of directory %s: %w", dir, err)
	}
	return nil
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
