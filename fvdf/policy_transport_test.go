package fvdf

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

type collect struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (c *collect) HandleRequest(_ context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
	return nil, nil
}

func (c *collect) HandleMessage(_ transport.NodeID, msg []byte) {
	c.mu.Lock()
	c.msgs = append(c.msgs, bytes.Clone(msg))
	c.mu.Unlock()
}

// TestPolicy_WithTransport runs the policy inside the in-process transport:
// messages arrive intact, and the policy, primed to compress (text prior on
// a 1 Gbit/s link), learns from the transport's outcomes that random
// payloads to one peer do not shrink and stops compressing them.
func TestPolicy_WithTransport(t *testing.T) {
	pol, err := NewPolicy(PolicyConfig{Bandwidth: 125e6, Mix: codecprof.Only(codecprof.Text), ProbeEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	net := transport.NewInmemNetwork(transport.WithCompression(pol))
	defer net.Close()
	recv := &collect{}
	a, err := net.Join("a", &collect{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Join("b", recv); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	random := codecprof.Generate(codecprof.Random, 256<<10, rng)
	if c := pol.Choose("b", random); c == transport.CodecNone {
		t.Fatalf("before any outcome: got raw, want a codec (text prior)")
	}
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if err := a.Send(ctx, "b", random); err != nil {
			t.Fatal(err)
		}
	}
	if c := pol.Choose("b", random); c != transport.CodecNone {
		t.Fatalf("after 30 incompressible messages: got %v, want none (estimate %+v)", c, pol.Estimate("b", c))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		recv.mu.Lock()
		n := len(recv.msgs)
		recv.mu.Unlock()
		if n == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of 30 messages", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i, m := range recv.msgs {
		if !bytes.Equal(m, random) {
			t.Fatalf("message %d corrupted", i)
		}
	}
}
