package ps_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/straggler"
)

func mustPolicy[P epsp.Policy](p P, err error) epsp.Policy {
	if err != nil {
		panic(err)
	}
	return p
}

// TestPolicies_Live runs every policy of package epsp live, over the
// in-process transport with a network delay and an injected straggler, and
// checks the runtime contract end to end: training finishes, and every
// sample of every clock is computed exactly once — whatever transfers,
// parallelism or batch changes the policy orders.
func TestPolicies_Live(t *testing.T) {
	par := straggler.ParallelismConfig{PMin: 1, PMax: 3}
	policies := []struct {
		name string
		p    func() epsp.Policy
	}{
		{"bsp", func() epsp.Policy { return epsp.NewBSP() }},
		{"asp", func() epsp.Policy { return epsp.NewASP() }},
		{"ssp2", func() epsp.Policy { return epsp.NewSSP(2) }},
		{"epsp-enforced", func() epsp.Policy {
			return mustPolicy(epsp.NewEPSP(epsp.EPSPConfig{Elastic: true, Transfer: true, Parallelism: par}))
		}},
		{"epsp-slack", func() epsp.Policy {
			return mustPolicy(epsp.NewEPSP(epsp.EPSPConfig{Staleness: 1, Elastic: true, Transfer: true, Parallelism: par}))
		}},
		{"flexrr", func() epsp.Policy { return mustPolicy(epsp.NewFlexRR(epsp.DefaultFlexRRConfig())) }},
		{"syncopt", func() epsp.Policy { return mustPolicy(epsp.NewSyncOpt(epsp.DefaultSyncOptConfig())) }},
		{"consgd", func() epsp.Policy { return mustPolicy(epsp.NewConSGD(epsp.DefaultConSGDConfig())) }},
		{"dynsgd", func() epsp.Policy { return mustPolicy(epsp.NewDynSGD(epsp.DefaultDynSGDConfig())) }},
		{"lbbsp", func() epsp.Policy { return mustPolicy(epsp.NewLBBSP(epsp.DefaultLBBSPConfig())) }},
		{"dssp", func() epsp.Policy { return mustPolicy(epsp.NewDSSP(epsp.DefaultDSSPConfig())) }},
	}
	const workers, clocks, batch = 3, 6, 16
	for _, pc := range policies {
		t.Run(pc.name, func(t *testing.T) {
			rec := &pstest.Recorder{}
			c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(2),
				pstest.ProgressEvery(1), pstest.TickPeriod(2*time.Millisecond), pstest.Optimizer(ps.SGD{LR: 0.01}),
				pstest.Observer(rec), pstest.Policy(pc.p()))
			c.Net.SetDelay(20*time.Microsecond, 100*time.Microsecond)
			models := make([]*idModel, workers)
			for i := range models {
				d := 100 * time.Microsecond
				if i == 0 {
					d = 2 * time.Millisecond
				}
				models[i] = &idModel{workers: workers, clocks: clocks, staleness: -1,
					sleep: func(epsp.WorkerID, int) time.Duration { return d }}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{workers * clocks}, Init: ps.Zeros{}, Clocks: clocks}
			complete := clocks
			if pc.name == "syncopt" {
				// Sync-opt counts steps, not clocks: once the fast workers
				// have run their clocks, the straggler's last accepted push
				// waits for N pushes that never come. Stop it when they are
				// done and check only its completed clocks.
				complete = syncOptRun(t, ctx, c, models, tc)
			} else if _, err := c.TrainWith(ctx, func(i int) ps.Model { return models[i] }, idSampler{clocks}, tc); err != nil {
				t.Fatal(err)
			}
			// Exactly once: per (owner, clock) the computed chunks tile
			// [0, batch of that clock) without overlap.
			type oc struct{ owner, clock int }
			seen := map[oc]map[int]int{}
			size := map[oc]int{}
			for _, e := range rec.Events() {
				switch e.Kind {
				case ps.EvChunk:
					k := oc{int(e.Owner), e.Clock}
					if seen[k] == nil {
						seen[k] = map[int]int{}
					}
					for s := e.Lo; s < e.Hi; s++ {
						seen[k][s]++
					}
				case ps.EvPushAdmitted:
					size[oc{int(e.Push.Owner), e.Push.Clock}] = e.Push.BatchSamples
				}
			}
			for o := range workers {
				for k := range clocks {
					key := oc{o, k}
					if o == 0 && k >= complete {
						for s, n := range seen[key] {
							if n > 1 {
								t.Errorf("worker %d clock %d: sample %d computed %d times", o, k, s, n)
							}
						}
						continue
					}
					b := size[key]
					if b == 0 {
						t.Errorf("worker %d clock %d: no push admitted", o, k)
						continue
					}
					if len(seen[key]) != b {
						t.Errorf("worker %d clock %d: %d distinct samples computed, batch %d", o, k, len(seen[key]), b)
					}
					for s, n := range seen[key] {
						if n != 1 || s < 0 || s >= b {
							t.Errorf("worker %d clock %d: sample %d computed %d times (batch %d)", o, k, s, n, b)
						}
					}
				}
			}
			st := c.Coordinator.Stats()
			t.Logf("%s: transfers %d/%d (samples %d), parallelism changes %d, batch changes %d, dropped %d, max lead %d",
				pc.name, st.TransfersAccepted, st.TransfersOrdered, st.SamplesTransferred, st.ParallelismChanges, st.BatchChanges, st.Dropped, st.MaxLead)
		})
	}
}

// syncOptRun trains the fast workers to the end, then stops the straggler
// (worker 0); it returns the number of clocks the straggler completed.
func syncOptRun(t *testing.T, ctx context.Context, c *pstest.Cluster, models []*idModel, tc ps.TrainConfig) int {
	t.Helper()
	slowCtx, stop := context.WithCancel(ctx)
	defer stop()
	slow := make(chan ps.TrainStats, 1)
	go func() {
		st, err := c.Workers[0].Train(slowCtx, models[0], idSampler{tc.Clocks}, tc)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("straggler: %v", err)
		}
		slow <- st
	}()
	var g errgroup.Group
	for i := 1; i < len(c.Workers); i++ {
		g.Go(func() error {
			_, err := c.Workers[i].Train(ctx, models[i], idSampler{tc.Clocks}, tc)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the straggler finish what it can
	stop()
	st := <-slow
	// Its last recorded clock may be the one it was stopped in.
	return max(len(st.Loss)-1, 0)
}
