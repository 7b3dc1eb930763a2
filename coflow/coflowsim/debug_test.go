package coflowsim

import (
	"fmt"
	"github.com/falconml/falcon/coflow"
	"os"
	"path/filepath"
	"testing"
)

func TestDebug(t *testing.T) {
	debugf = func(f string, a ...any) { fmt.Printf(f, a...) }
	defer func() { debugf = nil }()
	dir := sharedData(t, "coflowsim-fixtures")
	trace := os.Getenv("TRACE")
	if trace == "" {
		t.Skip()
	}
	f, _ := os.Open(filepath.Join(dir, trace+".txt"))
	tr, _ := coflow.ReadTrace(f)
	res, err := Run(tr, os.Getenv("SCHED"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records[:8] {
		fmt.Println(r.ID, r.StartMs, r.FinishMs)
	}
}

func TestVariants(t *testing.T) {
	dir := sharedData(t, "coflowsim-fixtures")
	if os.Getenv("VARIANTS") == "" {
		t.Skip()
	}
	old := variant
	defer func() { variant = old }()
	for _, nr := range []bool{false} {
		for _, sc := range []int{0} {
			for _, sf := range []int{9, 10} {
				variant = variantT{noReset: nr, skipCheck: sc, skipFair: sf, fairMode: 1}
				line := fmt.Sprintf("%+v:", variant)
				tot := 0
				for _, sched := range []string{"FIFO", "SEBF", "SCF"} {
					for _, trace := range []string{"synth-a", "synth-b"} {
						st := compareFixture(t, dir, trace, sched)
						line += fmt.Sprintf(" %s/%s=%d", trace, sched, st.matchTimes)
						tot += st.matchTimes
					}
				}
				fmt.Println(tot, line)
			}
		}
	}
}
