package ps

import (
	"io"
	"os"

	"github.com/falconml/falcon/internal/atomicfile"
)

// WriteFileAtomic writes a file so that a crash at any moment leaves
// either the previous file or the complete new one at path, never a part:
// write fills a temporary file in the same directory, which is flushed to
// stable storage (fsync), renamed over path (atomic on POSIX file
// systems) and followed by an fsync of the directory so that the rename
// itself survives a power loss (the sequence of Pillai et al., "All File
// Systems Are Not Created Equal", OSDI 2014). On any error the temporary
// file is removed and path is untouched.
func WriteFileAtomic(path string, perm os.FileMode, write func(w io.Writer) error) error {
	return atomicfile.WriteFile(path, perm, write)
}
