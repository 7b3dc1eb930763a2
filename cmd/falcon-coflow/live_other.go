//go:build !linux

package main

import (
	"errors"
	"io"
)

func runHelper() (bool, error) { return false, nil }

func runBed(options, []string, io.Writer) error {
	return errors.New("-live needs Linux (network namespaces, tc, cgroups)")
}

func runMatrix(options, []planRun, io.Writer) error {
	return errors.New("-live-matrix needs Linux (network namespaces, tc, cgroups)")
}
