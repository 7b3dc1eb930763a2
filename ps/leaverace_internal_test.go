package ps

import (
	"context"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

type oneModel struct{}

func (oneModel) Gradient(_ []float32, samples []int, grad []float32) float64 {
	grad[0] += float32(len(samples))
	return 0
}

// A coordinator ends the run (Cluster.Wait's shutdown) once it has counted
// every member's leave, so the shutdown can reach a worker before the
// answer to its leave does: a successor coordinator restored with the leave
// already counted ends the run while the worker still backs off to resend
// it (CI: TestCluster_AbandonSuccessorFinishes failed with "the coordinator
// ended the run (while: worker-0: context canceled)"). Such a worker has
// trained every clock; its Train ends without error.
func TestTrain_RunOverDuringLeaveIsNoError(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, err := NewServer("s0", DefaultServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	st, err := net.Join("s0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP = epsp.Config{NumWorkers: 1, Batch: 4}
	cfg.Servers = []transport.NodeID{"s0"}
	cfg.Workers = []transport.NodeID{"w0"}
	co, err := NewCoordinator(cfg, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	ct, err := net.Join("coordinator", co)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := co.Start(ctx, ct); err != nil {
		t.Fatal(err)
	}
	defer func() { co.Close(); ct.Close() }()
	wc := DefaultWorkerConfig()
	wc.Coordinator = "coordinator"
	wc.Client.Servers = []transport.NodeID{"s0"}
	w, err := NewWorker("w0", wc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wt, err := net.Join("w0", w)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	left := false
	hooked := transporttest.WithHooks(wt, transporttest.Hooks{AfterRequest: func(to transport.NodeID, req, resp []byte, err error) ([]byte, error) {
		if op, _, herr := wire.Header(req); herr == nil && op == wire.OpLeave && err == nil {
			// the coordinator counted the leave; its answer is lost and
			// the run's end arrives first
			left = true
			cancel(errRunOver)
			return nil, transport.ErrUnreachable
		}
		return resp, err
	}})
	if err := w.Start(ctx, hooked); err != nil {
		t.Fatal(err)
	}
	_, err = w.Train(tctx, oneModel{}, ShardSampler{N: 16, Workers: 1}, TrainConfig{Keys: []uint64{0}, Lens: []int{1}, Init: store.Zeros{}, Clocks: 3})
	if !left {
		t.Fatal("the worker never left")
	}
	if err != nil {
		t.Fatalf("Train of a worker whose leave was counted before the run ended: %v", err)
	}
}
