package pstest

import (
	"context"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/store"
)

// PolicyRun configures RunPolicy. Zero fields take the defaults noted.
type PolicyRun struct {
	Workers int // default 3
	Clocks  int // default 6
	Batch   int // initial batch, default 16
	// Straggler is worker 0's delay per computed chunk (default 2 ms);
	// Fast is every other worker's (default 100 µs).
	Straggler, Fast time.Duration
	// Timeout bounds the whole run (default 20 s).
	Timeout time.Duration
}

// RunPolicy is a live conformance check for a synchronisation policy: it
// runs the policy made by newPolicy on a NewCluster (2 servers, chunks of 2
// samples, a progress report per chunk, a 2 ms control tick, a small random
// network delay; opts are applied after these) with worker 0 slowed down,
// and checks the runtime contract end to end: training ends, and every
// sample of every clock is computed exactly once, whatever transfers,
// parallelism or batch changes the policy orders (CheckExactlyOnce).
//
// Every worker must run all its clocks: a policy that counts steps rather
// than clocks (Sync-opt's backup workers) must stop counting the workers
// that have left (epsp.EventLeave) instead of leaving the last one waiting.
// RunPolicy returns the coordinator's stats.
func RunPolicy(t *testing.T, newPolicy func() epsp.Policy, run PolicyRun, opts ...Option) epsp.Stats {
	t.Helper()
	if run.Workers == 0 {
		run.Workers = 3
	}
	if run.Clocks == 0 {
		run.Clocks = 6
	}
	if run.Batch == 0 {
		run.Batch = 16
	}
	if run.Straggler == 0 {
		run.Straggler = 2 * time.Millisecond
	}
	if run.Fast == 0 {
		run.Fast = 100 * time.Microsecond
	}
	if run.Timeout == 0 {
		run.Timeout = 20 * time.Second
	}
	rec := &Recorder{}
	base := []Option{Servers(2), Workers(run.Workers), Batch(run.Batch), Chunk(2), ProgressEvery(1),
		TickPeriod(2 * time.Millisecond), Optimizer(store.SGD{LR: 0.01}), Observer(rec), Policy(newPolicy())}
	c := NewCluster(t, append(base, opts...)...)
	c.Net.SetDelay(20*time.Microsecond, 100*time.Microsecond)

	ctx, cancel := context.WithTimeout(context.Background(), run.Timeout)
	defer cancel()
	tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{run.Workers * run.Clocks}, Init: store.Zeros{}, Clocks: run.Clocks}
	type result struct {
		i   int
		err error
	}
	results := make(chan result, run.Workers)
	for i, w := range c.Workers {
		d := run.Fast
		if i == 0 {
			d = run.Straggler
		}
		m := &LedgerModel{Workers: run.Workers, Clocks: run.Clocks, Staleness: -1,
			Delay: func(epsp.WorkerID, int) time.Duration { return d }}
		go func() {
			_, err := w.Train(ctx, m, LedgerSampler{Clocks: run.Clocks}, tc)
			results <- result{i, err}
		}()
	}
	complete := make([]int, run.Workers)
	for range run.Workers {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("%s: %v", c.WorkerIDs[r.i], r.err)
			}
			complete[r.i] = run.Clocks
		case <-ctx.Done():
			t.Fatalf("training did not end within %v (a worker left waiting for a release?)", run.Timeout)
		}
	}
	CheckExactlyOnce(t, rec.Events(), complete)
	return c.Coordinator.Stats()
}
