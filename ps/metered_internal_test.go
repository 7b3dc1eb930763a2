package ps

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/metrics"
)

// recorder keeps what the roles report.
type recorder struct {
	metrics.Nop
	mu    sync.Mutex
	reqs  []metrics.Request
	ranks map[int]int
	cks   int
}

func (r *recorder) Request(q metrics.Request) { r.mu.Lock(); r.reqs = append(r.reqs, q); r.mu.Unlock() }
func (r *recorder) Straggler(w, rank int, _ float64) {
	r.mu.Lock()
	if r.ranks == nil {
		r.ranks = map[int]int{}
	}
	r.ranks[w] = rank
	r.mu.Unlock()
}
func (r *recorder) Checkpoint(string, time.Duration, error) { r.mu.Lock(); r.cks++; r.mu.Unlock() }

// TestMetrics_NoRecorderAddsNoAllocation serves pushes straight to a
// server's handler with no Recorder and with one that keeps nothing: the
// no-op default allocates nothing per push, and neither does the hook
// itself (Request is a value).
func TestMetrics_NoRecorderAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocations are counted without it")
	}
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"none", nil}, {"nop", []Option{WithMetrics(metrics.Nop{})}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1e-3}}}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			keys, lens := []uint64{1, 2}, []int{64, 64}
			s.View(func(st *Store) { st.InitValues(keys, lens, make([]float32, 128)) })
			req := rawPush(keys, lens, make([]float32, 128))
			dst := make([]byte, 0, 64)
			ctx := context.Background()
			allocs := testing.AllocsPerRun(200, func() {
				resp, err := s.HandleRequestAppend(ctx, "w", req, dst)
				if err != nil || len(resp) < 2 || resp[1] != byte(wire.CodeOK) {
					t.Fatalf("push: %v %v", resp, err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per push, want 0", allocs)
			}
		})
	}
}

// TestMetrics_ServedOpsAndBytes: a push served whole and in pieces is
// reported once each, with its op label and its bytes; a hostile op byte
// is labelled "unknown".
func TestMetrics_ServedOpsAndBytes(t *testing.T) {
	rec := &recorder{}
	s, err := NewServer("server-0", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1e-3}}}, WithMetrics(rec))
	if err != nil {
		t.Fatal(err)
	}
	keys, lens := []uint64{1}, []int{8}
	s.View(func(st *Store) { st.InitValues(keys, lens, make([]float32, 8)) })
	req := rawPush(keys, lens, make([]float32, 8))
	ctx := context.Background()
	if _, err := s.HandleRequestAppend(ctx, "w", req, nil); err != nil {
		t.Fatal(err)
	}
	cut := len(req) - 32
	if _, err := s.HandleRequestV(ctx, "w", [][]byte{req[:cut], req[cut:]}, nil); err != nil {
		t.Fatal(err)
	}
	// split elsewhere: joined and served once, still one report
	if _, err := s.HandleRequestV(ctx, "w", [][]byte{req[:5], req[5:]}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandleRequestAppend(ctx, "w", []byte{wire.Version, 200}, nil); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 4 {
		t.Fatalf("%d requests reported, want 4: %+v", len(rec.reqs), rec.reqs)
	}
	for i, q := range rec.reqs[:3] {
		if q.Role != "server" || q.Node != "server-0" || q.Op != "push" || q.BytesIn != len(req) || q.BytesOut != 2 || q.OneWay {
			t.Errorf("report %d = %+v, want a push of %d bytes in, 2 out", i, q, len(req))
		}
	}
	if q := rec.reqs[3]; q.Op != "unknown" {
		t.Errorf("op 200 labelled %q, want unknown", q.Op)
	}
}

// TestMetrics_StragglerRank feeds the coordinator's tracker three workers'
// releases, pushes and clock ends at speeds 300, 100 and 200 samples/s:
// the slowest gets rank 1, the fastest rank 3; one that left gets 0.
func TestMetrics_StragglerRank(t *testing.T) {
	rec := &recorder{}
	c := &Coordinator{opts: options{met: rec}}
	c.meterStragglers(3)
	ev := func(e event.Event) { e.Node = string(CoordinatorNode); c.opts.obs.Observe(e) }
	for w, samples := range []int{300, 100, 200} {
		ev(event.Event{Kind: event.Release, Worker: epsp.WorkerID(w), Clock: 1, At: time.Second})
		ev(event.Event{Kind: event.PushAdmitted, Worker: epsp.WorkerID(w), Samples: samples})
		ev(event.Event{Kind: event.ClockDone, Worker: epsp.WorkerID(w), Clock: 1, At: 2 * time.Second})
	}
	rec.mu.Lock()
	got := map[int]int{0: rec.ranks[0], 1: rec.ranks[1], 2: rec.ranks[2]}
	rec.mu.Unlock()
	if got[0] != 3 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("ranks %v, want worker 1 → 1, 2 → 2, 0 → 3", got)
	}
	ev(event.Event{Kind: event.Leave, Worker: 1})
	rec.mu.Lock()
	got = map[int]int{0: rec.ranks[0], 1: rec.ranks[1], 2: rec.ranks[2]}
	rec.mu.Unlock()
	if got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("ranks after worker 1 left %v, want 0 → 2, 1 → 0, 2 → 1", got)
	}
}

// TestMetrics_Checkpoint: a server's checkpoint is reported once.
func TestMetrics_Checkpoint(t *testing.T) {
	rec := &recorder{}
	s, err := NewServer("server-0", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1e-3}},
		Durable: DurableConfig{Dir: t.TempDir()}}, WithMetrics(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.cks != 1 {
		t.Fatalf("%d checkpoints reported, want 1", rec.cks)
	}
}
