package coflowsim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/coflow"
)

func TestBruteVsEvents(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	if os.Getenv("CMP") == "" {
		t.Skip()
	}
	for _, trace := range []string{"synth-a", "synth-b"} {
		f, _ := os.Open(filepath.Join(dir, trace+".txt"))
		tr, _ := coflow.ReadTrace(f)
		f.Close()
		useBrute = true
		a, _ := Run(tr, os.Getenv("CMP"), DefaultConfig())
		useBrute = false
		b, _ := Run(tr, os.Getenv("CMP"), DefaultConfig())
		n := 0
		for i := range a.Records {
			if a.Records[i].FinishMs != b.Records[i].FinishMs {
				if n < 5 {
					fmt.Println(trace, a.Records[i].ID, a.Records[i].FinishMs, b.Records[i].FinishMs)
				}
				n++
			}
		}
		fmt.Println(trace, "differ:", n)
	}
}
