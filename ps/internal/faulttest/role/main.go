// Command role runs one process of a small parameter-server cluster over
// loopback TCP for the multi-process fault tests of package faulttest: a
// server, the coordinator or a worker training least squares with BSP.
// Every address is given on the command line; lines on stdout report
// progress ("ready", "clock N", "final <bits>", "error: ...") for the
// test to act on and check.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

type opts struct {
	role, id, peers, dir, lost string
	workers, servers, clocks   int
	lease, retry, delay        time.Duration
	cluster, det               bool
	lr                         float64
	coordDir                   string
	coordWait                  time.Duration
}

func main() {
	var o opts
	flag.StringVar(&o.role, "role", "", "server, coordinator or worker")
	flag.StringVar(&o.id, "id", "", "this node's name")
	flag.StringVar(&o.peers, "peers", "", "name=host:port,... for every node, this one included")
	flag.StringVar(&o.dir, "dir", "", "server: durable state directory (checkpoint every 2 flushes and a request log)")
	flag.StringVar(&o.lost, "lost", "abort", "coordinator: abort or continue on a lost worker")
	flag.IntVar(&o.workers, "workers", 2, "number of workers")
	flag.IntVar(&o.servers, "servers", 2, "number of servers")
	flag.IntVar(&o.clocks, "clocks", 8, "clocks to train")
	flag.DurationVar(&o.lease, "lease", 400*time.Millisecond, "lease timeout (coordinator); a worker's coordinator timeout is 4 times this")
	flag.DurationVar(&o.retry, "retry", 0, "how long requests to a restarting server are resent")
	flag.DurationVar(&o.delay, "delay", 10*time.Millisecond, "worker: compute time per chunk")
	flag.Float64Var(&o.lr, "lr", 0.05, "-cluster: the servers' Adam learning rate")
	flag.StringVar(&o.coordDir, "coord-dir", "", "-cluster: the coordinator's state directory (ClusterConfig.CoordinatorStore)")
	flag.DurationVar(&o.coordWait, "coord-wait", 0, "-cluster: ClusterConfig.CoordinatorWait")
	flag.BoolVar(&o.det, "det", false, "-cluster: deterministic BSP sums (store.Config.Deterministic)")
	flag.BoolVar(&o.cluster, "cluster", false, "run the node through ps.NewCluster (its control messages, Wait and end-of-run notices) instead of the bare roles")
	flag.Parse()
	run := run
	if o.cluster {
		run = runCluster
	}
	if err := run(o); err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(1)
	}
}

