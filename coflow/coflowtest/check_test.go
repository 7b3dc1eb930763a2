package coflowtest_test

import (
	"errors"
	"testing"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
)

func TestCheckAllocation(t *testing.T) {
	fab := coflow.NewFabric(3, 10).SetCores(1)
	fab.Codecs = []coflow.CodecProfile{{Name: "c", CompressSpeed: 5, DecompressSpeed: 5, Ratio: 0.5}}
	st := coflowtest.NewState(fab).
		Coflow(1, 0, coflowtest.F(0, 1, 100), coflowtest.F(0, 2, 100)).
		Coflow(2, 0, coflowtest.F(2, 1, 100)).State()
	a := func(c, f int, r float64) coflow.Allocation {
		return coflow.Allocation{Flow: coflow.FlowRef{Coflow: c, Flow: f}, Rate: r}
	}
	tests := []struct {
		name   string
		allocs []coflow.Allocation
		checks []coflowtest.Check
		ok     bool
	}{
		{"valid, conserving", []coflow.Allocation{a(0, 0, 5), a(0, 1, 5), a(1, 0, 5)}, []coflowtest.Check{coflowtest.WorkConserving}, true},
		{"valid, idle flow 2->1", []coflow.Allocation{a(0, 0, 5), a(0, 1, 5)}, nil, true},
		{"not conserving", []coflow.Allocation{a(0, 0, 5), a(0, 1, 5)}, []coflowtest.Check{coflowtest.WorkConserving}, false},
		{"ingress over", []coflow.Allocation{a(0, 0, 6), a(0, 1, 5)}, nil, false},
		{"egress over", []coflow.Allocation{a(0, 0, 6), a(1, 0, 5)}, nil, false},
		{"unknown flow", []coflow.Allocation{a(3, 0, 1)}, nil, false},
		{"duplicate", []coflow.Allocation{a(0, 0, 1), a(0, 0, 1)}, nil, false},
		{"cores over", []coflow.Allocation{{Flow: coflow.FlowRef{}, Rate: 1, Codec: 1, SendCores: 2, RecvCores: 1}}, nil, false},
		{"compressed ok", []coflow.Allocation{{Flow: coflow.FlowRef{}, Rate: 1, Codec: 1, SendCores: 1, RecvCores: 1}}, nil, true},
		// coflow.Sim rejects this; CheckAllocation used to accept it.
		{"compressed without cores", []coflow.Allocation{{Flow: coflow.FlowRef{}, Rate: 1, Codec: 1}}, nil, false},
		{"unknown check", []coflow.Allocation{a(0, 0, 5)}, []coflowtest.Check{99}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := coflowtest.Checker(tc.checks...)(0, st, tc.allocs)
			if tc.ok && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tc.ok && !errors.Is(err, coflowtest.ErrCheck) {
				t.Fatalf("err = %v, want ErrCheck", err)
			}
			if len(tc.checks) == 0 {
				// Without optional checks Checker is CheckAllocation, whose
				// errors also carry the simulator's sentinel.
				err2 := coflowtest.CheckAllocation(0, st, tc.allocs)
				if (err == nil) != (err2 == nil) || err2 != nil && !errors.Is(err2, coflow.ErrBadAllocation) {
					t.Fatalf("Checker() = %v, CheckAllocation = %v", err, err2)
				}
			}
		})
	}
}

func TestBuilder_Loads(t *testing.T) {
	st := coflowtest.NewState(coflow.NewFabric(3, 10)).
		Coflow(7, 0, coflowtest.FlowSpec{Src: 0, Dst: 1, Bytes: 10, Remaining: 4}, coflowtest.F(0, 2, 3)).State()
	c := st.Coflows[0]
	if c.Sent != 6 || c.Remaining() != 7 || len(c.Send) != 1 || c.Send[0].Bytes != 7 || len(c.Recv) != 2 {
		t.Fatalf("state %+v", c)
	}
}

func TestClock(t *testing.T) {
	var c coflowtest.Clock
	if c.Advance(5) != 5 || c.Now() != 5 {
		t.Fatal("clock did not advance")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("negative advance did not panic")
		}
	}()
	c.Advance(-1)
}

func TestSharedData_Env(t *testing.T) {
	t.Setenv("FALCON_SHARED", t.TempDir())
	if _, err := coflowtest.SharedData("nope"); !errors.Is(err, coflowtest.ErrNoSharedData) {
		t.Fatalf("err = %v", err)
	}
}
