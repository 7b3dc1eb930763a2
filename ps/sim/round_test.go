package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/straggler"
)

func TestRoundWork(t *testing.T) {
	tests := []struct {
		n, p, chunk int
		want        float64
	}{
		{n: 8, p: 4, chunk: 2, want: 8},   // one full round
		{n: 16, p: 4, chunk: 2, want: 16}, // two full rounds
		{n: 5, p: 4, chunk: 2, want: 8},   // claims 2,2,1: the longest is 2 of 4 goroutines' time
		{n: 1, p: 4, chunk: 2, want: 4},   // one sample on one of four goroutines
		{n: 9, p: 4, chunk: 2, want: 12},  // a full round, then one sample
		{n: 3, p: 1, chunk: 2, want: 3},   // one goroutine: work is samples
		{n: 12, p: 6, chunk: 2, want: 12}, // the straggler's round at p=6
		{n: 13, p: 6, chunk: 2, want: 18},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d,p=%d,chunk=%d", tt.n, tt.p, tt.chunk), func(t *testing.T) {
			if got := roundWork(tt.n, tt.p, tt.chunk); got != tt.want {
				t.Fatalf("roundWork = %v, want %v", got, tt.want)
			}
		})
	}
}

// Progress reports count the round in progress as claimed, not done, and
// Done grows by whole rounds.
func TestRun_ProgressClaimsRound(t *testing.T) {
	train, test, err := model.Synthetic(model.SyntheticConfig{Seed: 3, Train: 400, Test: 100})
	if err != nil {
		t.Fatal(err)
	}
	speed, err := straggler.NewHetero(straggler.DefaultHeteroConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	var reports []epsp.ProgressReport
	rec := &recordingPolicy{Policy: epsp.NewBSP(), seen: func(e epsp.Event) {
		if e.Kind == epsp.EventProgress {
			reports = append(reports, e.Progress)
		}
	}}
	cfg := DefaultConfig()
	cfg.Workers, cfg.Batch, cfg.Parallelism, cfg.Chunk = 2, 24, 2, 3
	cfg.Duration = 200 * time.Millisecond
	if _, err := Run(cfg, Job{Model: model.NewSoftmax(train.D, train.Classes), Train: train, Test: test, Speed: speed, Policy: rec}); err != nil {
		t.Fatal(err)
	}
	if len(reports) == 0 {
		t.Fatal("no progress reports")
	}
	for _, r := range reports {
		if r.Done%6 != 0 || r.Claimed != r.Done+6 || r.Assigned != 24 {
			t.Fatalf("report %+v: want Done a multiple of the 6-sample round and Claimed = Done+6 of 24", r)
		}
	}
}

// recordingPolicy passes every event the coordinator accepts to seen.
type recordingPolicy struct {
	epsp.Policy
	seen func(epsp.Event)
}

func (p *recordingPolicy) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	p.seen(e)
	return p.Policy.Step(now, v, e)
}
