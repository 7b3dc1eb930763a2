package ps

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/metrics"
	"github.com/falconml/falcon/transport"
	"golang.org/x/sync/errgroup"
)

// # Clusters
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// Start-up is bounded: Start waits at most StartTimeout and the
// ErrStartTimeout error says who is missing, e.g.
//
//	ps: start timed out: waiting for 1/2 servers: server-1 unreachable (… dial "server-1" at 127.0.0.1:37093 …)
//
// NewCluster starts a whole cluster from one ClusterConfig — servers and
// workers counted, the policy, batch, optimizer, partitioner, and the
// network: in-process (transport.InmemNetwork) or TCP with a shared
// secret, TLS and compression — or only the nodes of it named in Local,
// reaching the others at their Peers addresses (one process per node, as
// a deployment runs it). Nodes are named coordinator, server-<i> and
// worker-<i>; a worker's epsp.WorkerID is its i, so names and ids cannot
// disagree (a Worker whose WorkerConfig.ID differs from its position in
// the coordinator's list is refused at Start with ErrRejected). The
// cluster owns its transports. Train trains on the local workers; Wait
// blocks until the run is over (the coordinator's node waits for every
// worker to leave and then tells the others, which return on its word);
// Close ends the roles, then the transports, is idempotent and returns
// within CloseTimeout even when peers are dead. The coordinator's abort
// carries its cause, so every node's error names a lost peer
// ("ps: run aborted by the coordinator: ps: peer lost: worker worker-1:
// …"); its end-of-run notice names the workers the run went on without
// (ContinueWithout), which every node logs, and a departed worker it
// cannot tell does not fail Wait. Across processes the
// nodes ping each other (the coordinator everyone, the others the
// coordinator); a peer silent for PeerTimeout ends Wait and Train with
// ErrPeerGone. The cluster's control requests (ping, stats, shutdown,
// abort) travel on the roles' transports with a first byte (0xFE) that
// is never this package's wire version. ParsePeers reads a static
// address book and PeersFromTemplate makes one from DNS names such as a
// Kubernetes JobSet's pods ("falcon-{role}-0-{rank}.falcon:7000").
// Example_cluster starts 2 servers
// and 3 workers over TCP with a secret and lz4 in under 30 lines;
// ExampleFromModel trains a model.Model in-process:
//
//	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: 3, Policy: epsp.NewSSP(2)})
//	defer c.Close()
//	stats, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: 3}, tc)
//
// FromModel bridges model.Model (mean loss, an overwritten gradient, one
// goroutine) and Model (sums added into the runtime's buffer, called from
// p goroutines), with one model copy per computing goroutine.
//
// The default partitioner (of Client and Cluster) is Modulo: key mod the
// number of servers, so dense small keys 0..n−1 spread over every server.
// (It was KeyRange over all of uint64, which put keys 0..10 on server-0.)
// Cluster.Train logs a warning when a server holds none of the keys
// (IdleServers). Elastic EPSP (on in epsp.DefaultEPSPConfig) can change
// no parallelism without a Topology or Parallelism.PMax; a Cluster whose
// workers all run in this process supplies OneHost{runtime.NumCPU()}
// (Cluster.Policy returns the policy it runs), and warns otherwise.

