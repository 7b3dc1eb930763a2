package ps

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// An abort goes to every worker at once: with three dead workers, each of
// whose sends waits out OrderTimeout, the three sends are in flight
// together, so the survivors hear of the abort within one OrderTimeout
// instead of one per dead worker. (Sent one after another, at most one
// dead send is ever in flight.)
func TestSetFatal_AbortsWorkersConcurrently(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, _ := NewServer("s0", DefaultServerConfig())
	st, err := net.Join("s0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers = 4
	cfg.Servers = []transport.NodeID{"s0"}
	cfg.Workers = []transport.NodeID{"w0", "dead1", "dead2", "dead3"}
	cfg.OrderTimeout = 2 * time.Second
	c, err := NewCoordinator(cfg, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	ct, err := net.Join("coordinator", c)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu                   sync.Mutex
		inFlight, most, seen int
		allIn                = make(chan struct{})
	)
	hooked := transporttest.WithHooks(ct, transporttest.Hooks{BeforeSend: func(ctx context.Context, to transport.NodeID, _ []byte) error {
		if to == "w0" {
			return nil
		}
		mu.Lock()
		inFlight++
		seen++
		most = max(most, inFlight)
		if seen == 3 {
			close(allIn)
		}
		mu.Unlock()
		select {
		case <-allIn:
		case <-ctx.Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return errors.New("dead worker")
	}})
	if err := c.Start(context.Background(), hooked); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); ct.Close() }()
	c.setFatal(errors.New("test abort"))
	mu.Lock()
	defer mu.Unlock()
	if seen != 3 || most != 3 {
		t.Fatalf("abort sends to the dead workers: %d made, at most %d in flight at once; want all 3 at once", seen, most)
	}
}
