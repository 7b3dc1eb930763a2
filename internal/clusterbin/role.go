package clusterbin

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

var errParentGone = errors.New("parent process gone (stdin closed)")

// book checks -role and -rank against the cluster size and returns the
// address book of the other nodes (-peers, or -peers-dns expanded, with
// -hosts applied) and the address to bind. A node that would listen
// beyond loopback with neither a secret nor TLS is refused unless
// -insecure is given: anyone who can reach the port could join the run.
func (o *options) book() (map[transport.NodeID]string, string, error) {
	self := transport.NodeID(o.nodeName())
	if _, _, err := ps.ParseNode(self, o.servers, o.workers); err != nil {
		return nil, "", fmt.Errorf("%w: -role %s -rank %d: %v", errUsage, o.role, o.rank, err)
	}
	if o.peers == "" && o.peersDNS == "" {
		return nil, "", fmt.Errorf("%w: give the peers with -peers or -peers-dns (or both: -peers' entries override the template's)", errUsage)
	}
	peers := map[transport.NodeID]string{}
	if o.peersDNS != "" {
		m, err := expandPeers(o.peersDNS, o.servers, o.workers)
		if err != nil {
			return nil, "", err
		}
		peers = m
	}
	if o.peers != "" {
		// with -peers-dns: single entries at other addresses, such as the
		// coordinator at a Service in front of a leader and its standbys
		m, err := parsePeers(o.peers)
		if err != nil {
			return nil, "", err
		}
		maps.Copy(peers, m)
	}
	if err := applyHosts(peers, o.hosts); err != nil {
		return nil, "", err
	}
	advertise := o.advertise
	if advertise == "" {
		advertise = peers[self]
	}
	listen := o.listen
	if listen == "" {
		if advertise == "" {
			return nil, "", fmt.Errorf("%w: %s has no address: give -listen, -advertise, or its entry in the peers", errUsage, self)
		}
		_, port, err := net.SplitHostPort(advertise)
		if err != nil {
			return nil, "", fmt.Errorf("%w: address %q of %s: %v", errUsage, advertise, self, err)
		}
		listen = ":" + port
	}
	for _, n := range nodeNames(o.servers, o.workers) {
		if n != self && peers[n] == "" {
			return nil, "", fmt.Errorf("%w: no address for %s in the peers", errUsage, n)
		}
	}
	if !isLoopback(listen) && o.secret == "" && o.tlsCert == "" && o.nodeCert == "" && !o.insecure {
		return nil, "", fmt.Errorf("%w: refusing to listen on %s (beyond loopback) with neither a secret (-secret, $FALCON_SECRET) nor TLS: anyone who reaches the port could join; give one, or -insecure", errUsage, listen)
	}
	delete(peers, self)
	return peers, listen, nil
}

// serverRestartWait is how long a durable server (-state-dir) may take
// to restart: ps.DefaultCoordinatorWait, the time a supervisor has.
const serverRestartWait = ps.DefaultCoordinatorWait

