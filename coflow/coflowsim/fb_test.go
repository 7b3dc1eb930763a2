package coflowsim

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

func TestFBTiming(t *testing.T) {
	if os.Getenv("FBTIME") == "" {
		t.Skip()
	}
	dir := sharedData(t, "coflow-benchmark")
	f, err := os.Open(filepath.Join(dir, "FB2010-1Hr-150-0.txt"))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	tr, err := coflow.ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	st := time.Now()
	res, err := Run(tr, os.Getenv("FBTIME"), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v, sum %v", os.Getenv("FBTIME"), time.Since(st), res.SumDurationsMs())
}
