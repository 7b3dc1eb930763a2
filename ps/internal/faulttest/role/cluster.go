package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// runCluster runs node o.id of a cluster started with ps.NewCluster, one
// node per process, as cmd/falcon-cluster does: BSP, batch 8, the lease of
// -lease (its timeout; Interval a quarter) with -lost, worker heartbeats
// every lease/8 and a coordinator timeout of 4 leases. It prints:
//
//	ready                      (coordinator, servers: up)
//	clock N                    (worker: starts clock N)
//	pulled N                   (worker: has clock N's parameters; it computes, then pushes)
//	trained                    (worker: its Train returned)
//	final <hex> loss <g>       (coordinator: the trained parameters and their loss)
//	flushes N                  (coordinator: the run is over)
//	samples c:n c:n ...        (server: samples applied per clock, less those a flush left out, at the end)
//	error: ...                 (any node: how the run failed for it)
func runCluster(o opts) error {
	peers := map[transport.NodeID]string{}
	for _, kv := range strings.Split(o.peers, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("bad -peers entry %q", kv)
		}
		peers[transport.NodeID(k)] = v
	}
	id := transport.NodeID(o.id)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	var mu sync.Mutex
	perClock := map[int]int{} // server: samples applied or buffered per clock
	obs := event.Func(func(e event.Event) {
		switch {
		case e.Kind == event.Applied && e.Node == o.id:
			mu.Lock()
			perClock[e.Clock] += e.Samples
			mu.Unlock()
		case e.Kind == event.LeftOut && e.Node == o.id: // a lost worker's push the flush dropped
			mu.Lock()
			perClock[e.Clock] -= e.Samples
			mu.Unlock()
		case e.Kind == event.ClockStart:
			fmt.Printf("clock %d\n", e.Clock)
		case e.Kind == event.Pulled:
			fmt.Printf("pulled %d\n", e.Clock)
		}
	})
	lc := ps.LeaseConfig{Timeout: o.lease, Interval: o.lease / 4}
	if o.lost == "continue" {
		lc.OnWorkerLost = ps.ContinueWithout
	}
	cfg := ps.ClusterConfig{
		Servers: o.servers, Workers: o.workers, TCP: true, Local: []transport.NodeID{id},
		Listen: peers[id], Peers: peers, Secret: []byte("faulttest secret!"),
		Policy: epsp.NewBSP(), EPSP: epsp.Config{Batch: 8, Parallelism: 1},
		Store:              store.Config{Optimizer: store.Adam{LR: float32(o.lr)}, Deterministic: o.det},
		CoordinatorWait:    o.coordWait,
		Lease:              lc,
		Heartbeat:          o.lease / 8,
		CoordinatorTimeout: 4 * o.lease,
		StartTimeout:       10 * time.Second,
		Observer:           obs,
	}
	if o.coordDir != "" {
		cfg.CoordinatorStore = ps.DirCoordinatorStore(o.coordDir)
	}
	c, err := ps.NewCluster(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	switch o.role {
	case "server":
		fmt.Println("ready")
		err := c.Wait(ctx)
		mu.Lock()
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(perClock)) {
			parts = append(parts, fmt.Sprintf("%d:%d", k, perClock[k]))
		}
		mu.Unlock()
		fmt.Printf("samples %s\n", strings.Join(parts, " "))
		return err
	case "coordinator":
		fmt.Println("ready")
		if err := c.WaitTrained(ctx); err != nil {
			c.Wait(ctx) // tell the others
			return err
		}
		keys, lens := []uint64{0, 1}, []int{3, 3}
		out := make([]float32, 6)
		if err := c.Client().Pull(ctx, keys, out, lens); err != nil {
			return err
		}
		all := make([]int, 64)
		for i := range all {
			all[i] = i
		}
		fmt.Printf("final %x loss %g\n", out, regression{}.Gradient(out, all, make([]float32, 6))/64)
		fmt.Printf("flushes %d\n", c.Coordinator().Stats().Flushes)
		return c.Wait(ctx)
	case "worker":
		keys, lens := []uint64{0, 1}, []int{3, 3}
		if _, err := c.Train(ctx, regression{o.delay}, ps.ShardSampler{N: 64, Workers: o.workers},
			ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: o.clocks}); err != nil {
			return err
		}
		fmt.Println("trained")
		return c.Wait(ctx)
	}
	return fmt.Errorf("unknown -role %q", o.role)
}
