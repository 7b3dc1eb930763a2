package coflowsim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/falconml/falcon/coflow"
)

func TestDbg3(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	if os.Getenv("DBG3") == "" {
		t.Skip()
	}
	f, _ := os.Open(filepath.Join(dir, "synth-a.txt"))
	tr, _ := coflow.ReadTrace(f)
	old := variant
	defer func() { variant = old }()
	for _, sf := range []int{0, 1, 2, 3, 4, 5, 9, 10} {
		variant = variantT{skipFair: sf, fairMode: 1}
		res, _ := Run(tr, "FIFO", DefaultConfig())
		fmt.Print(sf, ": ")
		for _, r := range res.Records[:8] {
			fmt.Print(r.FinishMs, " ")
		}
		fmt.Println()
	}
}