// ClusterConfig describes a whole cluster and which of its nodes this
// process runs. Nodes are named coordinator, server-<i> and worker-<i>
// (ServerNode, WorkerNode); a worker's epsp.WorkerID is its i. Servers (at
// least 1) and Workers (0: servers only) must be set; NewCluster gives the
// other zero fields the values of DefaultClusterConfig (BSP, batch 32, SGD
// 0.01, in process, the Modulo partitioner, its timeouts). A Secret, for
// TCP, needs at least 16 bytes (transport.MinSecretLen; shorter is refused
// with transport.ErrWeakSecret) and is stretched with scrypt before use;
// use 32 random bytes.
type ClusterConfig struct {
	// Servers and Workers count the cluster's nodes. Workers 0 starts
	// servers only (no coordinator), for key-value use with Client.
	Servers, Workers int
	// Local names the nodes this process runs; nil means all of them. Any
	// other node runs elsewhere and is reached at its Peers address (TCP
	// only).
	Local []transport.NodeID

	// TCP selects the network: false is one transport.InmemNetwork in this
	// process (every node must be local), true is one transport.TCP per
	// local node.
	TCP bool
	// Listen is the address every local TCP node binds; empty means
	// "127.0.0.1:0" (loopback, a port the kernel picks). With more than one
	// local node its port must be 0. Peers dial the address Peers gives
	// for the node (its advertised address), which may differ from Listen,
	// e.g. Listen ":7000" and Peers["worker-1"] = "worker-1.falcon:7000".
	Listen string
	// Peers maps the nodes run elsewhere to the "host:port" other nodes
	// dial; entries for local nodes are ignored (their bound addresses are
	// used).
	Peers map[transport.NodeID]string
	// Secret, when non-empty, is the shared secret every TCP connection
	// proves (transport.TCPConfig.Secret).
	Secret []byte
	// TLS, when non-nil, wraps every TCP connection (transport.TCPConfig.TLS).
	// One config shared by every node proves membership only, like Secret.
	TLS *tls.Config
	// NodeTLS, when non-nil, gives each local node its own mutual-TLS
	// config holding that node's certificate (transport.IdentityTLS or
	// LoadIdentityTLS) and turns on transport.TCPConfig.CertIdentity: the
	// name a connection proves, which the role checks use, is then the
	// node name in the peer's certificate, so a member cannot claim
	// another's role. TCP only; it replaces TLS (set one of them).
	NodeTLS func(transport.NodeID) (*tls.Config, error)
	// Compression chooses the codec per message, over TCP and in-process;
	// nil means none.
	Compression transport.CompressionPolicy
	// Network holds more options of the in-process network (delays, drops).
	Network []transport.InmemOption

	// Policy is the synchronisation policy (the coordinator's); nil means
	// BSP. A policy keeps state: give each Cluster its own. Elastic EPSP
	// without a Topology or Parallelism.PMax gets OneHost when every
	// worker is local (see Cluster.Policy) and a warning otherwise.
	Policy epsp.Policy
	// EPSP sets the initial batch and parallelism and the control tick;
	// NumWorkers is taken from Workers. Zero Batch means 32. Its
	// MaxWorkers, MinWorkers and RejoinAfter make the run elastic (see
	// Membership): workers worker-<i>, Workers <= i < MaxWorkers, may join
	// it later (Cluster.AddWorker in process; over TCP their addresses
	// must be in Peers).
	EPSP epsp.Config
	// Membership is the coordinator's pause bound and change hook
	// (CoordinatorConfig.Membership).
	Membership MembershipConfig
	// Store configures every server's store; a zero Optimizer means SGD
	// with rate 0.01. Its Deterministic also tells the coordinator
	// (CoordinatorConfig.SendersApart) that a lost worker's push can be
	// dropped from every server under ContinueWithout (partial.go).
	Store StoreConfig
	// Width is the clients' fixed value width; zero means 1.
	Width int
	// Partitioner places keys on servers; nil means Modulo with
	// DefaultMaxSegment, which spreads small dense keys over every server.
	Partitioner Partitioner
	// Chunk and ProgressEvery are the workers' (see WorkerConfig).
	Chunk, ProgressEvery int

	// Observer, if set, sees the events of every local role. All local
	// roles share one clock (Event.At is the time since NewCluster).
	Observer event.Observer
	// Metrics, if set, receives the metrics of every local role (package
	// ps/metrics; ps/metrics/prom exports them to Prometheus); nil
	// records nothing.
	Metrics metrics.Recorder
	// StateEvery, when positive, reports every worker's state (clock,
	// speed, parallelism, batch, straggler or pioneer) as the coordinator
	// sees it, at this interval, to OnState; it needs the coordinator in
	// this process. Cluster.WorkerStates gives the same on demand.
	StateEvery time.Duration
	// OnState receives the states; nil logs one line per worker to Logger.
	OnState func([]WorkerState)
	// Logger receives recovered panics and warnings; nil means
	// slog.Default().
	Logger *slog.Logger

	// StartTimeout bounds each role's wait for its peers; zero means 10 s.
	StartTimeout time.Duration
	// CloseTimeout bounds Close; zero means 5 s.
	CloseTimeout time.Duration
	// PeerTimeout is how long a peer that answered once may fail the
	// cluster's pings (one a second) before Wait gives up on it with
	// ErrPeerGone; zero means 5 s. Nodes ping only across processes.
	PeerTimeout time.Duration

	// Lease is the coordinator's failure detection (CoordinatorConfig.Lease).
	Lease LeaseConfig
	// Heartbeat and CoordinatorTimeout are the workers' (WorkerConfig).
	Heartbeat, CoordinatorTimeout time.Duration
	// Durable gives every server durable state (ServerConfig.Durable).
	// With a Dir, NewCluster sets its Layout (LayoutHash of Partitioner
	// and Servers) and, when RunID is empty, picks a random run id (a new
	// run: checkpoints of another run are refused) and logs it; give it
	// back as RunID to resume the run after its processes restart.
	Durable DurableConfig
	// Retry is how long clients resend a request a server did not answer
	// (ClientConfig.Retry).
	Retry time.Duration
	// CoordinatorStore keeps the coordinator's state
	// (CoordinatorConfig.Store): with it, a coordinator process killed and
	// started again on the same store resumes the run. Nil means not
	// durable.
	CoordinatorStore CoordinatorStore
	// CoordinatorWait is how long the nodes wait for a coordinator that
	// stopped answering before they fail naming it. On the coordinator's
	// node it is what the coordinator asks of the others
	// (CoordinatorConfig.Wait: zero means DefaultCoordinatorWait, 60 s,
	// with a CoordinatorStore, and no wait without one); on the other
	// nodes a positive value overrides what the coordinator asks
	// (WorkerConfig.CoordinatorWait, and the tolerance of the cluster's
	// pings of the coordinator, otherwise PeerTimeout), a negative one
	// means no wait.
	CoordinatorWait time.Duration
}

// DefaultClusterConfig returns a cluster of 2 servers and 3 workers in
// this process under BSP, batch 32, SGD with rate 0.01.
func DefaultClusterConfig() ClusterConfig {
	return ClusterConfig{Servers: 2, Workers: 3, EPSP: epsp.Config{Batch: 32, Parallelism: 1},
		Store: DefaultStoreConfig(), StartTimeout: 10 * time.Second, CloseTimeout: 5 * time.Second, PeerTimeout: 5 * time.Second}
}

