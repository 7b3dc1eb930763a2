package readmecheck

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMESnippetBuilds writes the README's first Go block to a
// temporary module (go.mod requiring this module, replaced by the
// repository; the repository's go.sum) and runs go vet and go build on it.
func TestREADMESnippetBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := firstGoBlock(readme)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(src, []byte("package main\n")) {
		t.Fatalf("README's Go block starts %q: want a whole program (package main) a user can copy", firstLine(src))
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	path, goVersion := moduleAndGo(mod)
	if path == "" || goVersion == "" {
		t.Fatal("go.mod: no module or go directive")
	}
	dir := t.TempDir()
	gomod := "module readmecheck\n\ngo " + goVersion + "\n\nrequire " + path + " v0.0.0\n\nreplace " + path + " => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets the go command add the indirect requirements the
	// replaced module brings; their sums are in the copied go.sum.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	for _, args := range [][]string{{"vet", "."}, {"build", "-o", filepath.Join(dir, "snippet"), "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s on README.md's Go block: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// firstGoBlock returns the body of the first fenced block opened by
// "```go" in a Markdown document.
func firstGoBlock(md []byte) ([]byte, error) {
	var out bytes.Buffer
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in = true
		case in && strings.TrimSpace(l) == "```":
			return out.Bytes(), nil
		case in:
			out.WriteString(l)
			out.WriteByte('\n')
		}
	}
	if in {
		return nil, errors.New("README.md: the ```go block is not closed")
	}
	return nil, errors.New("README.md has no ```go block")
}

// moduleAndGo returns go.mod's module path and go version.
func moduleAndGo(mod []byte) (path, goVersion string) {
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "module" {
			path = f[1]
		}
		if len(f) == 2 && f[0] == "go" {
			goVersion = f[1]
		}
	}
	return path, goVersion
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(b, []byte("\n"))
	return string(l)
}
