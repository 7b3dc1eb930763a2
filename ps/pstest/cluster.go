package pstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/transport"
)

// Option configures NewCluster.
type Option func(*config)

type config struct {
	servers, workers int
	policy           epsp.Policy
	epsp             epsp.Config
	store            ps.StoreConfig
	width            int
	part             ps.Partitioner
	obs              ps.Observer
	netOpts          []transport.InmemOption
	chunk            int
	progress         int
	startTimeout     time.Duration
	noLeakCheck      bool
	lease            ps.LeaseConfig
	heartbeat        time.Duration
	coordTimeout     time.Duration
	durable          ps.DurableConfig
	retry            time.Duration
}

// Lease sets the coordinator's failure detection.
func Lease(l ps.LeaseConfig) Option { return func(c *config) { c.lease = l } }

// Heartbeat sets the workers' heartbeat period and how long they wait for
// the coordinator before failing.
func Heartbeat(every, coordTimeout time.Duration) Option {
	return func(c *config) { c.heartbeat, c.coordTimeout = every, coordTimeout }
}

// Durable gives every server durable state (ps.DurableConfig; one Dir
// serves all, the files are named after the servers).
func Durable(d ps.DurableConfig) Option { return func(c *config) { c.durable = d } }

// Retry makes the workers resend requests a server did not answer for up
// to d (ClientConfig.Retry), and the coordinator wait as long for a
// restarting server (LeaseConfig.ServerRestart).
func Retry(d time.Duration) Option {
	return func(c *config) { c.retry, c.lease.ServerRestart = d, d }
}

// NoLeakCheck turns off the goroutine-leak check NewCluster runs at
// cleanup (use it with t.Parallel, where other tests' goroutines come and go).
func NoLeakCheck() Option { return func(c *config) { c.noLeakCheck = true } }

// Servers sets the number of servers (default 2).
func Servers(n int) Option { return func(c *config) { c.servers = n } }

// Workers sets the number of workers (default 2; 0 starts no coordinator).
func Workers(n int) Option { return func(c *config) { c.workers = n } }

// Policy sets the synchronisation policy (default BSP).
func Policy(p epsp.Policy) Option { return func(c *config) { c.policy = p } }

// Batch sets every worker's initial batch size (default 8).
func Batch(b int) Option { return func(c *config) { c.epsp.Batch = b } }

// Parallelism sets every worker's initial parallelism (default 1).
func Parallelism(p int) Option { return func(c *config) { c.epsp.Parallelism = p } }

// TickPeriod sets the coordinator's control tick (default none).
func TickPeriod(d time.Duration) Option { return func(c *config) { c.epsp.TickPeriod = d } }

// Optimizer sets the servers' optimizer (default SGD with rate 0.01).
func Optimizer(o ps.Optimizer) Option { return func(c *config) { c.store.Optimizer = o } }

// Width sets the clients' fixed value width (default 1).
func Width(w int) Option { return func(c *config) { c.width = w } }

// Partitioner sets the clients' partitioner.
func Partitioner(p ps.Partitioner) Option { return func(c *config) { c.part = p } }

// Observer sets the observer of every role.
func Observer(o ps.Observer) Option { return func(c *config) { c.obs = o } }

// Network passes options to the in-process network (delays, drops, lz4).
func Network(opts ...transport.InmemOption) Option {
	return func(c *config) { c.netOpts = append(c.netOpts, opts...) }
}

// Chunk sets the workers' chunk size (samples claimed at a time).
func Chunk(n int) Option { return func(c *config) { c.chunk = n } }

// ProgressEvery sets the chunks between the workers' progress reports.
func ProgressEvery(n int) Option { return func(c *config) { c.progress = n } }

// Cluster is a running in-process cluster.
type Cluster struct {
	Net         *transport.InmemNetwork
	Coordinator *ps.Coordinator // nil with Workers(0)
	Servers     []*ps.Server
	Workers     []*ps.Worker
	ServerIDs   []transport.NodeID
	WorkerIDs   []transport.NodeID
	ClientCfg   ps.ClientConfig
	clients     int
	srvCfg      ps.ServerConfig
	srvOpts     []ps.Option
	mu          sync.Mutex
	dead        []*ps.Server // killed by RestartServer
}

// RestartServer kills server i as kill -9 would (its node leaves the
// network with whatever it had in memory; its files stay), waits down,
// and starts a new server process under the same name from the same
// durable state (Durable). It returns the new server.
func (c *Cluster) RestartServer(i int, down time.Duration) (*ps.Server, error) {
	id := c.ServerIDs[i]
	if err := c.Net.Kill(id); err != nil {
		return nil, err
	}
	time.Sleep(down)
	s, err := ps.NewServer(string(id), c.srvCfg, c.srvOpts...)
	if err != nil {
		return nil, err
	}
	if _, err := c.Net.Join(id, s); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.dead = append(c.dead, c.Servers[i])
	c.Servers[i] = s
	c.mu.Unlock()
	return s, nil
}

// CoordinatorID is the coordinator's node name.
const CoordinatorID transport.NodeID = "coordinator"

