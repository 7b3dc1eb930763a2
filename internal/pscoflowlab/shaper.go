package pscoflowlab

import (
	"context"
	"sync"
	"time"

	"github.com/falconml/falcon/transport"
)

// fabric emulates the big switch for the baseline: every port has an
// egress and an ingress link of one rate; a message of n wire bytes from
// port a to port b reserves both links chunk by chunk (64 KiB), each chunk
// at the earliest time both are free, and the sender sleeps until its
// last chunk has passed. Concurrent messages thus interleave chunk by
// chunk and share a busy link about equally, as TCP flows through one
// bottleneck do.
type fabric struct {
	rate  float64 // bytes/s, each way per port
	chunk int

	mu     sync.Mutex
	egress []time.Time
	ingres []time.Time
}

func newFabric(ports int, rate float64) *fabric {
	return &fabric{rate: rate, chunk: 64 << 10, egress: make([]time.Time, ports), ingres: make([]time.Time, ports)}
}

// carry blocks until n bytes from port a to port b have crossed the
// fabric, or ctx ends.
func (f *fabric) carry(ctx context.Context, a, b, n int) error {
	var end time.Time
	for off := 0; off < n; off += f.chunk {
		c := min(f.chunk, n-off)
		f.mu.Lock()
		start := time.Now()
		if f.egress[a].After(start) {
			start = f.egress[a]
		}
		if f.ingres[b].After(start) {
			start = f.ingres[b]
		}
		end = start.Add(time.Duration(float64(c) / f.rate * 1e9))
		f.egress[a], f.ingres[b] = end, end
		f.mu.Unlock()
		if d := time.Until(end); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
	}
	return nil
}

// shaped is a worker's transport in the baseline: each request and its
// response cross the emulated fabric, compressed as the policy chooses
// (the transport's per-message policy, run here so that the fabric
// carries the compressed size; the codec work is done for real, and the
// receiver's decompression too).
type shaped struct {
	transport.Transport
	fab    *fabric
	policy transport.CompressionPolicy
	port   func(transport.NodeID) (int, bool)
	self   int
}

func (s *shaped) wire(to transport.NodeID, msg []byte) (int, error) {
	if s.policy == nil || len(msg) == 0 {
		return len(msg), nil
	}
	c := s.policy.Choose(to, msg)
	if c == transport.CodecNone {
		return len(msg), nil
	}
	start := time.Now()
	out, err := transport.Compress(nil, c, msg)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if o, ok := s.policy.(transport.CompressionObserver); ok {
		o.Observe(to, c, len(msg), len(out), took)
	}
	if len(out) >= len(msg) {
		return len(msg), nil
	}
	if _, err := transport.Decompress(nil, c, out, len(msg), len(msg)); err != nil {
		return 0, err
	}
	return len(out), nil
}

func (s *shaped) Request(ctx context.Context, to transport.NodeID, req []byte) ([]byte, error) {
	p, ok := s.port(to)
	if !ok {
		return s.Transport.Request(ctx, to, req)
	}
	n, err := s.wire(to, req)
	if err != nil {
		return nil, err
	}
	if err := s.fab.carry(ctx, s.self, p, n); err != nil {
		return nil, err
	}
	resp, err := s.Transport.Request(ctx, to, req)
	if err != nil {
		return nil, err
	}
	if n, err = s.wire(s.Transport.LocalID(), resp); err != nil {
		return nil, err
	}
	if err := s.fab.carry(ctx, p, s.self, n); err != nil {
		return nil, err
	}
	return resp, nil
}
