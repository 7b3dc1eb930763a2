package ps_test

import (
	"slices"
	"sync"

	"github.com/falconml/falcon/ps/metrics"
)

// leaseMisses is a metrics.Recorder that keeps the lease misses, as
// "role peer".
type leaseMisses struct {
	metrics.Nop
	mu   sync.Mutex
	seen []string
}

func (l *leaseMisses) LeaseMiss(role, peer string) {
	l.mu.Lock()
	l.seen = append(l.seen, role+" "+peer)
	l.mu.Unlock()
}

func (l *leaseMisses) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}
