package coflowsim

import (
	"fmt"
	"github.com/falconml/falcon/coflow"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// DBG2=<jobid> prints the rates of that job's flows after every allocation.
func TestDbg2(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	id, _ := strconv.Atoi(os.Getenv("DBG2"))
	if id == 0 {
		t.Skip()
	}
	trace := os.Getenv("TRACE")
	f, _ := os.Open(filepath.Join(dir, trace+".txt"))
	tr, _ := coflow.ReadTrace(f)
	dumpHook = func(s *sim) {
		for _, j := range s.active {
			if j.id != id {
				continue
			}
			fmt.Printf("t=%d job %d:", s.now, id)
			for _, f := range j.flows {
				fmt.Printf(" %d>%d:%.2f/%.1f", f.src, f.dst, f.rate/8/mib, f.rem/mib)
			}
			fmt.Println()
		}
	}
	defer func() { dumpHook = nil }()
	res, err := Run(tr, os.Getenv("SCHED"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records[:8] {
		fmt.Print(r.FinishMs, " ")
	}
	fmt.Println()
}