// Validate checks the configuration.
func (c *ClusterConfig) Validate() error {
	if c.Servers < 1 || c.Workers < 0 {
		return fmt.Errorf("ps: cluster of %d servers and %d workers", c.Servers, c.Workers)
	}
	if c.StartTimeout < 0 || c.CloseTimeout < 0 || c.PeerTimeout < 0 || c.Width < 0 || c.Chunk < 0 || c.ProgressEvery < 0 {
		return errors.New("ps: negative ClusterConfig field")
	}
	seen := map[transport.NodeID]bool{}
	for _, n := range c.Local {
		if _, _, err := ParseNode(n, c.Servers, c.slots()); err != nil || (n == CoordinatorNode && c.Workers == 0) {
			return fmt.Errorf("ps: ClusterConfig.Local: %w", errors.Join(err, ErrBadNodeName))
		}
		if seen[n] {
			return fmt.Errorf("ps: ClusterConfig.Local names %q twice", n)
		}
		seen[n] = true
	}
	if c.NodeTLS != nil && (!c.TCP || c.TLS != nil) {
		return errors.New("ps: ClusterConfig.NodeTLS needs TCP and no TLS (it gives each node its own)")
	}
	all := clusterNodes(c.Servers, c.Workers)
	if !c.TCP {
		if c.Local != nil && len(c.Local) != len(all) {
			return errors.New("ps: an in-process cluster runs every node; set TCP to run some of them elsewhere")
		}
		return nil
	}
	for _, n := range all {
		if c.local(n) {
			continue
		}
		if c.Peers[n] == "" {
			return fmt.Errorf("ps: node %s runs elsewhere but ClusterConfig.Peers has no address for it", n)
		}
	}
	if len(c.localNodes()) > 1 && c.Listen != "" && !strings.HasSuffix(c.Listen, ":0") {
		return fmt.Errorf("ps: %d local nodes cannot all bind %s; use port 0", len(c.localNodes()), c.Listen)
	}
	return nil
}

// serverConfig is every server's config. With workers, servers check
// roles (ClusterAccess); a servers-only cluster (key-value use with
// Client, no coordinator) has no flush to guard and checks none.
func (c *ClusterConfig) serverConfig() ServerConfig {
	sc := ServerConfig{Store: c.Store, Durable: c.Durable}
	if sc.Durable.DedupIdle == 0 && c.Retry > 0 {
		// the cluster's clients resend for Retry, each try waiting at
		// most the default RequestTimeout of 30 s (dedup.go)
		sc.Durable.DedupIdle = 2 * (c.Retry + 30*time.Second)
	}
	if c.Durable.Dir != "" && c.Partitioner != nil {
		sc.Durable.Layout = LayoutHash(c.Partitioner, c.Servers)
	}
	if c.Workers > 0 {
		sc.Access = ClusterAccess(c.Servers, c.slots())
	}
	return sc
}

// ServerConfig is the config the cluster gives every server (for a
// server restarted by hand under its name).
func (c *Cluster) ServerConfig() ServerConfig { return c.cfg.serverConfig() }

// slots is the number of worker names: Workers, or EPSP.MaxWorkers.
func (c *ClusterConfig) slots() int { return max(c.Workers, c.EPSP.MaxWorkers) }

func (c *ClusterConfig) local(n transport.NodeID) bool {
	return c.Local == nil || slices.Contains(c.Local, n)
}

// localNodes lists the nodes this process runs: every node of the
// cluster with Local nil; else those Local names, which may include
// worker slots beyond Workers (a process joining an elastic run).
func (c *ClusterConfig) localNodes() []transport.NodeID {
	var out []transport.NodeID
	all := clusterNodes(c.Servers, c.Workers)
	if c.Local != nil {
		all = clusterNodes(c.Servers, c.slots())
		if c.Workers == 0 {
			all = all[:c.Servers] // no coordinator, no workers
		}
	}
	for _, n := range all {
		if c.local(n) {
			out = append(out, n)
		}
	}
	return out
}

// Cluster is a running cluster, or the part of one this process runs.
// NewCluster makes it (a zero Cluster is not usable) and returns once the
// servers, the coordinator and the workers it starts are up (at most
// StartTimeout). Train trains on the local workers and returns when they
// have run their clocks; Wait blocks until the whole run is over (the node
// of a multi-process cluster calls it); Client gives the key-value API
// (Push, Pull). It owns its transports: Close ends the roles and then the
// transports, is idempotent and returns within CloseTimeout.
type Cluster struct {
	cfg    ClusterConfig
	log    *slog.Logger
	net    *transport.InmemNetwork // in-process only
	trs    map[transport.NodeID]transport.Transport
	ctls   map[transport.NodeID]*ctlHandler
	order  []transport.NodeID // local nodes, start order
	coord  *Coordinator
	states *stateTracker
	policy epsp.Policy
	srvs   map[int]*Server
	wrks   map[int]*Worker
	client *Client
	cc     ClientConfig

	watchCtx    context.Context
	watchCancel context.CancelCauseFunc
	watchWG     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	told    bool      // the coordinator told the remote nodes the run is over
	retired []*Worker // workers AddWorker replaced: Close closes them
	ro      []Option  // the roles' options (AddWorker)
}

