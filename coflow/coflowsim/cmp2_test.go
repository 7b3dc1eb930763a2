package coflowsim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/coflow"
)

func TestCmp2(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	if os.Getenv("CMP2") == "" {
		t.Skip()
	}
	f, _ := os.Open(filepath.Join(dir, "synth-a.txt"))
	tr, _ := coflow.ReadTrace(f)
	f.Close()
	for _, b := range []bool{true, false} {
		useBrute = b
		var lines []string
		dumpHook = func(s *sim) {
			l := fmt.Sprintf("now=%d", s.now)
			for _, j := range s.active {
				l += fmt.Sprintf(" %d", j.id)
			}
			lines = append(lines, l)
		}
		Run(tr, "FIFO", DefaultConfig())
		dumpHook = nil
		os.WriteFile(fmt.Sprintf("/tmp/cmp2_%v.txt", b), []byte(fmt.Sprint(lines)), 0o644)
	}
	useBrute = false
}
