package coflowtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/coflow"
)

// ErrNoSharedData is returned by SharedData when the directory is absent.
var ErrNoSharedData = errors.New("coflowtest: shared data not found")

// SharedData locates the data set directory shared/data/<name> used by
// tests and benchmarks. If the environment variable FALCON_SHARED is set it
// names the shared directory (the one holding data/); otherwise SharedData
// walks up from the working directory until an ancestor has
// shared/data/<name> beside it (or is itself such a shared directory).
func SharedData(name string) (string, error) {
	if env := os.Getenv("FALCON_SHARED"); env != "" {
		p := filepath.Join(env, "data", name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s (from FALCON_SHARED)", ErrNoSharedData, filepath.Join(env, "data", name))
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		for _, p := range []string{filepath.Join(dir, "shared", "data", name), filepath.Join(dir, "data", name)} {
			if st, err := os.Stat(p); err == nil && st.IsDir() && filepath.Base(filepath.Dir(filepath.Dir(p))) == "shared" {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: shared/data/%s beside no ancestor of the working directory; set FALCON_SHARED", ErrNoSharedData, name)
		}
		dir = parent
	}
}

// SharedFile returns the path of file in shared/data/<name>, or skips the
// test with a clear message when the data set or file is absent.
func SharedFile(tb testing.TB, name, file string) string {
	tb.Helper()
	dir, err := SharedData(name)
	if err != nil {
		tb.Skipf("skipping: %v", err)
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("skipping: %s not available: %v", file, err)
	}
	return p
}

// SharedDir returns the directory of the data set shared/data/<name> (see
// SharedData), or skips the test with a clear message when it is absent.
func SharedDir(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := SharedData(name)
	if err != nil {
		tb.Skipf("skipping: %v", err)
	}
	return dir
}

// ReadTraceFile reads a coflow-benchmark trace, failing the test on any
// error (a malformed line is reported with its line number).
func ReadTraceFile(tb testing.TB, path string) *coflow.Trace {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tr, err := coflow.ReadTrace(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return tr
}