// NewCluster builds the local nodes of cfg, joins them to their
// transports and starts them: servers, then the coordinator (which waits
// up to StartTimeout for every server), then the workers (each waits for
// the servers and the coordinator). When every worker is local it also
// waits until all have joined. On error everything started is closed.
func NewCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	d := DefaultClusterConfig()
	if cfg.EPSP.Batch == 0 {
		cfg.EPSP.Batch = d.EPSP.Batch
	}
	if cfg.Store.Optimizer == nil {
		cfg.Store.Optimizer = d.Store.Optimizer
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = d.StartTimeout
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = d.CloseTimeout
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = d.PeerTimeout
	}
	if cfg.Width == 0 {
		cfg.Width = 1
	}
	if cfg.Partitioner == nil {
		cfg.Partitioner = Modulo{Servers: cfg.Servers, MaxSegment: DefaultMaxSegment}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, trs: map[transport.NodeID]transport.Transport{},
		ctls: map[transport.NodeID]*ctlHandler{}, srvs: map[int]*Server{}, wrks: map[int]*Worker{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.watchCtx, c.watchCancel = context.WithCancelCause(context.Background())
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	start := time.Now()
	ro := []Option{WithLogger(c.log), WithClock(func() time.Duration { return time.Since(start) }), WithMetrics(cfg.Metrics)}
	defer func() { c.ro = ro }()
	var obs []event.Observer
	if cfg.Workers > 0 && cfg.local(CoordinatorNode) {
		c.states = newStateTracker(cfg.slots(), cfg.EPSP.Batch, cfg.EPSP.Parallelism)
		obs = append(obs, c.states)
	}
	if cfg.Observer != nil {
		obs = append(obs, cfg.Observer)
	}
	switch len(obs) {
	case 1:
		ro = append(ro, WithObserver(obs[0]))
	case 2:
		ro = append(ro, WithObserver(event.Func(func(e event.Event) { obs[0].Observe(e); obs[1].Observe(e) })))
	}
	if !cfg.TCP {
		opts := append([]transport.InmemOption(nil), cfg.Network...)
		if cfg.Compression != nil {
			opts = append(opts, transport.WithCompression(cfg.Compression))
		}
		c.net = transport.NewInmemNetwork(opts...)
	}
	if cfg.Durable.Dir != "" && cfg.Durable.RunID == "" && slices.ContainsFunc(cfg.localNodes(), func(n transport.NodeID) bool {
		r, _, _ := ParseNode(n, cfg.Servers, cfg.slots())
		return r == RoleServer
	}) {
		cfg.Durable.RunID = NewRunID()
		c.cfg.Durable.RunID = cfg.Durable.RunID
		c.log.Info("ps: a new run; give its id as ClusterConfig.Durable.RunID to resume it after a restart", "run", cfg.Durable.RunID)
	}
	c.cc = ClientConfig{Servers: serverNodes(cfg.Servers), Width: cfg.Width, Partitioner: cfg.Partitioner, Retry: cfg.Retry}

	// Build every local role and its handler.
	handlers := map[transport.NodeID]transport.Handler{}
	for _, n := range cfg.localNodes() {
		role, rank, _ := ParseNode(n, cfg.Servers, cfg.slots())
		var h *ctlHandler
		switch role {
		case RoleServer:
			s, err := NewServer(string(n), cfg.serverConfig(), ro...)
			if err != nil {
				return nil, err
			}
			c.srvs[rank] = s
			h = newCtlHandler(s)
			handlers[n] = ctlServer{h, s}
		case RoleCoordinator:
			pol := cfg.Policy
			if pol == nil {
				pol = epsp.NewBSP()
			}
			allLocal := true
			for i := range cfg.Workers {
				allLocal = allLocal && cfg.local(WorkerNode(i))
			}
			pol = inferTopology(pol, allLocal, c.log)
			c.policy = pol
			ec := cfg.EPSP
			ec.NumWorkers = cfg.Workers
			co, err := NewCoordinator(CoordinatorConfig{EPSP: ec, Servers: c.cc.Servers, Workers: workerNodes(cfg.slots()), StartTimeout: cfg.StartTimeout,
				Lease: cfg.Lease, Membership: cfg.Membership, Store: cfg.CoordinatorStore, Wait: cfg.CoordinatorWait, SendersApart: cfg.Store.Deterministic}, pol, ro...)
			if err != nil {
				return nil, err
			}
			c.coord = co
			h = newCtlHandler(co)
			handlers[n] = h
		case RoleWorker:
			w, err := NewWorker(string(n), c.workerConfig(rank), ro...)
			if err != nil {
				return nil, err
			}
			c.wrks[rank] = w
			h = newCtlHandler(w)
			handlers[n] = h
		}
		c.ctls[n] = h
		c.order = append(c.order, n)
	}

	// Join every local node to its transport, then tell each the others.
	for _, n := range c.order {
		var tr transport.Transport
		if c.net != nil {
			t, err := c.net.Join(n, handlers[n])
			if err != nil {
				return nil, err
			}
			tr = t
		} else {
			tc := transport.DefaultTCPConfig()
			tc.ID, tc.Secret, tc.TLS, tc.Compression = n, cfg.Secret, cfg.TLS, cfg.Compression
			if cfg.NodeTLS != nil {
				if tc.TLS, err = cfg.NodeTLS(n); err != nil {
					return nil, fmt.Errorf("ps: %s: TLS identity: %w", n, err)
				}
				tc.CertIdentity = true
			}
			if cfg.Compression == nil {
				tc.Compression = transport.Never
			}
			if cfg.Listen != "" {
				tc.ListenAddr = cfg.Listen
			}
			peers := map[transport.NodeID]string{}
			for p, a := range cfg.Peers {
				if !cfg.local(p) {
					peers[p] = a
				}
			}
			tc.Peers = peers
			t, err := transport.NewTCP(tc, handlers[n])
			if err != nil {
				return nil, fmt.Errorf("ps: %s: %w", n, err)
			}
			tr = t
		}
		c.trs[n] = tr
		c.ctls[n].setTransport(tr)
	}
	if cfg.TCP {
		for _, a := range c.order {
			for _, b := range c.order {
				if a != b {
					c.trs[a].(*transport.TCP).AddPeer(b, c.trs[b].(*transport.TCP).Addr().String())
				}
			}
		}
	}

	// Start the roles: coordinator first (it waits for the servers, which
	// serve as soon as their transport listens), then the workers.
	if c.coord != nil {
		if err := c.coord.Start(ctx, c.trs[CoordinatorNode]); err != nil {
			return nil, fmt.Errorf("ps: start coordinator: %w", err)
		}
	}
	for i := range cfg.slots() { // a worker beyond Workers joins a running job
		if w := c.wrks[i]; w != nil {
			if err := w.Start(ctx, c.trs[WorkerNode(i)]); err != nil {
				return nil, fmt.Errorf("ps: start %s: %w", WorkerNode(i), err)
			}
		}
	}
	if c.coord != nil && len(c.wrks) == cfg.Workers {
		if err := c.coord.WaitWorkers(ctx); err != nil {
			return nil, err
		}
	}
	cl, err := NewClient(c.trs[c.order[0]], c.cc)
	if err != nil {
		return nil, err
	}
	c.client = cl
	c.startWatch()
	c.startStates()
	return c, nil
}

// WorkerStates returns every worker's state as the local coordinator's
// events show it (nil without a local coordinator).
func (c *Cluster) WorkerStates() []WorkerState {
	if c.states == nil {
		return nil
	}
	return c.states.states()
}

func (c *Cluster) startStates() {
	if c.cfg.StateEvery <= 0 || c.states == nil {
		return
	}
	report := c.cfg.OnState
	if report == nil {
		report = func(ss []WorkerState) {
			for _, s := range ss {
				c.log.Info("ps: " + s.String())
			}
		}
	}
	c.watchWG.Add(1)
	go func() {
		defer c.watchWG.Done()
		t := time.NewTicker(c.cfg.StateEvery)
		defer t.Stop()
		for {
			select {
			case <-c.watchCtx.Done():
				return
			case <-t.C:
				report(c.WorkerStates())
			}
		}
	}()
}

// Coordinator returns the local coordinator, or nil.
func (c *Cluster) Coordinator() *Coordinator { return c.coord }

// Policy returns the policy the local coordinator decides with (nil
// without one): Config.Policy, or, for elastic EPSP given neither a
// Topology nor Parallelism.PMax in a cluster whose workers all run in
// this process, a copy of it with the topology OneHost{runtime.NumCPU()}.
func (c *Cluster) Policy() epsp.Policy { return c.policy }

// Server returns local server i, or nil.
func (c *Cluster) Server(i int) *Server { return c.srvs[i] }

// Worker returns local worker i, or nil.
func (c *Cluster) Worker(i int) *Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wrks[i]
}

