package coflowsim

import (
	"fmt"
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
	tr, _ := ReadTrace(f)
	res, err := Run(tr, os.Getenv("SCHED"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records[:8] {
		fmt.Println(r.ID, r.StartMs, r.FinishMs)
	}
}
