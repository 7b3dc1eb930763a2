package ps_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"golang.org/x/sync/errgroup"
)

// TestCluster_TCP runs every role on its own TCP transport on 127.0.0.1
// (with a shared secret), trains the linear regression under SSP(1) and
// checks convergence: the same code as in-process, over real sockets.
func TestCluster_TCP(t *testing.T) {
	ctx := context.Background()
	secret := []byte("falcon-test-secret")
	servers := []transport.NodeID{"server-0", "server-1"}
	workers := []transport.NodeID{"worker-0", "worker-1"}
	var nodes []*transport.TCP
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	join := func(id transport.NodeID, h transport.Handler) *transport.TCP {
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id, Secret: secret}, h)
		must(t, err)
		nodes = append(nodes, tr)
		return tr
	}
	for _, id := range servers {
		s, err := ps.NewServer(string(id), ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
		must(t, err)
		join(id, s)
	}
	co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 2, Batch: 8}, Servers: servers, Workers: workers}, epsp.NewSSP(1))
	must(t, err)
	defer co.Close()
	ctr := join("coordinator", co)
	var ws []*ps.Worker
	var wtrs []*transport.TCP
	for i, id := range workers {
		w, err := ps.NewWorker(string(id), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: "coordinator",
			Client: ps.ClientConfig{Servers: servers, Partitioner: layout.Hash{Servers: 2}}})
		must(t, err)
		defer w.Close()
		ws = append(ws, w)
		wtrs = append(wtrs, join(id, w))
	}
	// Every node knows every other's address.
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.AddPeer(b.LocalID(), b.Addr().String())
			}
		}
	}
	must(t, co.Start(ctx, ctr))
	for i, w := range ws {
		must(t, w.Start(ctx, wtrs[i]))
	}
	must(t, co.WaitWorkers(ctx))
	model := linReg{n: 64}
	// Two keys (w and b) on different servers under the hash partitioner.
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Init: store.Zeros{}, Clocks: 150}
	var g errgroup.Group
	for _, w := range ws {
		g.Go(func() error {
			_, err := w.Train(ctx, model, ps.ShardSampler{N: model.n, Workers: 2}, tc)
			return err
		})
	}
	must(t, g.Wait())
	p := make([]float32, 2)
	must(t, ws[0].Client().Pull(ctx, []uint64{0, 1}, p, nil))
	if math.Abs(float64(p[0])-3) > 0.05 || math.Abs(float64(p[1])+1) > 0.05 {
		t.Errorf("params = %v, want ≈ [3 -1]", p)
	}
	if st := co.Stats(); st.MaxLead > 1 || st.Applied != 2*150 {
		t.Errorf("stats: lead %d, applied %d", st.MaxLead, st.Applied)
	}
}

// A worker with the wrong secret fails its start at once, naming the
// server that refused it, instead of retrying until StartTimeout.
func TestStart_WrongSecretFailsFast(t *testing.T) {
	s, err := ps.NewServer("server-0", ps.ServerConfig{})
	must(t, err)
	str, err := transport.NewTCP(transport.TCPConfig{ID: "server-0", Secret: []byte("the right secret")}, s)
	must(t, err)
	defer str.Close()
	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: "coordinator", StartTimeout: 10 * time.Second,
		Client: ps.ClientConfig{Servers: []transport.NodeID{"server-0"}}})
	must(t, err)
	defer w.Close()
	wtr, err := transport.NewTCP(transport.TCPConfig{ID: "worker-0", Secret: []byte("the wrong secret")}, w)
	must(t, err)
	defer wtr.Close()
	wtr.AddPeer("server-0", str.Addr().String())
	start := time.Now()
	err = w.Start(context.Background(), wtr)
	if !errors.Is(err, transport.ErrUnauthorized) || !strings.Contains(err.Error(), "server-0") {
		t.Fatalf("Start = %v, want an unauthorized error naming server-0", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Start took %v: it retried a refused handshake", d)
	}
}
