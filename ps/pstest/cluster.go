package pstest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/metrics"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"go.uber.org/goleak"
)

// Option configures NewCluster.
type Option func(*config)

type config struct {
	servers, workers int
	policy           epsp.Policy
	epsp             epsp.Config
	store            store.Config
	width            int
	part             layout.Partitioner
	obs              event.Observer
	met              metrics.Recorder
	netOpts          []transport.InmemOption
	chunk            int
	progress         int
	startTimeout     time.Duration
	noLeakCheck      bool
	tcp              bool
	secret           []byte
	lease            ps.LeaseConfig
	heartbeat        time.Duration
	coordTimeout     time.Duration
	durable          ps.DurableConfig
	retry            time.Duration
	membership       ps.MembershipConfig
	coordStore       ps.CoordinatorStore
}

// Elastic makes the run elastic (epsp.Config's MaxWorkers, MinWorkers and
// RejoinAfter; see ps.Cluster.AddWorker).
func Elastic(maxWorkers, minWorkers int, rejoinAfter time.Duration) Option {
	return func(c *config) {
		c.epsp.MaxWorkers, c.epsp.MinWorkers, c.epsp.RejoinAfter = maxWorkers, minWorkers, rejoinAfter
	}
}

// Membership sets the coordinator's pause bound and membership hook.
func Membership(m ps.MembershipConfig) Option { return func(c *config) { c.membership = m } }

// Lease sets the coordinator's failure detection.
func Lease(l ps.LeaseConfig) Option { return func(c *config) { c.lease = l } }

// Heartbeat sets the workers' heartbeat period and how long they wait for
// the coordinator before failing.
func Heartbeat(every, coordTimeout time.Duration) Option {
	return func(c *config) { c.heartbeat, c.coordTimeout = every, coordTimeout }
}

// CoordinatorStore makes the coordinator durable
// (ps.ClusterConfig.CoordinatorStore).
func CoordinatorStore(s ps.CoordinatorStore) Option { return func(c *config) { c.coordStore = s } }

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
func Optimizer(o store.Optimizer) Option { return func(c *config) { c.store.Optimizer = o } }

// Deterministic sets the servers' StoreConfig.Deterministic: a clock's
// pushes are summed per worker, the workers in name order.
func Deterministic() Option { return func(c *config) { c.store.Deterministic = true } }

// Width sets the clients' fixed value width (default 1).
func Width(w int) Option { return func(c *config) { c.width = w } }

// Partitioner sets the clients' partitioner.
func Partitioner(p layout.Partitioner) Option { return func(c *config) { c.part = p } }

// Observer sets the observer of every role.
func Observer(o event.Observer) Option { return func(c *config) { c.obs = o } }

// Metrics sets the roles' metrics.Recorder (ClusterConfig.Metrics).
func Metrics(r metrics.Recorder) Option { return func(c *config) { c.met = r } }

// Network passes options to the in-process network (delays, drops, lz4).
func Network(opts ...transport.InmemOption) Option {
	return func(c *config) { c.netOpts = append(c.netOpts, opts...) }
}

// Chunk sets the workers' chunk size (samples claimed at a time).
func Chunk(n int) Option { return func(c *config) { c.chunk = n } }

// ProgressEvery sets the chunks between the workers' progress reports.
func ProgressEvery(n int) Option { return func(c *config) { c.progress = n } }

// TCP runs the cluster over loopback TCP, one transport.TCP per node,
// instead of the in-process network (Net is then nil and Network options
// are ignored); secret, if not empty, is the shared secret of every
// connection.
func TCP(secret string) Option {
	return func(c *config) { c.tcp, c.secret = true, []byte(secret) }
}

