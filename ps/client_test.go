package ps_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

func TestClient_PushPull(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(3), pstest.Workers(0), pstest.Width(2),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Partitioner(layout.Hash{Servers: 3}))
	cl := c.NewClient(t)
	ctx := context.Background()
	keys := []uint64{1, 4, 9, 100}
	must(t, cl.Init(ctx, keys, []float32{1, 2, 3, 4, 5, 6, 7, 8}, nil))
	must(t, cl.Push(ctx, keys, []float32{1, 1, 1, 1, 1, 1, 1, 1}, nil))
	got := make([]float32, 8)
	must(t, cl.Pull(ctx, keys, got, nil))
	if want := []float32{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("pull = %v, want %v", got, want)
	}
	// PushPull with per-key lengths, on a subset of the keys.
	out := make([]float32, 4)
	must(t, cl.PushPull(ctx, []uint64{4, 100}, []float32{1, 2, 3, 4}, out, []int{2, 2}))
	if want := []float32{1, 1, 3, 3}; !slices.Equal(out, want) {
		t.Errorf("pushpull = %v, want %v", out, want)
	}
	// Another client learns the keys from the servers.
	cl2 := c.NewClient(t)
	got2 := make([]float32, 2)
	must(t, cl2.Pull(ctx, []uint64{9}, got2, nil))
	if want := []float32{4, 5}; !slices.Equal(got2, want) {
		t.Errorf("second client pull = %v, want %v", got2, want)
	}
}

// snapshot pulls every key of every server through the store views.
func snapshot(c *pstest.Cluster) [][]float32 {
	var out [][]float32
	for _, s := range c.Servers {
		s.View(func(st *store.Store) {
			keys, _ := st.Keys()
			for _, k := range keys {
				v, _ := st.Value(nil, k)
				out = append(out, v)
			}
		})
	}
	return out
}

func TestClient_RefusedRequestsChangeNothing(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(0),
		pstest.Partitioner(layout.KeyRange{Servers: 2, KeySpace: 100}), pstest.Optimizer(store.SGD{LR: 1}))
	cl := c.NewClient(t)
	ctx := context.Background()
	// key 10 lives on server 0, key 60 on server 1.
	must(t, cl.Init(ctx, []uint64{10, 60}, []float32{1, 2, 3}, []int{1, 2}))
	before := snapshot(c)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown key on the other server", func() error {
			return cl.Push(ctx, []uint64{10, 61}, []float32{1, 1}, nil)
		}, ps.ErrUnknownKey},
		{"unsorted", func() error { return cl.Push(ctx, []uint64{60, 10}, []float32{1, 1, 1}, []int{2, 1}) }, ps.ErrUnsortedKeys},
		{"duplicate", func() error { return cl.Push(ctx, []uint64{10, 10}, []float32{1, 1}, nil) }, ps.ErrUnsortedKeys},
		{"wrong key length", func() error { return cl.Push(ctx, []uint64{10, 60}, []float32{1, 1}, nil) }, ps.ErrLengthMismatch},
		{"vals vs lens", func() error { return cl.Push(ctx, []uint64{10, 60}, []float32{1, 1}, []int{1, 2}) }, ps.ErrLengthMismatch},
		{"lens count", func() error { return cl.Push(ctx, []uint64{10, 60}, []float32{1, 1, 1}, []int{3}) }, ps.ErrLengthMismatch},
		{"pull buffer", func() error { return cl.Pull(ctx, []uint64{10}, make([]float32, 2), nil) }, ps.ErrLengthMismatch},
		{"init other length", func() error { return cl.Init(ctx, []uint64{60}, []float32{1}, nil) }, ps.ErrLengthMismatch},
		{"cancelled", func() error { return cl.Push(cancelled, []uint64{10}, []float32{1}, nil) }, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if after := snapshot(c); !slices.EqualFunc(before, after, slices.Equal) {
				t.Errorf("refused request changed the servers: %v -> %v", before, after)
			}
		})
	}
}

type nopHandler struct{}

func (nopHandler) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return nil, errors.New("no requests")
}
func (nopHandler) HandleMessage(transport.NodeID, []byte) {}

