package pscoflowlab

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestFabricShares: one message alone crosses at the port rate; two at
// once into one ingress share it (together they take twice as long).
// Lower bounds are exact (reservations); upper bounds are loose for a
// loaded machine, so that two messages into different ports do not share
// is only checked loosely (they end well before two messages' time plus
// the slack).
func TestFabricShares(t *testing.T) {
	const rate, n = 20e6, 1 << 20 // 1 MiB at 20 MB/s: 52 ms
	alone := time.Duration(float64(n) / rate * 1e9)
	run := func(dsts ...int) time.Duration {
		f := newFabric(4, rate)
		start := time.Now()
		var wg sync.WaitGroup
		for i, d := range dsts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f.carry(context.Background(), i+1, d, n); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	if d := run(0); d < alone*9/10 || d > alone+2*time.Second {
		t.Fatalf("alone: %v, want about %v", d, alone)
	}
	if d := run(0, 0); d < 2*alone*9/10 || d > 2*alone+2*time.Second {
		t.Fatalf("two into port 0: %v, want about %v", d, 2*alone)
	}
	if d := run(0, 3); d < alone*9/10 || d > 2*alone*9/10+2*time.Second {
		t.Fatalf("two into different ports: %v, want about %v", d, alone)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := newFabric(2, rate).carry(ctx, 0, 1, 10*n); err == nil {
		t.Fatal("carry outlived its ctx")
	}
}
