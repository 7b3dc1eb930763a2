package ps_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// benchWidth is the value length per key in the benchmarks: 1e3 float32s
// (a layer-sized tensor chunk), so 1e6 values are 1e3 keys.
const benchWidth = 1000

var benchSizes = []struct {
	name string
	n    int
}{{"n=1e3", 1e3}, {"n=1e5", 1e5}, {"n=1e6", 1e6}}

type benchEnv struct {
	clients []*ps.Client
	close   func()
}

// newInmemEnv starts one server and `workers` clients over the in-process
// transport.
func newInmemEnv(b *testing.B, workers int, codec transport.Codec) benchEnv {
	var opts []transport.InmemOption
	if codec != transport.CodecNone {
		opts = append(opts, transport.WithCompression(transport.Always(codec)))
	}
	net := transport.NewInmemNetwork(opts...)
	srv, err := ps.NewServer("server-0", ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 1e-3}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := net.Join("server-0", srv); err != nil {
		b.Fatal(err)
	}
	env := benchEnv{close: func() { net.Close() }}
	for i := range workers {
		tr, err := net.Join(transport.NodeID(fmt.Sprintf("worker-%d", i)), nopHandler{})
		if err != nil {
			b.Fatal(err)
		}
		cl, err := ps.NewClient(tr, ps.ClientConfig{Servers: []transport.NodeID{"server-0"}, Width: benchWidth})
		if err != nil {
			b.Fatal(err)
		}
		env.clients = append(env.clients, cl)
	}
	return env
}

// newTCPEnv is newInmemEnv over the TCP transport on 127.0.0.1.
func newTCPEnv(b *testing.B, workers int, codec transport.Codec) benchEnv {
	return newTCPEnvSecret(b, workers, codec, nil)
}

// benchSecret authenticates every frame of the tcp+auth cases
// (transport.TCPConfig.Secret, no TLS).
var benchSecret = []byte("ps benchmark secret of 32 bytes.")

// newTCPAuthEnv is newTCPEnv with every frame authenticated.
func newTCPAuthEnv(b *testing.B, workers int, codec transport.Codec) benchEnv {
	return newTCPEnvSecret(b, workers, codec, benchSecret)
}

// newTCPEnvSecret is newTCPEnv with every node proving secret (nil: none).
func newTCPEnvSecret(b *testing.B, workers int, codec transport.Codec, secret []byte) benchEnv {
	pol := transport.Always(codec)
	srv, err := ps.NewServer("server-0", ps.ServerConfig{Store: store.Config{Optimizer: store.SGD{LR: 1e-3}}})
	if err != nil {
		b.Fatal(err)
	}
	scfg := transport.DefaultTCPConfig()
	scfg.ID, scfg.Compression = "server-0", pol
	scfg.Secret = secret
	st, err := transport.NewTCP(scfg, srv)
	if err != nil {
		b.Fatal(err)
	}
	trs := []*transport.TCP{st}
	env := benchEnv{close: func() {
		for _, t := range trs {
			t.Close()
		}
	}}
	for i := range workers {
		cfg := transport.DefaultTCPConfig()
		cfg.ID = transport.NodeID(fmt.Sprintf("worker-%d", i))
		cfg.Compression = pol
		cfg.Secret = secret
		cfg.Peers = map[transport.NodeID]string{"server-0": st.Addr().String()}
		tr, err := transport.NewTCP(cfg, nopHandler{})
		if err != nil {
			b.Fatal(err)
		}
		trs = append(trs, tr)
		cl, err := ps.NewClient(tr, ps.ClientConfig{Servers: []transport.NodeID{"server-0"}, Width: benchWidth})
		if err != nil {
			b.Fatal(err)
		}
		env.clients = append(env.clients, cl)
	}
	return env
}

func benchKeys(n int) []uint64 {
	keys := make([]uint64, n/benchWidth)
	for i := range keys {
		keys[i] = uint64(i)
	}
	return keys
}

// initBench initializes n values (n/benchWidth keys, seeded Gaussian) on
// env's servers through its first client and returns the keys and the
// random stream, for the gradients.
func initBench(ctx context.Context, b *testing.B, env benchEnv, n int) ([]uint64, *rand.Rand) {
	keys := benchKeys(n)
	rng := rand.New(rand.NewPCG(1, 2))
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(rng.NormFloat64())
	}
	if err := env.clients[0].Init(ctx, keys, init, nil); err != nil {
		b.Fatal(err)
	}
	return keys, rng
}