// Cluster is a running cluster (a ps.Cluster with every node local).
type Cluster struct {
	PS          *ps.Cluster
	Net         *transport.InmemNetwork // nil over TCP
	Coordinator *ps.Coordinator         // nil with Workers(0)
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
	// A killed process runs nothing more: a checkpoint the old server
	// runs in the background ends before the new one starts, as the kill
	// would have ended it (either way its files restore the same state).
	c.mu.Lock()
	old := c.Servers[i]
	c.mu.Unlock()
	old.Close()
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
const CoordinatorID = ps.CoordinatorNode

// NewCluster starts a cluster with ps.NewCluster and registers its
// shutdown (ps.Cluster.Close: workers, coordinator, then the transports)
// with t.Cleanup; then it checks with goleak that no goroutine started
// since NewCluster is left (see NoLeakCheck). It fails the test if any
// role does not start.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := config{servers: 2, workers: 2, epsp: epsp.Config{Batch: 8, Parallelism: 1}, store: store.DefaultConfig(), width: 1, startTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	before := goleak.IgnoreCurrent()
	pc, err := ps.NewCluster(context.Background(), ps.ClusterConfig{
		Servers: cfg.servers, Workers: cfg.workers, TCP: cfg.tcp, Secret: cfg.secret, Network: cfg.netOpts,
		Policy: cfg.policy, EPSP: cfg.epsp, Store: cfg.store, Width: cfg.width, Partitioner: cfg.part,
		Chunk: cfg.chunk, ProgressEvery: cfg.progress, Observer: cfg.obs, StartTimeout: cfg.startTimeout, Metrics: cfg.met,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Lease:  cfg.lease, Heartbeat: cfg.heartbeat, CoordinatorTimeout: cfg.coordTimeout, Durable: cfg.durable, Retry: cfg.retry,
		CoordinatorStore: cfg.coordStore,
		Membership:       cfg.membership,
	})
	if err != nil {
		if !cfg.noLeakCheck {
			goleak.VerifyNone(t, before)
		}
		t.Fatalf("pstest: %v", err)
	}
	c := &Cluster{PS: pc, Net: pc.Network(), Coordinator: pc.Coordinator(), Workers: pc.Workers(), ClientCfg: pc.ClientConfig()}
	var ro []ps.Option
	if cfg.obs != nil {
		ro = append(ro, ps.WithObserver(cfg.obs))
	}
	if cfg.met != nil {
		ro = append(ro, ps.WithMetrics(cfg.met))
	}
	c.srvCfg, c.srvOpts = pc.ServerConfig(), ro
	t.Cleanup(func() {
		if err := pc.Close(); err != nil {
			t.Errorf("pstest: close: %v", err)
		}
		c.mu.Lock()
		for _, s := range append(c.Servers, c.dead...) {
			s.Close() // the servers RestartServer started, which the ps.Cluster does not know
		}
		c.mu.Unlock()
		if !cfg.noLeakCheck {
			// Every goroutine the cluster started must be gone.
			goleak.VerifyNone(t, before)
		}
	})
	for i := range cfg.servers {
		c.ServerIDs = append(c.ServerIDs, ps.ServerNode(i))
		c.Servers = append(c.Servers, pc.Server(i))
	}
	for i := range cfg.workers {
		c.WorkerIDs = append(c.WorkerIDs, ps.WorkerNode(i))
	}
	return c
}

// NewClient joins a fresh client node (client-N) and returns its client;
// over TCP it returns a client on the coordinator's (or first server's)
// transport.
func (c *Cluster) NewClient(t testing.TB) *ps.Client {
	t.Helper()
	if c.Net == nil {
		return c.PS.Client()
	}
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
	return c.PS.Train(ctx, model, sampler, tc)
}

// TrainWith is Train with a model per worker (for injected slowdowns).
func (c *Cluster) TrainWith(ctx context.Context, modelFor func(worker int) ps.Model, sampler ps.Sampler, tc ps.TrainConfig) ([]ps.TrainStats, error) {
	return c.PS.TrainWith(ctx, modelFor, sampler, tc)
}

// Recorder is an Observer that keeps every event in arrival order.
type Recorder struct {
	mu     sync.Mutex
	events []event.Event
}

// Observe records e.
func (r *Recorder) Observe(e event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.events...)
}

// Len returns the number of events recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// testWriter sends a cluster's log lines to t.Log (shown with -v or on
// failure).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