// clusterConfig is this node's ps.ClusterConfig.
func (o *options) clusterConfig(peers map[transport.NodeID]string, listen string) (ps.ClusterConfig, error) {
	comp, err := o.compression()
	if err != nil {
		return ps.ClusterConfig{}, err
	}
	cfg := ps.ClusterConfig{
		Servers: o.servers, Workers: o.workers, TCP: true,
		Local: []transport.NodeID{transport.NodeID(o.nodeName())}, Listen: listen, Peers: peers,
		Secret: []byte(o.secret), Compression: comp,
		EPSP:         epsp.Config{Batch: o.batch, Parallelism: o.par, TickPeriod: o.tick},
		Store:        store.Config{Optimizer: store.SGD{LR: float32(o.lr)}, Deterministic: o.det},
		StartTimeout: o.startWait,
		Heartbeat:    min(500*time.Millisecond, o.lease/8),
	}
	cfg.Lease.Timeout = o.lease
	if cfg.Lease.OnWorkerLost, err = o.lostAction(); err != nil {
		return cfg, err
	}
	if o.secret == "" {
		cfg.Secret = nil
	}
	if o.stateDir != "" {
		cfg.Durable = ps.DurableConfig{Dir: o.stateDir, RunID: o.runID, Log: true, CheckpointEvery: o.ckptEvery}
		// a server that restarts from its directory is waited for (the
		// workers resend, the coordinator's lease and flushes wait) as
		// long as a restarting coordinator
		cfg.Retry, cfg.Lease.ServerRestart = serverRestartWait, serverRestartWait
	}
	if o.coordDir != "" && o.role == "coordinator" {
		// one directory per run: a new -run-id starts a new run
		cfg.CoordinatorStore = ps.DirCoordinatorStore(filepath.Join(o.coordDir, o.runID))
	}
	cfg.CoordinatorWait = o.coordWait
	if o.tlsCert != "" {
		if cfg.TLS, err = loadTLS(o.tlsCert, o.tlsKey, o.tlsCA); err != nil {
			return cfg, err
		}
	}
	if o.nodeCert != "" { // per-node identity: roles enforced
		cfg.NodeTLS = func(n transport.NodeID) (*tls.Config, error) {
			return transport.LoadIdentityTLS(n, o.identityFiles(string(n)))
		}
	}
	return cfg, nil
}

// runRole runs one node until the coordinator ends the run, the node
// fails, -timeout passes, or (for a child of the local mode) the parent
// goes away.
func runRole(o *options, out io.Writer) error {
	peers, listen, err := o.book()
	if err != nil {
		return err
	}
	cfg, err := o.clusterConfig(peers, listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("run exceeded -timeout %v", o.timeout))
	defer stop()
	if o.child {
		go func() { // the parent closes our stdin (or dies): stop
			_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
			cancel(errParentGone)
		}()
	}
	if o.metrics != "" {
		ms, err := startMetrics(o.metrics, out)
		if err != nil {
			return err
		}
		defer ms.close()
		defer ms.linger(ctx, o.linger) // after the role's end, before close
		cfg.Metrics = ms.rec
	}
	var tl *ps.Timeline
	if o.timeline != "" {
		tl = &ps.Timeline{}
		cfg.Observer = tl
	}
	switch o.role {
	case "coordinator":
		if o.ext != nil && o.ext.Coordinator != nil {
			err = o.ext.Coordinator(ctx, o.settings(out), func(lctx context.Context, st ps.CoordinatorStore) error {
				cfg := cfg
				if st != nil {
					cfg.CoordinatorStore = st
				}
				// lctx done while ctx is not: the extension took the role
				// away (leadership lost)
				return runCoordinator(lctx, o, cfg, out, func() bool { return lctx.Err() != nil && ctx.Err() == nil })
			})
		} else {
			err = runCoordinator(ctx, o, cfg, out, func() bool { return false })
		}
	case "server":
		err = runServer(ctx, o, cfg, out)
	default:
		err = runWorker(ctx, o, cfg, out)
	}
	if tl != nil {
		if werr := writeTimeline(o.timeline, tl); werr != nil && err == nil {
			err = werr
		}
	}
	// When the node was stopped (parent gone, timeout), say so first: the
	// role's own error is then only a consequence.
	if c := context.Cause(ctx); err != nil && c != nil && !errors.Is(err, c) {
		return fmt.Errorf("%w (while: %v)", c, err)
	}
	return err
}

