package ps_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
)

// TestObserver_Causal replays a recorded run in Seq order the way an
// observer-based checker would, and requires what the run guarantees:
// under BSP no release into clock k comes before every worker's
// EvClockDone of clock k−1, and under SSP(1) the lead recomputed from the
// events equals the coordinator's own MaxLead. (With EvClockDone emitted
// after the releases it caused, the replay saw releases into clocks whose
// barrier it had not seen complete, and leads far beyond the true one.)
func TestObserver_Causal(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  epsp.Policy
		bsp  bool
	}{{"bsp", epsp.NewBSP(), true}, {"ssp1", epsp.NewSSP(1), false}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &pstest.Recorder{}
			const nw, clocks = 3, 12
			c := pstest.NewCluster(t, pstest.Workers(nw), pstest.Policy(tc.pol), pstest.Observer(rec), pstest.Batch(4), pstest.Chunk(2))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.TrainWith(ctx, func(w int) ps.Model {
				if w == 0 {
					return delayed{linReg{n: 48}, 300 * time.Microsecond}
				}
				return linReg{n: 48}
			}, ps.ShardSampler{N: 48, Workers: nw}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{2}, Init: store.Zeros{}, Clocks: clocks})
			if err != nil {
				t.Fatal(err)
			}
			ev := rec.Events()
			slices.SortFunc(ev, func(a, b event.Event) int { return int(a.Seq) - int(b.Seq) })
			for i := 1; i < len(ev); i++ {
				if ev[i].Seq == ev[i-1].Seq || ev[i].Seq == 0 {
					t.Fatalf("events %d and %d share Seq %d", i-1, i, ev[i].Seq)
				}
			}
			in := make([]int, nw) // the clock each worker is in, per the events
			left := make([]bool, nw)
			lead, releases := 0, 0
			for _, e := range ev {
				switch e.Kind {
				case event.ClockDone:
					in[e.Worker] = e.Clock + 1
				case event.Leave:
					left[e.Worker] = true
				case event.Release:
					releases++
					m, all := int(^uint(0)>>1), int(^uint(0)>>1)
					for w, k := range in {
						all = min(all, k)
						if !left[w] {
							m = min(m, k)
						}
					}
					if m == int(^uint(0)>>1) {
						m = all
					}
					if tc.bsp && m < e.Clock {
						t.Fatalf("seq %d: release of worker %d into clock %d before every worker finished clock %d (clocks %v)", e.Seq, e.Worker, e.Clock, e.Clock-1, in)
					}
					lead = max(lead, e.Clock-m)
				}
			}
			if releases == 0 {
				t.Fatal("no releases observed")
			}
			if want := c.Coordinator.Stats().MaxLead; lead != want {
				t.Errorf("lead from the events %d, coordinator's MaxLead %d", lead, want)
			}
		})
	}
}

type delayed struct {
	linReg
	d time.Duration
}

func (m delayed) Gradient(p []float32, s []int, g []float32) float64 {
	time.Sleep(m.d)
	return m.linReg.Gradient(p, s, g)
}
