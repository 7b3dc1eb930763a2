package live_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/transport"
)

// A coordinator running SEBF and two agents on an in-process network: one
// application registers a one-flow coflow and sends 1 MB from port 0; the
// other receives it at port 1. Over TCP, create the nodes with
// transport.NewTCP (with a shared Secret) instead of Join.
func Example() {
	net := transport.NewInmemNetwork()
	defer net.Close()
	sebf, _ := coflow.NewScheduler("sebf")
	cfg := live.DefaultConfig()
	cfg.Agents = []transport.NodeID{"a0", "a1"}
	cfg.Fabric = coflow.NewFabric(2, 10e6) // 10 MB/s each way per port
	cfg.Scheduler = sebf
	coord, _ := live.NewCoordinator(cfg)
	defer coord.Close()
	ctr, _ := net.Join("coord", coord)
	_ = coord.Start(ctr)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acfg := live.DefaultAgentConfig()
	acfg.Coordinator = "coord"
	var agents []*live.Agent
	for _, name := range cfg.Agents {
		a, _ := live.NewAgent(acfg)
		defer a.Close()
		tr, _ := net.Join(name, a)
		if err := a.Start(ctx, tr); err != nil {
			fmt.Println(err)
			return
		}
		agents = append(agents, a)
	}

	data := bytes.Repeat([]byte("falcon "), 150_000)
	id, err := agents[0].Register(ctx, []coflow.Flow{{Src: 0, Dst: 1, Bytes: float64(len(data))}}, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	sent := make(chan error, 1)
	go func() { sent <- agents[0].Send(ctx, id, 0, data) }()
	got, err := agents[1].Receive(ctx, id, 0)
	fmt.Println(len(got), bytes.Equal(got, data), err, <-sent)
	_ = agents[0].Unregister(ctx, id)
	// Output: 1050000 true <nil> <nil>
}
