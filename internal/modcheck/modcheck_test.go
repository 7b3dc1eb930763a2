package modcheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoModRequiresOnlyUsedModules lists the modules that provide a
// package to `go list -deps -test ./...` from the module root and fails on
// any go.mod requirement outside that set.
func TestGoModRequiresOnlyUsedModules(t *testing.T) {
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
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	used := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		used[l] = true
	}
	for _, req := range requirements(mod) {
		if !used[req] {
			t.Errorf("go.mod requires %s, which provides no package to this module's packages or tests: drop it (go mod tidy keeps it only through a dependency's tests)", req)
		}
	}
}

// requirements returns the module paths of go.mod's require directives.
func requirements(mod []byte) []string {
	var reqs []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			in = true
		case in && f[0] == ")":
			in = false
		case in && !strings.HasPrefix(f[0], "//"):
			reqs = append(reqs, f[0])
		case f[0] == "require" && len(f) >= 3:
			reqs = append(reqs, f[1])
		}
	}
	return reqs
}