// NewCluster starts a cluster and registers its shutdown with t.Cleanup:
// workers, coordinator, then the network; then it checks with goleak that
// no goroutine started since NewCluster is left (see NoLeakCheck). It
// fails the test if any role does not start.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := config{servers: 2, workers: 2, epsp: epsp.Config{Batch: 8, Parallelism: 1}, store: ps.DefaultStoreConfig(), width: 1, startTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.policy == nil {
		cfg.policy = epsp.NewBSP()
	}
	before := goleak.IgnoreCurrent()
	c := &Cluster{Net: transport.NewInmemNetwork(cfg.netOpts...)}
	var closers []func()
	t.Cleanup(func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		c.Net.Close()
		if !cfg.noLeakCheck {
			// Every goroutine the cluster started must be gone.
			goleak.VerifyNone(t, before)
		}
	})
	for i := range cfg.servers {
		c.ServerIDs = append(c.ServerIDs, transport.NodeID(fmt.Sprintf("server-%d", i)))
	}
	for i := range cfg.workers {
		c.WorkerIDs = append(c.WorkerIDs, transport.NodeID(fmt.Sprintf("worker-%d", i)))
	}
	c.ClientCfg = ps.ClientConfig{Servers: c.ServerIDs, Width: cfg.width, Partitioner: cfg.part, Retry: cfg.retry}
	var ro []ps.Option
	if cfg.obs != nil {
		ro = append(ro, ps.WithObserver(cfg.obs))
	}
	c.srvCfg, c.srvOpts = ps.ServerConfig{Store: cfg.store, Durable: cfg.durable}, ro
	closers = append(closers, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range append(c.Servers, c.dead...) {
			s.Close()
		}
	})
	for i, id := range c.ServerIDs {
		s, err := ps.NewServer(string(id), c.srvCfg, ro...)
		if err != nil {
			t.Fatalf("pstest: server %d: %v", i, err)
		}
		if _, err := c.Net.Join(id, s); err != nil {
			t.Fatalf("pstest: join %s: %v", id, err)
		}
		c.Servers = append(c.Servers, s)
	}
	if cfg.workers == 0 {
		return c
	}
	ecfg := cfg.epsp
	ecfg.NumWorkers = cfg.workers
	cc := ps.CoordinatorConfig{EPSP: ecfg, Servers: c.ServerIDs, Workers: c.WorkerIDs, StartTimeout: cfg.startTimeout, Lease: cfg.lease}
	co, err := ps.NewCoordinator(cc, cfg.policy, ro...)
	if err != nil {
		t.Fatalf("pstest: coordinator: %v", err)
	}
	ctr, err := c.Net.Join(CoordinatorID, co)
	if err != nil {
		t.Fatalf("pstest: join coordinator: %v", err)
	}
	ctx := context.Background()
	if err := co.Start(ctx, ctr); err != nil {
		t.Fatalf("pstest: start coordinator: %v", err)
	}
	closers = append(closers, func() { co.Close() })
	c.Coordinator = co
	for i, id := range c.WorkerIDs {
		wc := ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: CoordinatorID, Client: c.ClientCfg,
			StartTimeout: cfg.startTimeout, Chunk: cfg.chunk, ProgressEvery: cfg.progress,
			Heartbeat: cfg.heartbeat, CoordinatorTimeout: cfg.coordTimeout}
		w, err := ps.NewWorker(string(id), wc, ro...)
		if err != nil {
			t.Fatalf("pstest: worker %d: %v", i, err)
		}
		wtr, err := c.Net.Join(id, w)
		if err != nil {
			t.Fatalf("pstest: join %s: %v", id, err)
		}
		if err := w.Start(ctx, wtr); err != nil {
			t.Fatalf("pstest: start %s: %v", id, err)
		}
		closers = append(closers, func() { w.Close() })
		c.Workers = append(c.Workers, w)
	}
	if err := co.WaitWorkers(ctx); err != nil {
		t.Fatalf("pstest: %v", err)
	}
	return c
}

// NewClient joins a fresh client node (client-N) and returns its client.
func (c *Cluster) NewClient(t testing.TB) *ps.Client {
	t.Helper()
	id := transport.NodeID(fmt.Sprintf("client-%d", c.clients))
	c.clients++
	tr, err := c.Net.Join(id, ps.ClientHandler{})
	if err != nil {
		t.Fatalf("pstest: join %s: %v", id, err)
	}
	cl, err := ps.NewClient(tr, c.ClientCfg)
	if err != nil {
		t.Fatalf("pstest: client: %v", err)
	}
	return cl
}

// Train runs Train on every worker at once and returns their stats.
func (c *Cluster) Train(ctx context.Context, model ps.Model, sampler ps.Sampler, tc ps.TrainConfig) ([]ps.TrainStats, error) {
	return c.TrainWith(ctx, func(int) ps.Model { return model }, sampler, tc)
}

// TrainWith is Train with a model per worker (for injected slowdowns).
func (c *Cluster) TrainWith(ctx context.Context, modelFor func(worker int) ps.Model, sampler ps.Sampler, tc ps.TrainConfig) ([]ps.TrainStats, error) {
	stats := make([]ps.TrainStats, len(c.Workers))
	g, gctx := errgroup.WithContext(ctx)
	for i, w := range c.Workers {
		g.Go(func() error {
			s, err := w.Train(gctx, modelFor(i), sampler, tc)
			stats[i] = s
			if err != nil {
				return fmt.Errorf("%s: %w", c.WorkerIDs[i], err)
			}
			return nil
		})
	}
	return stats, g.Wait()
}

// Recorder is an Observer that keeps every event in arrival order.
type Recorder struct {
	mu     sync.Mutex
	events []ps.Event
}

// Observe records e.
func (r *Recorder) Observe(e ps.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []ps.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ps.Event(nil), r.events...)
}

// Len returns the number of events recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}