func TestClient_DeadServer(t *testing.T) {
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(0), pstest.Partitioner(layout.KeyRange{Servers: 2, KeySpace: 100}))
	cl := c.NewClient(t)
	ctx := context.Background()
	must(t, cl.Init(ctx, []uint64{10, 60}, []float32{1, 2}, nil))
	must(t, c.Net.Kill("server-1"))
	err := cl.Pull(ctx, []uint64{10, 60}, make([]float32, 2), nil)
	if !errors.Is(err, ps.ErrServerUnavailable) || !errors.Is(err, transport.ErrUnreachable) || !strings.Contains(err.Error(), "server-1") {
		t.Fatalf("err = %v, want ErrServerUnavailable naming server-1 and wrapping the transport error", err)
	}
	// The live server still serves its keys.
	got := make([]float32, 1)
	must(t, cl.Pull(ctx, []uint64{10}, got, nil))
	if got[0] != 1 {
		t.Errorf("pull from live server = %v", got)
	}
}

func TestPartitioner_SegmentsCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := func(servers int) []layout.Partitioner {
		return []layout.Partitioner{
			layout.KeyRange{Servers: servers, MaxSegment: 7},
			layout.KeyRange{Servers: servers, KeySpace: 1000, MaxSegment: 3},
			layout.Hash{Servers: servers, MaxSegment: 5},
		}
	}
	for range 200 {
		servers := 1 + rng.IntN(5)
		for _, p := range parts(servers) {
			key := rng.Uint64() >> rng.IntN(64)
			n := 1 + rng.IntN(40)
			segs := p.Locate(nil, key, n)
			off := 0
			seen := map[int]bool{}
			for _, s := range segs {
				if s.Key != key || s.Off != off || s.Len <= 0 || s.Server < 0 || s.Server >= servers || seen[s.Server] {
					t.Fatalf("%#v: key %d n %d: bad segments %+v", p, key, n, segs)
				}
				seen[s.Server] = true
				off += s.Len
			}
			if off != n {
				t.Fatalf("%#v: segments cover %d of %d", p, off, n)
			}
		}
	}
}

// TestClient_SplitRoundTrip is the property test of ps-lite#156/#184: over
// random layouts (dense width and per-key lengths, values longer than the
// split size), the servers' parts together are exactly the input.
func TestClient_SplitRoundTrip(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		servers := 1 + rng.IntN(4)
		width := 1 + rng.IntN(9)
		c := pstest.NewCluster(t, pstest.Servers(servers), pstest.Workers(0), pstest.Width(width),
			pstest.Partitioner(layout.KeyRange{Servers: servers, KeySpace: 1 << 12, MaxSegment: 4}), pstest.Optimizer(store.SGD{LR: 1}))
		cl := c.NewClient(t)
		ctx := context.Background()
		keys := randomKeys(rng, 1+rng.IntN(30), 1<<12)
		var lens []int
		if seed%2 == 1 { // per-key lengths
			for range keys {
				lens = append(lens, 1+rng.IntN(20))
			}
		}
		total := len(keys) * width
		if lens != nil {
			total = 0
			for _, l := range lens {
				total += l
			}
		}
		vals := make([]float32, total)
		for i := range vals {
			vals[i] = rng.Float32()
		}
		must(t, cl.Init(ctx, keys, vals, lens))
		got := make([]float32, total)
		must(t, cl.Pull(ctx, keys, got, lens))
		if !slices.Equal(got, vals) {
			t.Fatalf("seed %d: pull differs from init", seed)
		}
		// The parts on the servers add up to the keys' full lengths, and
		// no part is longer than it needs to be.
		sum := map[uint64]int{}
		for _, s := range c.Servers {
			s.View(func(st *store.Store) {
				ks, ls := st.Keys()
				for i, k := range ks {
					sum[k] += ls[i]
				}
			})
		}
		for i, k := range keys {
			want := width
			if lens != nil {
				want = lens[i]
			}
			if sum[k] != want {
				t.Fatalf("seed %d: key %d stored in parts totalling %d, want %d", seed, k, sum[k], want)
			}
		}
		// A push of ones over a random subset lowers exactly those values by 1.
		sub := keys[:1+rng.IntN(len(keys))]
		var sublens []int
		n := len(sub) * width
		if lens != nil {
			sublens = lens[:len(sub)]
			n = 0
			for _, l := range sublens {
				n += l
			}
		}
		ones := make([]float32, n)
		for i := range ones {
			ones[i] = 1
		}
		must(t, cl.Push(ctx, sub, ones, sublens))
		must(t, cl.Pull(ctx, keys, got, lens))
		for i := range got {
			want := vals[i]
			if i < n {
				want--
			}
			if got[i] != want {
				t.Fatalf("seed %d: value %d = %v, want %v", seed, i, got[i], want)
			}
		}
	}
}