func (c *Cluster) workerConfig(rank int) WorkerConfig {
	return WorkerConfig{ID: epsp.WorkerID(rank), Coordinator: CoordinatorNode, Client: c.cc,
		StartTimeout: c.cfg.StartTimeout, Chunk: c.cfg.Chunk, ProgressEvery: c.cfg.ProgressEvery,
		Heartbeat: c.cfg.Heartbeat, CoordinatorTimeout: c.cfg.CoordinatorTimeout, CoordinatorWait: c.cfg.CoordinatorWait}
}

// AddWorker starts worker-<i> in this process and has it say hello to the
// coordinator: a worker joining an elastic run (i below
// EPSP.MaxWorkers; see Membership), or one that left coming back as a new
// process. In-process clusters only. A node of that name still on the
// network (a departed worker's) is removed first, as if its process had
// exited. The worker's Start error is returned (ErrRejoinTooSoon before
// the cooldown, ErrRestarted while the name is still a member,
// ErrJoinRefused); on success Worker(i) returns the new worker, which
// Close closes.
func (c *Cluster) AddWorker(ctx context.Context, i int) (*Worker, error) {
	if c.net == nil {
		return nil, errors.New("ps: AddWorker needs an in-process cluster")
	}
	if i < 0 || i >= c.cfg.slots() {
		return nil, fmt.Errorf("%w: worker-%d (the cluster has %d worker slots)", ErrBadNodeName, i, c.cfg.slots())
	}
	n := WorkerNode(i)
	w, err := NewWorker(string(n), c.workerConfig(i), c.ro...)
	if err != nil {
		return nil, err
	}
	if c.net.Node(n) != nil {
		_ = c.net.Kill(n)
	}
	tr, err := c.net.Join(n, newCtlHandler(w))
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx, tr); err != nil {
		w.Close()
		_ = tr.Close()
		return nil, err
	}
	c.mu.Lock()
	if old := c.wrks[i]; old != nil {
		c.retired = append(c.retired, old)
	}
	c.wrks[i] = w
	c.mu.Unlock()
	return w, nil
}

// Workers returns the local workers in rank order.
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws []*Worker
	for i := range c.cfg.slots() {
		if w := c.wrks[i]; w != nil {
			ws = append(ws, w)
		}
	}
	return ws
}