func writeTimeline(path string, tl *ps.Timeline) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tl.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runServer(ctx context.Context, o *options, cfg ps.ClusterConfig, out io.Writer) error {
	self := transport.NodeID(o.nodeName())
	// the samples this server applied or buffered per clock, its own count
	// of the run (a push counted twice or lost shows in it)
	var mu sync.Mutex
	perClock := map[int]int{}
	prev := cfg.Observer
	cfg.Observer = event.Func(func(e event.Event) {
		if e.Kind == event.Applied && e.Node == string(self) {
			mu.Lock()
			perClock[e.Clock] += e.Samples
			mu.Unlock()
		}
		if prev != nil {
			prev.Observe(e)
		}
	})
	c, err := ps.NewCluster(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "%s: serving on %s\n", self, c.Addr(self))
	if err := c.Wait(ctx); err != nil {
		return err
	}
	keys := 0
	c.Server(o.rank).View(func(st *store.Store) { keys = st.NumKeys() })
	mu.Lock()
	parts := make([]string, 0, len(perClock))
	for _, k := range slices.Sorted(maps.Keys(perClock)) {
		parts = append(parts, fmt.Sprintf("%d:%d", k, perClock[k]))
	}
	mu.Unlock()
	fmt.Fprintf(out, "%s: samples per clock %s\n", self, strings.Join(parts, " "))
	fmt.Fprintf(out, "%s: run over, held %d keys; exiting\n", self, keys)
	return c.Close()
}