func randomKeys(rng *rand.Rand, n int, space uint64) []uint64 {
	set := map[uint64]bool{}
	for len(set) < n {
		set[rng.Uint64N(space)] = true
	}
	keys := make([]uint64, 0, n)
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestWorker_StartTimeoutNamesMissingServer(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	s, err := ps.NewServer("server-0", ps.DefaultServerConfig())
	must(t, err)
	_, err = net.Join("server-0", s)
	must(t, err)
	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: "coordinator", StartTimeout: 150 * time.Millisecond,
		Client: ps.ClientConfig{Servers: []transport.NodeID{"server-0", "server-1"}}})
	must(t, err)
	defer w.Close()
	tr, err := net.Join("worker-0", w)
	must(t, err)
	start := time.Now()
	err = w.Start(context.Background(), tr)
	if !errors.Is(err, ps.ErrStartTimeout) || !strings.Contains(err.Error(), "1/2 servers") || !strings.Contains(err.Error(), "server-1 unreachable") {
		t.Fatalf("err = %v, want a start timeout naming server-1", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Start took %v with a 150ms deadline", d)
	}
	// With the servers up but no coordinator, it names the coordinator.
	s1, err := ps.NewServer("server-1", ps.DefaultServerConfig())
	must(t, err)
	_, err = net.Join("server-1", s1)
	must(t, err)
	err = w.Start(context.Background(), tr)
	if !errors.Is(err, ps.ErrStartTimeout) || !strings.Contains(err.Error(), "coordinator unreachable") {
		t.Fatalf("err = %v, want a start timeout naming the coordinator", err)
	}
}

// TestWorker_StartTimeoutTCP: over TCP, a missing server is named with
// its address.
func TestWorker_StartTimeoutTCP(t *testing.T) {
	// A port nobody listens on: listen, note the address, close.
	probe, err := transport.NewTCP(transport.TCPConfig{ID: "probe"}, ps.ClientHandler{})
	must(t, err)
	dead := probe.Addr().String()
	probe.Close()

	srv, err := ps.NewServer("server-0", ps.DefaultServerConfig())
	must(t, err)
	stcp, err := transport.NewTCP(transport.TCPConfig{ID: "server-0"}, srv)
	must(t, err)
	defer stcp.Close()

	w, err := ps.NewWorker("worker-0", ps.WorkerConfig{Coordinator: "coordinator", StartTimeout: 300 * time.Millisecond,
		Client: ps.ClientConfig{Servers: []transport.NodeID{"server-0", "server-1"}}})
	must(t, err)
	defer w.Close()
	wtcp, err := transport.NewTCP(transport.TCPConfig{ID: "worker-0", Peers: map[transport.NodeID]string{
		"server-0": stcp.Addr().String(), "server-1": dead}}, w)
	must(t, err)
	defer wtcp.Close()
	err = w.Start(context.Background(), wtcp)
	if !errors.Is(err, ps.ErrStartTimeout) || !strings.Contains(err.Error(), "server-1") || !strings.Contains(err.Error(), dead) {
		t.Fatalf("err = %v, want a start timeout naming server-1 at %s", err, dead)
	}
	t.Log(err)
}

// hang accepts requests and never answers (until its node closes).
type hang struct{}

func (hang) HandleRequest(ctx context.Context, _ transport.NodeID, _ []byte) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (hang) HandleMessage(transport.NodeID, []byte) {}

// TestClient_RequestTimeout: a server that accepts a request and hangs
// cannot block a caller whose ctx has no deadline.
func TestClient_RequestTimeout(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	_, err := net.Join("server-0", hang{})
	must(t, err)
	tr, err := net.Join("c", ps.ClientHandler{})
	must(t, err)
	cl, err := ps.NewClient(tr, ps.ClientConfig{Servers: []transport.NodeID{"server-0"}, RequestTimeout: 50 * time.Millisecond})
	must(t, err)
	start := time.Now()
	err = cl.Init(context.Background(), []uint64{1}, []float32{1}, nil)
	if !errors.Is(err, ps.ErrServerUnavailable) || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("err = %v, want ErrServerUnavailable (no answer)", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v with a 50ms request timeout", d)
	}
	// The caller's own deadline still wins and comes back as ctx.Err().
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	cl2, err := ps.NewClient(tr, ps.ClientConfig{Servers: []transport.NodeID{"server-0"}, RequestTimeout: -1})
	must(t, err)
	if err := cl2.Init(ctx, []uint64{1}, []float32{1}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}