// Network returns the in-process network (nil over TCP), for fault
// injection in tests.
func (c *Cluster) Network() *transport.InmemNetwork { return c.net }

// Transport returns the transport of local node n, or nil.
func (c *Cluster) Transport(n transport.NodeID) transport.Transport { return c.trs[n] }

// Addr returns the address local TCP node n listens on ("" otherwise).
func (c *Cluster) Addr(n transport.NodeID) string {
	if t, ok := c.trs[n].(*transport.TCP); ok {
		return t.Addr().String()
	}
	return ""
}

// ClientConfig returns the configuration every client of the cluster
// must use (servers, width, partitioner).
func (c *Cluster) ClientConfig() ClientConfig { return c.cc }

// Client returns a key-value client over the first local node's
// transport (the coordinator's, when it is local): for initial values,
// evaluation pulls and key-value use.
func (c *Cluster) Client() *Client { return c.client }

// Train runs Train on every local worker at once, with the same model,
// and returns their stats in rank order. It logs a warning when a server
// holds none of the keys (its share of the work is idle).
func (c *Cluster) Train(ctx context.Context, model Model, sampler Sampler, tc TrainConfig) ([]TrainStats, error) {
	return c.TrainWith(ctx, func(int) Model { return model }, sampler, tc)
}

// TrainWith is Train with a model per worker rank (for injected slowdowns,
// or a model that is not safe for concurrent use).
func (c *Cluster) TrainWith(ctx context.Context, modelFor func(rank int) Model, sampler Sampler, tc TrainConfig) ([]TrainStats, error) {
	if idle := IdleServers(c.cc, tc.Keys, tc.Lens); len(idle) > 0 {
		c.log.Warn("ps: servers hold none of the training keys; they will idle", "servers", fmt.Sprint(idle), "keys", len(tc.Keys))
	}
	ws := c.Workers()
	stats := make([]TrainStats, len(ws))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.watchCtx, func() { cancel(context.Cause(c.watchCtx)) })
	defer stop()
	for _, w := range ws {
		h := c.ctls[WorkerNode(int(w.ID()))]
		go func() {
			select {
			case <-h.aborted:
				cancel(h.abortErr())
			case <-h.shutdown:
				cancel(errRunOver)
			case <-ctx.Done():
			}
		}()
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, w := range ws {
		g.Go(func() error {
			s, err := w.Train(gctx, modelFor(int(w.ID())), sampler, tc)
			stats[i] = s
			if err != nil {
				return fmt.Errorf("%s: %w", WorkerNode(int(w.ID())), err)
			}
			return nil
		})
	}
	err := g.Wait()
	if err != nil && context.Cause(ctx) != nil && !errors.Is(err, context.Cause(ctx)) {
		err = fmt.Errorf("%w (while: %v)", context.Cause(ctx), err)
	}
	return stats, err
}

// errRunOver ends a Train that still runs when the coordinator ends the
// run (a policy that leaves a worker waiting).
var errRunOver = errors.New("ps: the coordinator ended the run")

// IdleServers returns the servers of cfg that hold no part of keys
// (lens nil means cfg.Width each) under cfg's partitioner (nil: the
// Client's default).
func IdleServers(cfg ClientConfig, keys []uint64, lens []int) []transport.NodeID {
	n := len(cfg.Servers)
	if n == 0 || len(keys) == 0 {
		return nil
	}
	p := cfg.Partitioner
	if p == nil {
		p = Modulo{Servers: n, MaxSegment: DefaultMaxSegment}
	}
	w := max(cfg.Width, 1)
	used := make([]bool, n)
	var segs []Segment
	for i, k := range keys {
		l := w
		if lens != nil && i < len(lens) {
			l = lens[i]
		}
		segs = p.Locate(segs[:0], k, l)
		for _, s := range segs {
			if s.Server >= 0 && s.Server < n {
				used[s.Server] = true
			}
		}
	}
	var idle []transport.NodeID
	for s, u := range used {
		if !u {
			idle = append(idle, cfg.Servers[s])
		}
	}
	return idle
}

// remote lists the nodes this process does not run.
func (c *Cluster) remote() []transport.NodeID {
	var out []transport.NodeID
	for _, n := range clusterNodes(c.cfg.Servers, c.cfg.Workers) {
		if !c.cfg.local(n) {
			out = append(out, n)
		}
	}
	return out
}

