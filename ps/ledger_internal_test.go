package ps

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/transport"
)

type silentNode struct{}

func (silentNode) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return nil, errors.New("no requests")
}
func (silentNode) HandleMessage(transport.NodeID, []byte) {}

// TestCoordinator_RefusesUnorderedPush: a worker that sends, over the
// transport, a push of another worker's samples that no transfer or
// hand-over covers is refused (ErrRejected, naming the reason); the
// coordinator counts nothing and admits nothing, and the run goes on:
// the worker's own push is admitted after it.
func TestCoordinator_RefusesUnorderedPush(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	srv, _ := NewServer("s0", DefaultServerConfig())
	st, _ := net.Join("s0", srv)
	defer st.Close()
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP.NumWorkers, cfg.EPSP.Batch = 2, 8
	cfg.Servers = []transport.NodeID{"s0"}
	cfg.Workers = []transport.NodeID{"w0", "w1"}
	cfg.Lease.Timeout = -1
	var mu sync.Mutex
	var admitted []epsp.Push
	obs := ObserverFunc(func(e Event) {
		if e.Kind == EvPushAdmitted {
			mu.Lock()
			admitted = append(admitted, e.Push)
			mu.Unlock()
		}
	})
	c, err := NewCoordinator(cfg, epsp.NewBSP(), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := net.Join("coordinator", c)
	defer ct.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx, ct); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w0, _ := net.Join("w0", silentNode{})
	defer w0.Close()
	admit := func(p epsp.Push) error {
		e := newMsg(nil, opAdmit)
		encodePush(&e, p)
		resp, err := request(ctx, w0, "coordinator", e.b, time.Second)
		if err != nil {
			return err
		}
		_, err = parseResponse(resp, "coordinator")
		return err
	}
	for _, p := range []epsp.Push{
		{Worker: 0, Owner: 1, Clock: 0, Samples: 8, BatchSamples: 8}, // worker 1's whole batch
		{Worker: 0, Owner: 1, Clock: 0, Samples: 3, BatchSamples: 8}, // a tail of it
		{Worker: 0, Owner: 1, Clock: 1, Samples: 8, BatchSamples: 8}, // its next clock
	} {
		err := admit(p)
		if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "not ordered") {
			t.Fatalf("push %+v: %v, want ErrRejected: not ordered", p, err)
		}
	}
	if s := c.Stats(); s.Accumulated+s.Applied+s.Dropped != 0 || c.Err() != nil {
		t.Fatalf("after refused pushes: stats %+v, coordinator error %v", s, c.Err())
	}
	if err := admit(epsp.Push{Worker: 0, Owner: 0, Clock: 0, Samples: 8, BatchSamples: 8}); err != nil {
		t.Fatalf("own push: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := c.Stats(); s.Accumulated != 1 || len(admitted) != 1 || admitted[0].Owner != 0 {
		t.Fatalf("after the own push: stats %+v, admitted %+v", s, admitted)
	}
}
