package ps_test

import (
	"context"
	"fmt"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"golang.org/x/sync/errgroup"
)

// A server applying SGD and a client pushing and pulling two keys of
// width 2 over the in-process transport.
func Example_pushPull() {
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, _ := ps.NewServer("server-0", ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
	net.Join("server-0", srv)
	tr, _ := net.Join("worker-0", ps.ClientHandler{})
	cl, _ := ps.NewClient(tr, ps.ClientConfig{Servers: []transport.NodeID{"server-0"}, Width: 2})

	ctx := context.Background()
	keys := []uint64{3, 7}
	cl.Init(ctx, keys, []float32{1, 1, 2, 2}, nil)
	cl.Push(ctx, keys, []float32{1, 2, 3, 4}, nil) // w ← w − 0.5·g
	vals := make([]float32, 4)
	cl.Pull(ctx, keys, vals, nil)
	fmt.Println(vals)
	// Output: [0.5 0 0.5 0]
}

// linReg is y = w·x + b with squared loss over samples x_i = i/n,
// y_i = 3·x_i − 1.
type linReg struct{ n int }

func (m linReg) Gradient(p []float32, samples []int, grad []float32) float64 {
	loss := 0.0
	for _, s := range samples {
		x := float32(s) / float32(m.n)
		e := p[0]*x + p[1] - (3*x - 1)
		grad[0] += e * x
		grad[1] += e
		loss += float64(e*e) / 2
	}
	return loss
}

// A whole cluster in one process: a server, a BSP coordinator and two
// workers training a linear regression with the Worker runtime.
func Example_training() {
	ctx := context.Background()
	net := transport.NewInmemNetwork()
	defer net.Close()
	servers := []transport.NodeID{"server-0"}
	workers := []transport.NodeID{"worker-0", "worker-1"}

	srv, _ := ps.NewServer("server-0", ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
	net.Join("server-0", srv)

	co, _ := ps.NewCoordinator(ps.CoordinatorConfig{
		EPSP:    epsp.Config{NumWorkers: 2, Batch: 8},
		Servers: servers, Workers: workers,
	}, epsp.NewBSP())
	ctr, _ := net.Join("coordinator", co)
	if err := co.Start(ctx, ctr); err != nil {
		fmt.Println(err)
		return
	}
	defer co.Close()

	var ws []*ps.Worker
	for i, name := range workers {
		w, _ := ps.NewWorker(string(name), ps.WorkerConfig{
			ID: epsp.WorkerID(i), Coordinator: "coordinator", Client: ps.ClientConfig{Servers: servers},
		})
		wtr, _ := net.Join(name, w)
		if err := w.Start(ctx, wtr); err != nil {
			fmt.Println(err)
			return
		}
		defer w.Close()
		ws = append(ws, w)
	}

	model := linReg{n: 64}
	tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{2}, Init: store.Zeros{}, Clocks: 200}
	var g errgroup.Group
	stats := make([]ps.TrainStats, len(ws))
	for i, w := range ws {
		g.Go(func() (err error) {
			stats[i], err = w.Train(ctx, model, ps.ShardSampler{N: model.n, Workers: 2}, tc)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	p := make([]float32, 2)
	ws[0].Client().Pull(ctx, []uint64{0}, p, []int{2})
	l := stats[0].Loss
	fmt.Printf("w=%.2f b=%.2f\n", p[0], p[1])
	fmt.Printf("loss fell from %.2f to %.4f\n", l[0], l[len(l)-1])
	// Output:
	// w=3.00 b=-1.00
	// loss fell from 0.25 to 0.0000
}
