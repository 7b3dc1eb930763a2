package ps_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
)

// slowAt is a model whose gradient is the sample count and which sleeps
// for d in clock at.
type slowAt struct {
	at int
	d  time.Duration
}

func (m slowAt) Gradient(params []float32, samples []int, grad []float32) float64 {
	if len(samples) > 0 && samples[0]/1000 == m.at {
		time.Sleep(m.d)
	}
	for i := range grad {
		grad[i] += float32(len(samples))
	}
	return 0
}

// TestLease_ContinueWithoutReleaseToDeadWorker: under ContinueWithout, a
// worker that dies once the coordinator has its clock 2, while the others
// still compute, cannot be sent its release of clock 3. That used to abort
// the run ("ps: release of worker-1: transport: peer unreachable", the
// finding over TCP); now the lease declares it lost at its next check,
// naming it, and the run goes on: its clock-3 batch is handed to a
// survivor, and the servers receive the survivors' clocks and the
// victim's clocks 0 to 3, each sample once.
func TestLease_ContinueWithoutReleaseToDeadWorker(t *testing.T) {
	var applied atomic.Int64
	var c *pstest.Cluster
	var once sync.Once
	killed := make(chan struct{})
	obs := event.Func(func(e event.Event) {
		switch {
		case e.Kind == event.Applied:
			applied.Add(int64(e.Samples))
		case e.Kind == event.ClockDone && e.Worker == 1 && e.Clock == 2:
			once.Do(func() { c.Net.Kill("worker-1"); close(killed) })
		}
	})
	var lost atomic.Value
	const batch, clocks = 4, 5
	c = pstest.NewCluster(t, pstest.Workers(3), pstest.Batch(batch), pstest.Policy(epsp.NewBSP()), pstest.NoLeakCheck(), pstest.Observer(event.Func(func(e event.Event) {
		obs(e)
		if e.Kind == event.WorkerLost {
			lost.Store(e.Worker)
		}
	})),
		pstest.Lease(ps.LeaseConfig{Timeout: 5 * time.Second, Interval: testInterval, OnWorkerLost: ps.ContinueWithout}), pstest.Heartbeat(testHeartbeat, 10*time.Second))
	// the survivors are slow in clock 2, so worker-1 has pushed and died
	// before the barrier passes and its release is sent
	res := trainAll(c, func(w int) ps.Model {
		if w == 1 {
			return slowAt{}
		}
		return slowAt{at: 2, d: 200 * time.Millisecond}
	}, clocks)
	for _, w := range []int{0, 2} {
		if r := <-res[w]; r.err != nil {
			t.Fatalf("worker-%d: %v", w, r.err)
		}
	}
	<-killed
	if err := c.Coordinator.Err(); err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	if w, _ := lost.Load().(epsp.WorkerID); w != 1 {
		t.Errorf("lost worker %v, want worker-1", lost.Load())
	}
	if got, want := applied.Load(), int64(2*clocks*batch+4*batch); got != want {
		t.Errorf("servers received %d samples, want %d", got, want)
	}
}