// startWatch pings, once a second, the coordinator (from a node that is
// not it) or every remote node (from the coordinator): a peer that has
// answered once and then fails for PeerTimeout ends Wait with ErrPeerGone.
func (c *Cluster) startWatch() {
	remote := c.remote()
	if len(remote) == 0 {
		return
	}
	from := c.order[0]
	peers := remote
	if c.coord == nil {
		if slices.Contains(remote, CoordinatorNode) {
			peers = []transport.NodeID{CoordinatorNode}
		} else {
			return
		}
	} else {
		from = CoordinatorNode
		if c.cfg.EPSP.MaxWorkers > c.cfg.Workers || c.cfg.EPSP.MinWorkers > 0 || c.cfg.Lease.OnWorkerLost == ContinueWithout {
			// Workers may leave (and their processes exit) while the run
			// goes on: the leases watch them, not this watch.
			peers = slices.DeleteFunc(slices.Clone(peers), func(n transport.NodeID) bool {
				r, _, _ := ParseNode(n, c.cfg.Servers, c.cfg.slots())
				return r == RoleWorker
			})
			if len(peers) == 0 {
				return
			}
		}
	}
	tr := c.trs[from]
	c.watchWG.Add(1)
	go func() {
		defer c.watchWG.Done()
		if c.coord != nil {
			// Ping workers only once they have joined: a dial to a node
			// that is not listening yet puts the transport into its
			// reconnect backoff, during which the first release to that
			// worker would fail at once.
			_ = c.coord.WaitWorkers(c.watchCtx)
		}
		seen := make([]time.Time, len(peers)) // last answer
		// a peer never heard from is waited for StartTimeout first (a
		// coordinator killed before a server's first ping got through
		// was waited for forever)
		never := time.Now().Add(c.cfg.StartTimeout)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var asked time.Duration // the wait the coordinator asks (its pings' answers)
		for {
			for i, p := range peers {
				pctx, cancel := context.WithTimeout(c.watchCtx, 2*time.Second)
				resp, err := tr.Request(pctx, p, ctlMsg(ctlPing))
				cancel()
				if op, v, ok := parseCtl(resp); err == nil && ok && op == ctlPing && len(v) == 1 && p == CoordinatorNode {
					asked = time.Duration(min(v[0], uint64(24*time.Hour)))
				}
				tolerance := c.cfg.PeerTimeout
				if p == CoordinatorNode {
					switch w := c.cfg.CoordinatorWait; {
					case w > 0:
						tolerance = max(tolerance, w)
					case w == 0:
						tolerance = max(tolerance, asked)
					}
				}
				var re *transport.RemoteError
				switch {
				case err == nil || errors.As(err, &re):
					seen[i] = time.Now()
				case c.watchCtx.Err() != nil:
					return
				case time.Since(cmp.Or(seen[i], never)) > tolerance:
					c.watchCancel(fmt.Errorf("%w: %s for %v: %v", ErrPeerGone, p, tolerance, err))
					return
				}
			}
			select {
			case <-c.watchCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Wait blocks until the run is over. With the coordinator local, that is
// when every worker has left (finished Train) or the run failed; Wait
// then tells every remote node (shutdown, or abort on failure; nothing
// when the coordinator was superseded, see Abandon) and returns the
// coordinator's error. Elsewhere it waits for the
// coordinator's word: nil on shutdown, ErrAborted on abort. A peer that
// stops answering ends it with ErrPeerGone; ctx ends it with ctx's error.
func (c *Cluster) Wait(ctx context.Context) error {
	if c.coord != nil {
		return c.waitCoordinator(ctx)
	}
	h := c.ctls[c.order[0]]
	var werr error
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for werr == nil {
		select {
		case <-h.shutdown:
			if note := h.shutdownNote(); note != "" {
				c.log.Warn("ps: the run is over; the coordinator says: " + note)
			}
			return nil
		case <-h.aborted:
			return h.abortErr()
		case <-c.watchCtx.Done():
			werr = context.Cause(c.watchCtx)
		case <-ctx.Done():
			werr = ctx.Err()
		case <-tick.C:
			c.mu.Lock()
			ws := slices.Collect(maps.Values(c.wrks))
			c.mu.Unlock()
			for _, w := range ws {
				if err := w.Err(); err != nil {
					werr = err
				}
			}
		}
	}
	return werr
}

// WaitTrained blocks, on the coordinator's node, until every worker has
// left (finished Train) or the run failed, without telling the other
// nodes: a program can still pull, evaluate and collect TrafficStats from
// every node before Wait ends the run. It returns the run's error.
// Without a local coordinator it is Wait.
func (c *Cluster) WaitTrained(ctx context.Context) error {
	if c.coord == nil {
		return c.Wait(ctx)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.coord.Err(); err != nil {
			return err
		}
		// every member has left: the initial workers and the joiners
		// (each membership ends in one leave), and no pause waits for more
		if st := c.coord.Stats(); st.Left >= c.cfg.Workers+st.Joined && !c.coord.Paused() {
			return nil
		}
		select {
		case <-tick.C:
		case <-c.watchCtx.Done():
			return context.Cause(c.watchCtx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Cluster) waitCoordinator(ctx context.Context) error {
	err := c.WaitTrained(ctx)
	op := ctlShutdown
	if err != nil {
		op = ctlAbort
	}
	c.mu.Lock()
	told := c.told
	c.told = true
	c.mu.Unlock()
	if told || c.coord.gone.Load() {
		return err // superseded: its successor ends the run
	}
	note := c.coord.lostNote()
	if err != nil {
		note = err.Error()
	}
	if serr := c.tellRemote(op, note, min(c.cfg.CloseTimeout, 5*time.Second)); serr != nil && err == nil {
		err = serr
	}
	return err
}

// tellRemote sends op (with note, see ctlNote) to every remote node at
// once, at most a few seconds each; it returns an error naming the nodes
// that could not be told. A worker that is no longer in the run (it was
// lost, or left) is told if it can be, and not counted when it cannot:
// its process may be gone, and the run does not need it.
func (c *Cluster) tellRemote(op byte, note string, timeout time.Duration) error {
	remote := c.remote()
	if len(remote) == 0 {
		return nil
	}
	tr := c.trs[CoordinatorNode]
	if tr == nil {
		return nil // the coordinator never got a transport (NewCluster failed)
	}
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for _, p := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if _, err := tr.Request(ctx, p, ctlNote(op, note)); err != nil {
				if c.departed(p) {
					c.log.Info("ps: could not tell a departed worker that the run is over", "worker", p, "err", err)
					return
				}
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s (%v)", p, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("ps: could not tell %s that the run is over", strings.Join(failed, ", "))
	}
	return nil
}

// departed reports whether node n is a worker that was in the run and
// is no more (lost, or left), by the local coordinator's leases.
func (c *Cluster) departed(n transport.NodeID) bool {
	r, i, err := ParseNode(n, c.cfg.Servers, c.cfg.slots())
	if err != nil || r != RoleWorker || c.coord == nil {
		return false
	}
	return c.coord.lease.departed(epsp.WorkerID(i))
}

// TrafficStats sums the transport counters of every node: the local ones
// directly, the remote ones by asking them (a node that does not answer
// within 5 s is named in the error and left out of the sum).
func (c *Cluster) TrafficStats(ctx context.Context) (transport.Stats, error) {
	var total transport.Stats
	add := func(s transport.Stats) {
		total.FramesSent += s.FramesSent
		total.RawBytesSent += s.RawBytesSent
		total.WireBytesSent += s.WireBytesSent
		total.FramesReceived += s.FramesReceived
		total.RawBytesReceived += s.RawBytesReceived
		total.WireBytesReceived += s.WireBytesReceived
	}
	for _, n := range c.order {
		if sr, ok := c.trs[n].(transport.StatsReporter); ok {
			add(sr.Stats())
		}
	}
	var missing []string
	for _, p := range c.remote() {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.trs[c.order[0]].Request(rctx, p, ctlMsg(ctlStats))
		cancel()
		var s transport.Stats
		if err == nil {
			s, err = statsOf(resp)
		}
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		add(s)
	}
	if len(missing) > 0 {
		return total, fmt.Errorf("ps: no traffic figures from %s", strings.Join(missing, ", "))
	}
	return total, nil
}

// Abandon, on the coordinator's node, stops the coordinator as a crash
// would (Coordinator.Abandon: for a coordinator that a successor takes
// over, as contrib/etcd's RunStandby does when its leadership is lost),
// then closes as Close does, except that it tells no remote node that
// the run is over: the workers and servers see the coordinator's node go
// silent and its connections close, as at a crash, and wait for a
// successor at the same address (CoordinatorConfig.Wait). Elsewhere it
// is Close. Wait returns the coordinator's error (wrapping ErrSuperseded)
// and tells nobody either once the coordinator was abandoned or its
// store refused a save with ErrSuperseded; Close then tells nobody.
func (c *Cluster) Abandon() error {
	if c.coord != nil {
		c.coord.Abandon()
	}
	return c.Close()
}

// Close stops the local workers, the coordinator and the servers, then
// closes every transport the cluster opened. It is idempotent (later
// calls return the first call's result) and returns within CloseTimeout
// even when peers are dead (ErrCloseTimeout otherwise). A node that was
// told the run is over first waits, at most a second, until the
// coordinator stops answering, so that its acknowledgement is not cut off.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		done := make(chan error, 1)
		go func() { done <- c.close() }()
		timer := time.NewTimer(c.cfg.CloseTimeout)
		defer timer.Stop()
		select {
		case c.closeErr = <-done:
		case <-timer.C:
			c.closeErr = fmt.Errorf("%w after %v", ErrCloseTimeout, c.cfg.CloseTimeout)
		}
	})
	return c.closeErr
}

func (c *Cluster) close() error {
	c.watchCancel(ErrClosed)
	c.watchWG.Wait()
	c.mu.Lock()
	told := c.told
	c.mu.Unlock()
	if c.coord != nil && !told && !c.coord.gone.Load() {
		_ = c.tellRemote(ctlAbort, "the coordinator's node closed", time.Second) // so they stop now, not after PeerTimeout
	}
	if c.coord == nil && len(c.order) > 0 && slices.Contains(c.remote(), CoordinatorNode) {
		select {
		case <-c.ctls[c.order[0]].shutdown:
			c.linger()
		default:
		}
	}
	c.mu.Lock()
	ws := slices.Collect(maps.Values(c.wrks))
	ws = append(ws, c.retired...)
	c.mu.Unlock()
	for _, w := range ws {
		w.Close()
	}
	if c.coord != nil {
		c.coord.Close()
	}
	var errs []error
	for _, n := range slices.Backward(c.order) {
		if c.net != nil {
			break
		}
		if tr := c.trs[n]; tr != nil {
			if err := tr.Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
				errs = append(errs, fmt.Errorf("%s: %w", n, err))
			}
		}
	}
	if c.net != nil {
		if err := c.net.Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for i, s := range c.srvs { // their logs, and a checkpoint running in the background
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ServerNode(i), err))
		}
	}
	return errors.Join(errs...)
}

// linger waits, at most a second or half of CloseTimeout, until the
// coordinator stops answering: it closes its transport once every node
// has acknowledged the shutdown, and closing this node's transport
// before that could cut the acknowledgement off.
func (c *Cluster) linger() {
	ctx, cancel := context.WithTimeout(context.Background(), min(time.Second, c.cfg.CloseTimeout/2))
	defer cancel()
	tr := c.trs[c.order[0]]
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := tr.Request(pctx, CoordinatorNode, ctlMsg(ctlPing))
		pcancel()
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