// BenchmarkPushPull measures one Push followed by one Pull of n float32
// values per worker per iteration, all workers at once, against one server
// applying SGD. Bytes per iteration: 8·n·workers (n floats up, n down).
// Compare with BenchmarkCopyCeiling at the same n.
func BenchmarkPushPull(b *testing.B) {
	eachTransportCase(b, func(b *testing.B, c transportCase) {
		env := c.mk(b, c.workers, c.codec)
		defer env.close()
		runPushPull(b, env, c.n, false)
	})
}

// transportCase is one rung of the push+pull benchmark ladder.
type transportCase struct {
	transport string // "inmem" or "tcp"
	mk        func(*testing.B, int, transport.Codec) benchEnv
	codec     transport.Codec
	workers   int
	n         int
}

// eachTransportCase runs f as a sub-benchmark for every transport, codec,
// worker count and size of the ladder.
func eachTransportCase(b *testing.B, f func(*testing.B, transportCase)) {
	for _, tp := range []struct {
		name string
		mk   func(*testing.B, int, transport.Codec) benchEnv
	}{{"inmem", newInmemEnv}, {"tcp", newTCPEnv}, {"tcp+auth", newTCPAuthEnv}} {
		for _, codec := range []transport.Codec{transport.CodecNone, transport.CodecLZ4} {
			for _, workers := range []int{1, 4} {
				for _, sz := range benchSizes {
					c := transportCase{transport: tp.name, mk: tp.mk, codec: codec, workers: workers, n: sz.n}
					b.Run(fmt.Sprintf("%s/codec=%s/workers=%d/%s", tp.name, codec, workers, sz.name), func(b *testing.B) { f(b, c) })
				}
			}
		}
	}
}

// BenchmarkPushPullRound is BenchmarkPushPull with one PushPull call (one
// round trip, the reply written over the request) instead of Push then Pull.
func BenchmarkPushPullRound(b *testing.B) {
	for _, tp := range []struct {
		name string
		mk   func(*testing.B, int, transport.Codec) benchEnv
	}{{"inmem", newInmemEnv}, {"tcp", newTCPEnv}} {
		for _, workers := range []int{1, 4} {
			for _, sz := range benchSizes {
				b.Run(fmt.Sprintf("%s/workers=%d/%s", tp.name, workers, sz.name), func(b *testing.B) {
					env := tp.mk(b, workers, transport.CodecNone)
					defer env.close()
					runPushPull(b, env, sz.n, true)
				})
			}
		}
	}
}

func runPushPull(b *testing.B, env benchEnv, n int, oneCall bool) {
	ctx := context.Background()
	keys, rng := initBench(ctx, b, env, n)
	grads := make([][]float32, len(env.clients))
	outs := make([][]float32, len(env.clients))
	for i := range env.clients {
		grads[i] = make([]float32, n)
		for j := range grads[i] {
			grads[i][j] = float32(rng.NormFloat64())
		}
		outs[i] = make([]float32, n)
		// warm up: learn the layout, size the buffers
		if err := env.clients[i].Pull(ctx, keys, outs[i], nil); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(8 * n * len(env.clients)))
	b.ReportAllocs()
	b.ResetTimer()
	round := func(i int) error {
		cl := env.clients[i]
		if oneCall {
			return cl.PushPull(ctx, keys, grads[i], outs[i], nil)
		}
		if err := cl.Push(ctx, keys, grads[i], nil); err != nil {
			return err
		}
		return cl.Pull(ctx, keys, outs[i], nil)
	}
	errs := make([]error, len(env.clients))
	for range b.N {
		fanOut(b, errs, round)
	}
}

// fanOut runs f(i) for every i < len(errs), concurrently when there is
// more than one (inline otherwise, so one worker pays no goroutine), and
// fails b on the first error. errs is the caller's scratch space.
func fanOut(b *testing.B, errs []error, f func(i int) error) {
	if len(errs) == 1 {
		errs[0] = f(0)
	} else {
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyCeiling is the ceiling for BenchmarkPushPull: the same
// bytes moved by copy() alone (gradients into a server buffer and the
// values back), 8·n bytes per iteration.
func BenchmarkCopyCeiling(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			src := make([]float32, sz.n)
			srv := make([]float32, sz.n)
			dst := make([]float32, sz.n)
			b.SetBytes(int64(8 * sz.n))
			b.ResetTimer()
			for range b.N {
				copy(srv, src)
				copy(dst, srv)
			}
		})
	}
}

