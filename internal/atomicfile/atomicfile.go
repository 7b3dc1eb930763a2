// Package atomicfile writes files so that a crash leaves the old file or
// the whole new one, never a part (ps's checkpoints, predictor's models).
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes a file so that a crash at any moment leaves
// either the previous file or the complete new one at path, never a part:
// write fills a temporary file in the same directory, which is flushed to
// stable storage (fsync), renamed over path (atomic on POSIX file
// systems) and followed by an fsync of the directory so that the rename
// itself survives a power loss (the sequence of Pillai et al., "All File
// Systems Are Not Created Equal", OSDI 2014). On any error the temporary
// file is removed and path is untouched.
func WriteFile(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
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
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := write(bw); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
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
	return syncDir(dir)
}

// syncDir fsyncs a directory, making a rename in it durable. File systems
// that cannot sync a directory (EINVAL) are accepted as they are.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !isEINVAL(err) {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}
