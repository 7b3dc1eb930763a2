package pstest

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
)

// LedgerStride bounds LedgerSampler's batch sizes: sample i of owner's batch
// of clock c has the id (owner·Clocks + c)·LedgerStride + i.
const LedgerStride = 1 << 20

// LedgerSampler is a ps.Sampler whose sample ids say whose batch and which
// clock they belong to (see LedgerStride).
type LedgerSampler struct{ Clocks int }

var _ ps.Sampler = LedgerSampler{}

// Batch implements ps.Sampler.
func (s LedgerSampler) Batch(owner epsp.WorkerID, clock, size int) []int {
	ids := make([]int, size)
	for i := range ids {
		ids[i] = (int(owner)*s.Clocks+clock)*LedgerStride + i
	}
	return ids
}

// LedgerModel is a ps.Model that keeps accounts instead of learning: it has
// one parameter per (owner, clock), index owner·Clocks + clock, and each
// sample of LedgerSampler contributes gradient −1 to its own (owner, clock)
// parameter. With SGD(lr=1) a clock's complete update therefore raises that
// parameter by exactly the weight the policy gives the clock (1 for
// applied pushes, 1/NumWorkers for a barrier's average), whatever transfers
// split the batch.
//
// With Staleness ≥ 0 every read is checked against the SSP guarantee
// (Ho et al., NIPS 2013): a worker computing clock c sees every update of
// clocks ≤ c−s−1 and its own of clocks < c, each at value Full. Delay, if
// set, is slept after each chunk (to make a worker slow). A LedgerModel is
// safe for concurrent use.
type LedgerModel struct {
	Workers, Clocks int
	Staleness       int
	Full            float32
	Delay           func(owner epsp.WorkerID, clock int) time.Duration

	mu          sync.Mutex
	violations  []string
	inflight    int
	maxInflight int
}

var _ ps.Model = (*LedgerModel)(nil)

// NumParams is Workers·Clocks.
func (m *LedgerModel) NumParams() int { return m.Workers * m.Clocks }

// Gradient implements ps.Model.
func (m *LedgerModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	m.mu.Lock()
	m.inflight++
	m.maxInflight = max(m.maxInflight, m.inflight)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inflight--
		m.mu.Unlock()
	}()
	if len(samples) == 0 {
		return 0
	}
	idx := samples[0] / LedgerStride
	owner, clock := idx/m.Clocks, idx%m.Clocks
	if m.Staleness >= 0 {
		m.checkRead(params, owner, clock)
	}
	for _, s := range samples {
		grad[s/LedgerStride]--
	}
	if m.Delay != nil {
		time.Sleep(m.Delay(epsp.WorkerID(owner), clock))
	}
	return float64(len(samples))
}

// Reference: Ho et al., NIPS 2013 (the SSP read guarantee); falcon.md §5.
func (m *LedgerModel) checkRead(params []float32, owner, c int) {
	const tol = 1e-5 // float32 sums of a few terms of size ≤ 1
	for j := range m.Workers {
		for k := range m.Clocks {
			need := k <= c-m.Staleness-1 || (j == owner && k < c)
			if v := params[j*m.Clocks+k]; need && math.Abs(float64(v-m.Full)) > tol {
				m.mu.Lock()
				m.violations = append(m.violations, fmt.Sprintf("worker %d at clock %d read update (%d,%d) = %v, want %v", owner, c, j, k, v, m.Full))
				m.mu.Unlock()
			}
		}
	}
}

// Violations returns the reads that missed a required update.
func (m *LedgerModel) Violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.violations...)
}

// MaxConcurrent is the most Gradient calls that ran at once.
func (m *LedgerModel) MaxConcurrent() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxInflight
}

// SeededDelay returns a pseudo-random delay in [0, max) per (owner, clock),
// fixed by seed: random worker speeds that repeat across runs.
func SeededDelay(seed uint64, max time.Duration) func(epsp.WorkerID, int) time.Duration {
	return func(o epsp.WorkerID, c int) time.Duration {
		h := seed*0x9e3779b97f4a7c15 ^ uint64(o)*0xbf58476d1ce4e5b9 ^ uint64(c)*0x94d049bb133111eb
		h ^= h >> 29
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 32
		return time.Duration(h % uint64(max))
	}
}

// CheckExactlyOnce checks a recorded run (EvChunk and EvPushAdmitted
// events): for every owner w and clock c < complete[w], the samples
// computed of w's batch of clock c are exactly [0, batch) once each, and
// the admitted pushes (whatever the policy decided) count exactly batch
// samples of it; for later clocks no sample was computed twice.
//
// batch is what w's pushes declared: BatchSamples of a push of w's batch
// alone (its own, or a transferred part's), BatchSamples less the assigned
// samples for w's own push with Parts (see epsp.Push.Parts). A push with
// Parts counts each part for its owner; one without counts Samples for its
// Owner. An owner that pushed none of its own batch (it gave it all away
// at release) has the batch its parts add up to.
func CheckExactlyOnce(t testing.TB, events []event.Event, complete []int) {
	t.Helper()
	type oc struct{ owner, clock int }
	seen := map[oc]map[int]int{}
	size := map[oc]int{}
	pushed := map[oc]int{}
	for _, e := range events {
		switch e.Kind {
		case event.Chunk:
			k := oc{int(e.Owner), e.Clock}
			if seen[k] == nil {
				seen[k] = map[int]int{}
			}
			for s := e.Lo; s < e.Hi; s++ {
				seen[k][s]++
			}
		case event.PushAdmitted:
			p := e.Push
			k := oc{int(p.Owner), p.Clock}
			b := p.BatchSamples
			if len(p.Parts) == 0 {
				pushed[k] += p.Samples
			} else {
				for _, x := range p.Parts {
					pushed[oc{int(x.Owner), x.Clock}] += x.Samples
					if x.Owner != p.Worker {
						b -= x.Samples
					}
				}
			}
			if old, ok := size[k]; ok && old != b {
				t.Errorf("worker %d clock %d: pushes declare batches %d and %d", k.owner, k.clock, old, b)
			}
			size[k] = b
		}
	}
	for k, samples := range seen {
		for s, n := range samples {
			if n > 1 {
				t.Errorf("worker %d clock %d: sample %d computed %d times", k.owner, k.clock, s, n)
			}
		}
	}
	for w, upTo := range complete {
		for c := range upTo {
			k := oc{w, c}
			b, ok := size[k]
			if !ok {
				b = pushed[k]
			}
			if b == 0 {
				t.Errorf("worker %d clock %d: no push admitted", w, c)
				continue
			}
			if len(seen[k]) != b {
				t.Errorf("worker %d clock %d: %d distinct samples computed, batch %d", w, c, len(seen[k]), b)
			}
			if pushed[k] != b {
				t.Errorf("worker %d clock %d: pushes count %d samples, batch %d", w, c, pushed[k], b)
			}
			for s := range seen[k] {
				if s < 0 || s >= b {
					t.Errorf("worker %d clock %d: sample %d outside batch %d", w, c, s, b)
				}
			}
		}
	}
}