type nopModel struct{}

func (nopModel) Gradient(_ []float32, samples []int, grad []float32) float64 {
	grad[0] += float32(len(samples))
	return 0
}

// BenchmarkClock measures the runtime's cost of one clock (pull, admit,
// push, clock, release; BSP adds the flush on every server) with a model
// that computes nothing: the synchronisation overhead per iteration.
func BenchmarkClock(b *testing.B) {
	for _, pol := range []struct {
		name string
		p    func() epsp.Policy
	}{{"bsp", func() epsp.Policy { return epsp.NewBSP() }}, {"ssp1", func() epsp.Policy { return epsp.NewSSP(1) }}} {
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", pol.name, workers), func(b *testing.B) {
				c := pstest.NewCluster(b, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(1), pstest.Policy(pol.p()))
				b.ResetTimer()
				_, err := c.Train(context.Background(), nopModel{}, ps.ShardSampler{N: 64, Workers: workers},
					ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{8, 8}, Init: store.Zeros{}, Clocks: b.N})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// sink answers a request with n bytes (n in the first 4 bytes of the
// request, little-endian) from a buffer allocated per response, as a
// server's pull does.
type sink struct{}

func (sink) HandleRequest(_ context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
	n := int(req[0]) | int(req[1])<<8 | int(req[2])<<16 | int(req[3])<<24
	return make([]byte, n+2), nil
}
func (sink) HandleMessage(transport.NodeID, []byte) {}

// BenchmarkTransportCeiling moves the bytes of one push+pull through the
// transport alone — a 4·n-byte request answered with 2 bytes, then a small
// request answered with 4·n bytes — with no encoding and no optimizer: the
// transport's share of BenchmarkPushPull.
func BenchmarkTransportCeiling(b *testing.B) {
	for _, tp := range []string{"inmem", "tcp"} {
		for _, sz := range benchSizes {
			b.Run(tp+"/"+sz.name, func(b *testing.B) {
				var client transport.Transport
				switch tp {
				case "inmem":
					net := transport.NewInmemNetwork()
					defer net.Close()
					if _, err := net.Join("s", sink{}); err != nil {
						b.Fatal(err)
					}
					c, err := net.Join("c", ps.ClientHandler{})
					if err != nil {
						b.Fatal(err)
					}
					client = c
				case "tcp":
					s, err := transport.NewTCP(transport.TCPConfig{ID: "s"}, sink{})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					c, err := transport.NewTCP(transport.TCPConfig{ID: "c", Peers: map[transport.NodeID]string{"s": s.Addr().String()}}, ps.ClientHandler{})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					client = c
				}
				ctx := context.Background()
				push := make([]byte, 4*sz.n)  // asks for a 0-byte answer
				pull := []byte{0, 0, 0, 0, 0} // asks for 4·n bytes
				n := 4 * sz.n
				pull[0], pull[1], pull[2], pull[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
				b.SetBytes(int64(8 * sz.n))
				b.ResetTimer()
				for range b.N {
					if _, err := client.Request(ctx, "s", push); err != nil {
						b.Fatal(err)
					}
					if _, err := client.Request(ctx, "s", pull); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkStore_Apply measures the pure apply step (one key of n values)
// per optimizer: the server's work per push without the network.
func BenchmarkStore_Apply(b *testing.B) {
	for _, opt := range []store.Optimizer{store.SGD{LR: 0.01}, store.Momentum{LR: 0.01, Mu: 0.9}, store.Adam{LR: 0.001}} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", opt.Name(), sz.name), func(b *testing.B) {
				st, err := store.New(store.Config{Optimizer: opt})
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Init([]uint64{1}, []int{sz.n}, store.Uniform{Lo: -1, Hi: 1, Seed: 1}); err != nil {
					b.Fatal(err)
				}
				g := make([]float32, sz.n)
				store.Normal{Std: 1, Seed: 2}.Init(1, 0, g)
				b.SetBytes(int64(4 * sz.n))
				b.ResetTimer()
				for range b.N {
					if err := st.Apply([]uint64{1}, nil, g, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
