package coflowsim

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// shareSkipped counts, at each port, only the flows whose two ports both
// have capacity; a flow with a full port gets nothing and does not dilute
// the others' shares.
func TestShareSkippedCountsOpenFlows(t *testing.T) {
	sendFree := []float64{1, 1, 0}
	recvFree := []float64{1, 0.5, 1}
	fl := []*flow{
		{src: 0, dst: 0}, // min(1/2, 1/2)
		{src: 0, dst: 1}, // min(1/2, 0.5/1)
		{src: 2, dst: 0}, // sender full: 0, not counted at receiver 0
		{src: 1, dst: 0}, // min(1/1, 1/2)
	}
	shareSkipped(fl, sendFree, recvFree)
	for i, want := range []float64{0.5, 0.5, 0, 0.5} {
		if !near(fl[i].rate, want) {
			t.Errorf("flow %d: rate %v, want %v", i, fl[i].rate, want)
		}
	}
	for p, want := range []float64{0, 0.5, 0} {
		if !near(sendFree[p], want) {
			t.Errorf("send port %d: %v free, want %v", p, sendFree[p], want)
		}
	}
	for p, want := range []float64{0, 0, 1} {
		if !near(recvFree[p], want) {
			t.Errorf("receive port %d: %v free, want %v", p, recvFree[p], want)
		}
	}
}

// fairShareJob is the same split for one coflow; finished flows take part
// in nothing.
func TestFairShareJob(t *testing.T) {
	sendFree := []float64{1, 0.25}
	recvFree := []float64{1, 1}
	j := &job{flows: []*flow{
		{src: 0, dst: 0, rem: 1},
		{src: 0, dst: 1, rem: 1},
		{src: 1, dst: 1, rem: 1},
		{src: 1, dst: 0, done: true},
	}}
	fairShareJob(j, sendFree, recvFree, make([]int, 2), make([]int, 2), make([]float64, 2), make([]float64, 2))
	for i, want := range []float64{0.5, 0.5, 0.25, 0} {
		if !near(j.flows[i].rate, want) {
			t.Errorf("flow %d: rate %v, want %v", i, j.flows[i].rate, want)
		}
	}
	if !near(recvFree[1], 0.25) || !near(sendFree[0], 0) || !near(sendFree[1], 0) {
		t.Errorf("free after: send %v recv %v", sendFree, recvFree)
	}
}

// fairShareJob takes its rates off a port summed first: three flows from
// sender 0 limited by their receivers to 0.1, 0.2 and 0.3 leave
// 1 − (0.1 + 0.2 + 0.3), which differs in the last bit from
// ((1 − 0.1) − 0.2) − 0.3.
func TestFairShareJobTakesOffPerPortSums(t *testing.T) {
	sendFree := []float64{1, 1, 1, 1}
	recvFree := []float64{1, 0.1, 0.2, 0.3}
	j := &job{flows: []*flow{{src: 0, dst: 1, rem: 1}, {src: 0, dst: 2, rem: 1}, {src: 0, dst: 3, rem: 1}}}
	one, r1, r2, r3 := 1.0, recvFree[1], recvFree[2], recvFree[3] // float64 arithmetic, not constants
	fairShareJob(j, sendFree, recvFree, make([]int, 4), make([]int, 4), make([]float64, 4), make([]float64, 4))
	sum := one - (r1 + r2 + r3)
	seq := ((one - r1) - r2) - r3
	if sum == seq {
		t.Fatal("the case does not tell the two apart")
	}
	if sendFree[0] != sum {
		t.Fatalf("sender 0 left %v, want 1 − (0.1 + 0.2 + 0.3) = %v (one subtraction per flow: %v)", sendFree[0], sum, seq)
	}
}

// The backfill visits a coflow's flows by sender port, then receiver
// port, not in the trace's reducer-major order: here the flow 0→2 (second
// in trace order) takes sender 0's spare capacity before 0→3.
func TestBackfillPortOrder(t *testing.T) {
	s := &sim{cfg: DefaultConfig(), ports: 4, sendFree: []float64{1, 1, 1, 1}, recvFree: []float64{1, 1, 1, 1}}
	j := &job{flows: []*flow{{src: 0, dst: 3, rem: 1}, {src: 0, dst: 2, rem: 1}}}
	s.active = []*job{j}
	s.backfill()
	if j.flows[0].rate != 0 || j.flows[1].rate != 1 {
		t.Fatalf("rates 0→3 %v, 0→2 %v; want 0 and 1", j.flows[0].rate, j.flows[1].rate)
	}
}

// PFP serves a receiver's smaller flow first. Coflow 2 arrives exactly at
// 10,240 ms and is admitted with coflow 1 at 0 (an arrival on an epoch
// boundary joins the epoch before); its 1000 MiB flow then goes before
// coflow 1's 2000 MiB one. The reference simulator prints these times.
func TestPFPSmallerFlowFirst(t *testing.T) {
	tr := mustTrace(t, "3 2\n1 0 1 0 1 1:2000.0\n2 10240 1 2 1 1:1000.0\n")
	res, err := Run(tr, "PFP", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := res.Records[0], res.Records[1]
	if r1.FinishMs != 24000 || r2.StartMs != 0 || r2.FinishMs != 8000 {
		t.Fatalf("coflow 1 finishes %d, coflow 2 starts %d and finishes %d; want 24000, 0, 8000",
			r1.FinishMs, r2.StartMs, r2.FinishMs)
	}
}

// LCF weighs a coflow by the trace's megabytes before coflowsim's rounding:
// coflow 1 (1 MB over 3 mappers, rounded to 3 MiB) goes before coflow 2
// (2 MB from one mapper) at the receiver they share.
func TestLCFUsesUnroundedBytes(t *testing.T) {
	tr := mustTrace(t, "5 2\n1 0 3 0 1 2 1 3:1.0\n2 0 1 4 1 3:2.0\n")
	res, err := Run(tr, "LCF", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := res.Records[0].FinishMs, res.Records[1].FinishMs; a != 24 || b != 40 {
		t.Fatalf("finish %d and %d ms; want 24 and 40", a, b)
	}
}