func runWorker(ctx context.Context, o *options, cfg ps.ClusterConfig, out io.Writer) error {
	j, err := newJob(o, true, false)
	if err != nil {
		return err
	}
	slow, err := parseSlow(o.slow, o.workers)
	if err != nil {
		return err
	}
	cfg.Partitioner = j.partitioner
	self := transport.NodeID(o.nodeName())
	c, err := ps.NewCluster(ctx, cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(out, "%s: joined; %d training rows, %s, slowdown x%g\n", self, j.train.N, j.m.Name(), slow[o.rank])
	wm := newWorkerModel(j.m, j.train, slow[o.rank], o.sampleTime)
	stats, err := c.Train(ctx, wm, ps.ShardSampler{N: j.train.N, Workers: o.workers},
		ps.TrainConfig{Keys: j.keys, Lens: j.lens, Init: j.init, Clocks: o.clocks})
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	st := stats[0]
	first, last := math.NaN(), math.NaN()
	if len(st.Loss) > 0 {
		first, last = st.Loss[0], st.Loss[len(st.Loss)-1]
	}
	fmt.Fprintf(out, "%s: trained %d clocks: samples=%d given=%d taken=%d loss %.4f -> %.4f\n",
		self, len(st.Loss), st.Samples, st.Given, st.Taken, first, last)
	if err := c.Wait(ctx); err != nil { // keep serving transfers until the run is over
		return err
	}
	return c.Close()
}

// runCoordinator runs the coordinator role until the run ends. deposed
// says whether ctx was canceled because this process may no longer act
// as the coordinator (a standby leads): it then stops as a crash would
// (Cluster.Abandon), telling nobody, so that the successor resumes the
// run.
func runCoordinator(ctx context.Context, o *options, cfg ps.ClusterConfig, out io.Writer, deposed func() bool) (err error) {
	j, err := newJob(o, false, true)
	if err != nil {
		return err
	}
	pol, err := newPolicy(o)
	if err != nil {
		return err
	}
	cfg.Policy, cfg.Partitioner = pol, j.partitioner
	if o.stateEach > 0 {
		cfg.StateEvery = o.stateEach
		cfg.OnState = func(ss []ps.WorkerState) {
			for _, s := range ss {
				fmt.Fprintf(out, "coordinator: state %s\n", s)
			}
		}
	}
	fmt.Fprintf(out, "coordinator: policy=%s, %s, %d keys over %d servers; waiting up to %v for servers\n",
		o.policy, j.m.Name(), len(j.keys), o.servers, o.startWait)
	c, err := ps.NewCluster(ctx, cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		if deposed() {
			c.Abandon()
			fmt.Fprintf(out, "coordinator: no longer the leader; stopped without a word (the successor resumes the run)\n")
			err = fmt.Errorf("deposed: %w (while: %v)", context.Cause(ctx), err)
			return
		}
		c.Close()
	}()
	cl := c.Client()
	// The initial parameters go in before any worker trains (the workers'
	// own Init with the same values then keeps them).
	if err := cl.InitWith(ctx, j.keys, j.lens, j.init); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	params := make([]float32, j.m.NumParams())
	evaluate := func() (loss, acc float64, err error) {
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := cl.Pull(ectx, j.keys, params, j.lens); err != nil {
			return 0, 0, fmt.Errorf("evaluation pull: %w", err)
		}
		loss, acc = j.m.Evaluate(params, j.test, nil)
		return loss, acc, nil
	}
	loss0, acc0, err := evaluate()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "coordinator: listening on %s; servers up, parameters initialised (loss=%.4f acc=%.4f); waiting up to %v for %d workers\n",
		c.Addr(ps.CoordinatorNode), loss0, acc0, o.startWait, o.workers)
	if err := c.Coordinator().WaitWorkers(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	// Wall time runs from the moment every worker has joined.
	start := time.Now()
	fmt.Fprintf(out, "coordinator: all %d workers joined; training %d clocks\n", o.workers, o.clocks)
	trained := make(chan error, 1)
	go func() { trained <- c.WaitTrained(ctx) }()
	every := o.evalEvery
	if every == 0 {
		every = max(1, o.clocks/10)
	}
	next := every
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var terr error
loop:
	for {
		select {
		case terr = <-trained:
			break loop
		case <-tick.C:
			m := o.clocks
			for _, s := range c.WorkerStates() {
				m = min(m, s.Clock)
			}
			if m >= next && m < o.clocks {
				loss, acc, err := evaluate()
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "coordinator: clock %d/%d t=%.2fs loss=%.4f acc=%.4f\n", m, o.clocks, time.Since(start).Seconds(), loss, acc)
				next = (m/every + 1) * every
			}
		}
	}
	wall := time.Since(start)
	if deposed() {
		return terr // the deferred Abandon: no word to anyone
	}
	if terr != nil {
		c.Wait(ctx) // tell the others the run failed
		return fmt.Errorf("run aborted: %w", terr)
	}
	loss, acc, err := evaluate()
	if err != nil {
		return err
	}
	st := c.Coordinator().Stats()
	fmt.Fprintf(out, "coordinator: policy stats: applied=%d accumulated=%d dropped=%d flushes=%d max_lead=%d transfers=%d (samples %d) parallelism_changes=%d batch_changes=%d\n",
		st.Applied, st.Accumulated, st.Dropped, st.Flushes, st.MaxLead, st.TransfersAccepted, st.SamplesTransferred, st.ParallelismChanges, st.BatchChanges)
	total, terr := c.TrafficStats(ctx)
	if terr != nil {
		fmt.Fprintf(out, "coordinator: %v\n", terr)
	}
	werr := c.Wait(ctx) // the run is over: tell everyone
	ratio := 1.0
	if total.RawBytesSent > 0 {
		ratio = float64(total.WireBytesSent) / float64(total.RawBytesSent)
	}
	fmt.Fprintf(out, "coordinator: final loss=%.4f acc=%.4f (from %.4f); wall %.2fs; %d frames, wire %d B / raw %d B = %.3f (-compress %s)\n",
		loss, acc, acc0, wall.Seconds(), total.FramesSent, total.WireBytesSent, total.RawBytesSent, ratio, o.compress)
	fmt.Fprintf(out, "coordinator: final parameters crc32c=%08x (%d values)\n", paramsCRC(params), len(params))
	fmt.Fprintf(out, "cluster policy=%s workers=%d servers=%d clocks=%d final_acc=%.4f wall_s=%.3f wire_bytes=%d raw_bytes=%d\n",
		o.policy, o.workers, o.servers, o.clocks, acc, wall.Seconds(), total.WireBytesSent, total.RawBytesSent)
	if werr != nil {
		return werr
	}
	return c.Close()
}

// paramsCRC is the CRC-32C of the parameters' float32 bits (little
// endian): equal for two runs only if their parameters are bit-identical
// (up to a collision).
func paramsCRC(p []float32) uint32 {
	b := make([]byte, 4*len(p))
	for i, v := range p {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}