func run(o opts) error {
	peers := map[transport.NodeID]string{}
	for _, kv := range strings.Split(o.peers, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("bad -peers entry %q", kv)
		}
		peers[transport.NodeID(k)] = v
	}
	id := transport.NodeID(o.id)
	var servers, workers []transport.NodeID
	for i := range o.servers {
		servers = append(servers, transport.NodeID(fmt.Sprintf("server-%d", i)))
	}
	for i := range o.workers {
		workers = append(workers, transport.NodeID(fmt.Sprintf("worker-%d", i)))
	}
	open := func(h transport.Handler) (*transport.TCP, error) {
		cfg := transport.DefaultTCPConfig()
		cfg.ID, cfg.ListenAddr, cfg.Peers = id, peers[id], peers
		cfg.Secret = []byte("faulttest secret!")
		cfg.MaxReconnectBackoff = 100 * time.Millisecond
		return transport.NewTCP(cfg, h)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	interval := o.lease / 4
	switch o.role {
	case "server":
		cfg := ps.ServerConfig{Store: store.Config{Optimizer: store.Adam{LR: 0.05}}}
		if o.dir != "" {
			cfg.Durable = ps.DurableConfig{Dir: o.dir, Log: true, CheckpointEvery: 2}
		}
		var applied atomic.Int64 // samples applied or buffered, for the test's count
		s, err := ps.NewServer(o.id, cfg, ps.WithObserver(event.Func(func(e event.Event) {
			if e.Kind == event.Applied {
				applied.Add(int64(e.Samples))
			}
		})))
		if err != nil {
			return err
		}
		defer s.Close()
		tr, err := open(s)
		if err != nil {
			return err
		}
		defer tr.Close()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Printf("applied %d\n", applied.Load())
		return nil
	case "coordinator":
		ec := epsp.DefaultConfig()
		ec.NumWorkers, ec.Batch, ec.Parallelism = o.workers, 8, 1
		lc := ps.LeaseConfig{Timeout: o.lease, Interval: interval, ServerRestart: o.retry}
		if o.lost == "continue" {
			lc.OnWorkerLost = ps.ContinueWithout
		}
		co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: ec, Servers: servers, Workers: workers, Lease: lc}, epsp.NewBSP())
		if err != nil {
			return err
		}
		tr, err := open(co)
		if err != nil {
			return err
		}
		defer tr.Close()
		if err := co.Start(ctx, tr); err != nil {
			return err
		}
		defer co.Close()
		fmt.Println("ready")
		for {
			if err := co.Err(); err != nil {
				// stay a moment, so every worker hears the abort (its
				// order or its next heartbeat's answer) rather than
				// finding the coordinator gone
				time.Sleep(500 * time.Millisecond)
				return err
			}
			if st := co.Stats(); st.Left == o.workers {
				fmt.Printf("flushes %d\n", st.Flushes)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	case "worker":
		var idx int
		if _, err := fmt.Sscanf(o.id, "worker-%d", &idx); err != nil {
			return err
		}
		obs := event.Func(func(e event.Event) {
			if e.Kind == event.ClockStart {
				fmt.Printf("clock %d\n", e.Clock)
			}
		})
		wc := ps.DefaultWorkerConfig()
		wc.ID, wc.Coordinator = epsp.WorkerID(idx), "coordinator"
		wc.Client.Servers, wc.Client.Retry = servers, o.retry
		// four leases: a loaded machine must not make a live coordinator
		// look dead (the tests' bounds use the same)
		wc.Heartbeat, wc.CoordinatorTimeout = 50*time.Millisecond, 4*o.lease
		w, err := ps.NewWorker(o.id, wc, ps.WithObserver(obs))
		if err != nil {
			return err
		}
		tr, err := open(w)
		if err != nil {
			return err
		}
		defer tr.Close()
		if err := w.Start(ctx, tr); err != nil {
			return err
		}
		defer w.Close()
		keys, lens := []uint64{0, 1}, []int{3, 3} // one key on each of two servers (Modulo)
		if _, err := w.Train(ctx, regression{o.delay}, ps.ShardSampler{N: 64, Workers: o.workers},
			ps.TrainConfig{Keys: keys, Lens: lens, Init: store.Zeros{}, Clocks: o.clocks}); err != nil {
			return err
		}
		out := make([]float32, 6)
		if err := w.Client().Pull(ctx, keys, out, lens); err != nil {
			return err
		}
		fmt.Printf("final %x\n", out)
		return nil
	}
	return errors.New("unknown -role")
}

// regression is least squares on synthetic data (the same as ps's
// durable test): sample s has features x_j = ((7s+3j) mod 11)/11 − ½ and
// target Σ_j x_j·(j−1).
type regression struct{ delay time.Duration }

func (m regression) Gradient(params []float32, samples []int, grad []float32) float64 {
	time.Sleep(m.delay)
	x := make([]float32, len(params))
	var loss float64
	for _, s := range samples {
		var y, p float32
		for j := range x {
			x[j] = float32((7*s+3*j)%11)/11 - 0.5
			y += x[j] * float32(j-1)
			p += params[j] * x[j]
		}
		r := p - y
		for j := range x {
			grad[j] += r * x[j]
		}
		loss += float64(r * r)
	}
	return loss
}
