package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/transport"
)

// listenPrefix starts the first stdout line of a -child: its bound address.
const listenPrefix = "cluster-listen "

var (
	errParentGone = errors.New("parent process gone (stdin closed)")
	errPeerGone   = errors.New("peer unreachable")
	errAborted    = errors.New("the coordinator aborted the run (its output says why)")
)

// runRole runs one role until the coordinator ends the run, the role
// fails, -timeout passes, or (for a -child) the parent goes away.
func runRole(o options) error {
	id, idx, err := o.parseID()
	if err != nil {
		return err
	}
	peers, err := parsePeers(o.peers)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("run exceeded -timeout %v", o.timeout))
	defer stop()
	n := &node{o: &o, id: id, peers: peers, cancel: cancel}
	switch o.role {
	case "coordinator":
		err = n.coordinator(ctx)
	case "server":
		err = n.server(ctx)
	default:
		err = n.worker(ctx, idx)
	}
	// When the node was stopped (parent gone, timeout, coordinator gone),
	// say so first: the role's own error is then only a consequence.
	if c := context.Cause(ctx); err != nil && c != nil && !errors.Is(err, c) {
		return fmt.Errorf("%w (while: %v)", c, err)
	}
	return err
}

// node is one process of the cluster.
type node struct {
	o      *options
	id     transport.NodeID
	peers  map[transport.NodeID]string
	cancel context.CancelCauseFunc
	tr     *transport.TCP
}

// open starts this node's TCP transport with handler h. A -child then
// prints its address, reads the address book from stdin and watches stdin
// for EOF (the parent closing it, or dying).
func (n *node) open(ctx context.Context, h *ctlHandler) error {
	cfg, err := n.o.tcpConfig(n.id, n.peers)
	if err != nil {
		return err
	}
	tr, err := transport.NewTCP(cfg, h)
	if err != nil {
		return err
	}
	h.setTransport(tr)
	n.tr = tr
	if !n.o.child {
		return nil
	}
	if err := n.readBook(ctx); err != nil {
		tr.Close()
		return err
	}
	return nil
}

// readBook announces this child's address on stdout and reads the address
// book the parent writes to stdin; stdin's EOF later stops the node.
func (n *node) readBook(ctx context.Context) error {
	fmt.Printf("%s%s\n", listenPrefix, n.tr.Addr())
	in := bufio.NewReader(os.Stdin)
	lines := make(chan string, 1)
	go func() {
		line, err := in.ReadString('\n')
		if err != nil {
			close(lines)
			n.cancel(errParentGone)
			return
		}
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, in)
		n.cancel(errParentGone)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			return errParentGone
		}
		book, err := parsePeers(line)
		if err != nil {
			return fmt.Errorf("address book from the parent: %w", err)
		}
		for name, addr := range book {
			if name != n.id {
				n.tr.AddPeer(name, addr)
			}
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// linger runs after the coordinator's shutdown: the ack of that request
// may still be on its way out, and closing the transport now could cut it
// off. The coordinator closes its own transport once every node has
// acknowledged, so wait (at most 3 s) until it stops answering.
func (n *node) linger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := n.tr.Request(pctx, coordinatorName, ctlMsg(ctlPing))
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

// start runs a role's bounded start (ps's Start) while preflight checks
// the handshake with peers; a refused handshake ends the start at once.
func (n *node) start(ctx context.Context, peers []transport.NodeID, start func(context.Context) error) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if err := n.preflight(sctx, peers); err != nil {
			cancel(err)
		}
	}()
	err := start(sctx)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		err = context.Cause(sctx) // the refused handshake, not ps's view of it
	}
	return err
}

// preflight pings peers (their control handler answers as soon as their
// transport listens) until each answers or the start timeout passes. A
// refused handshake is final, so it fails at once with an error saying so,
// where ps's bounded start would retry it until StartTimeout. Peers that
// are merely not up yet are left to ps's start, which names them.
func (n *node) preflight(ctx context.Context, peers []transport.NodeID) error {
	ctx, cancel := context.WithTimeout(ctx, n.o.startWait)
	defer cancel()
	pending := append([]transport.NodeID(nil), peers...)
	for len(pending) > 0 {
		var still []transport.NodeID
		for _, p := range pending {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, err := n.tr.Request(pctx, p, ctlMsg(ctlPing))
			pcancel()
			var re *transport.RemoteError
			switch {
			case err == nil || errors.As(err, &re):
			case errors.Is(err, transport.ErrUnauthorized):
				return fmt.Errorf("%s refused: %w (does this node have the cluster's -secret / FALCON_SECRET and TLS settings?)", p, err)
			default:
				still = append(still, p)
			}
		}
		pending = still
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// watch pings peers every second; a peer that has answered once and then
// fails five pings in a row ends this node: it crashed or its host is gone.
// Workers and servers watch the coordinator (without it no shutdown will
// ever come); the coordinator watches everyone (ps has no recovery, and a
// worker that dies while the others wait at a barrier would otherwise
// leave them waiting until -timeout).
func (n *node) watch(ctx context.Context, peers ...transport.NodeID) {
	go func() {
		seen := make([]bool, len(peers))
		fails := make([]int, len(peers))
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i, p := range peers {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := n.tr.Request(pctx, p, ctlMsg(ctlPing))
				cancel()
				var re *transport.RemoteError
				switch {
				case err == nil || errors.As(err, &re):
					seen[i], fails[i] = true, 0
				case seen[i] && ctx.Err() == nil:
					if fails[i]++; fails[i] >= 5 {
						n.cancel(fmt.Errorf("%w: %s for 5 s: %v", errPeerGone, p, err))
						return
					}
				}
			}
		}
	}()
}

func (n *node) server(ctx context.Context) error {
	s, err := ps.NewServer(string(n.id), ps.ServerConfig{Store: ps.StoreConfig{Optimizer: ps.SGD{LR: float32(n.o.lr)}}})
	if err != nil {
		return err
	}
	h := newCtlHandler(s)
	if err := n.open(ctx, h); err != nil {
		return err
	}
	defer n.tr.Close()
	fmt.Printf("%s: serving on %s\n", n.id, n.tr.Addr())
	n.watch(ctx, coordinatorName)
	select {
	case <-h.shutdown:
		keys := 0
		s.View(func(st *ps.Store) { keys = st.NumKeys() })
		fmt.Printf("%s: run over, held %d keys; exiting\n", n.id, keys)
		n.linger(ctx)
		return nil
	case <-h.aborted:
		return errAborted
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (n *node) worker(ctx context.Context, idx int) error {
	o := n.o
	j, err := newJob(o, true, false)
	if err != nil {
		return err
	}
	slow, err := parseSlow(o.slow, o.workers)
	if err != nil {
		return err
	}
	w, err := ps.NewWorker(string(n.id), ps.WorkerConfig{
		ID: epsp.WorkerID(idx), Coordinator: coordinatorName, StartTimeout: o.startWait,
		Client: ps.ClientConfig{Servers: serverNames(o.servers), Width: 1, Partitioner: j.partitioner},
	})
	if err != nil {
		return err
	}
	h := newCtlHandler(w)
	if err := n.open(ctx, h); err != nil {
		return err
	}
	defer n.tr.Close()
	defer w.Close()
	if err := n.start(ctx, append(serverNames(o.servers), coordinatorName), func(ctx context.Context) error { return w.Start(ctx, n.tr) }); err != nil {
		if c := context.Cause(ctx); ctx.Err() != nil {
			return c
		}
		return fmt.Errorf("start: %w", err)
	}
	n.watch(ctx, coordinatorName)
	fmt.Printf("%s: joined; %d training rows, %s, slowdown x%g\n", n.id, j.train.N, j.m.Name(), slow[idx])
	// The coordinator may end the run while this worker still waits for a
	// release it will never get (a policy that strands it; see below).
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	go func() {
		select {
		case <-h.shutdown:
		case <-h.aborted:
		case <-tctx.Done():
		}
		tcancel()
	}()
	wm := newWorkerModel(j.m, j.train, slow[idx], o.sampleTime)
	st, err := w.Train(tctx, wm, ps.ShardSampler{N: j.train.N, Workers: o.workers},
		ps.TrainConfig{Keys: j.keys, Lens: j.lens, Init: j.init, Clocks: o.clocks})
	if err != nil {
		select {
		case <-h.shutdown:
			c, _ := w.CurrentClock()
			fmt.Printf("%s: the coordinator ended the run while this worker waited in clock %d of %d\n", n.id, c, o.clocks)
			n.linger(ctx)
			return nil
		case <-h.aborted:
			return fmt.Errorf("%w (train: %v)", errAborted, err)
		default:
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("train: %w", err)
	}
	first, last := math.NaN(), math.NaN()
	if len(st.Loss) > 0 {
		first, last = st.Loss[0], st.Loss[len(st.Loss)-1]
	}
	fmt.Printf("%s: trained %d clocks: samples=%d given=%d taken=%d loss %.4f -> %.4f\n",
		n.id, len(st.Loss), st.Samples, st.Given, st.Taken, first, last)
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = n.tr.Request(dctx, coordinatorName, ctlMsg(ctlDone, uint64(st.Samples), uint64(st.Given), uint64(st.Taken), math.Float64bits(last)))
	dcancel()
	if err != nil {
		select {
		case <-h.shutdown:
			// The coordinator took the report, ended the run and closed
			// its transport before the reply got out: it only closes
			// once every node has acknowledged the shutdown, so the
			// report was counted.
			return nil
		default:
			return fmt.Errorf("reporting done to the coordinator: %w", err)
		}
	}
	// Keep serving (transfers) until the coordinator ends the run.
	select {
	case <-h.shutdown:
		n.linger(ctx)
		return nil
	case <-h.aborted:
		return errAborted
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// tracker follows the workers' clocks from the coordinator's events.
type tracker struct {
	mu       sync.Mutex
	doneClk  []int // last clock each worker finished (its pushes stored)
	relClk   []int // clock each worker was last released into
	accepted int   // accepted transfers
	parSets  int   // parallelism orders
}

func newTracker(workers int) *tracker {
	t := &tracker{doneClk: make([]int, workers), relClk: make([]int, workers)}
	for i := range t.doneClk {
		t.doneClk[i] = -1
	}
	return t
}

func (t *tracker) Observe(e ps.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := int(e.Worker)
	if w < 0 || w >= len(t.relClk) {
		return
	}
	switch e.Kind {
	case ps.EvClockDone:
		t.doneClk[w] = max(t.doneClk[w], e.Clock)
	case ps.EvRelease:
		t.relClk[w] = max(t.relClk[w], e.Clock)
	case ps.EvTransferResult:
		if e.Result.Accepted {
			t.accepted++
		}
	case ps.EvParallelism:
		t.parSets++
	}
}

// minReleased is the clock the slowest worker is in.
func (t *tracker) minReleased() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.relClk[0]
	for _, c := range t.relClk {
		m = min(m, c)
	}
	return m
}

// stuck reports whether some worker has finished and every other one
// waits for a release (finished its clock, not released): then nothing a
// worker does can release anyone, only the policy's control tick.
func (t *tracker) stuck(done []bool) (waiting []int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	any := false
	for w, d := range done {
		if d {
			any = true
			continue
		}
		if t.doneClk[w] < t.relClk[w] {
			return nil, false
		}
		waiting = append(waiting, w)
	}
	return waiting, any && len(waiting) > 0
}

func (t *tracker) counts() (accepted, parSets int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accepted, t.parSets
}

type doneReport struct {
	worker               int
	samples, given, take uint64
	loss                 float64
}

func (n *node) coordinator(ctx context.Context) (err error) {
	o := n.o
	j, err := newJob(o, false, true)
	if err != nil {
		return err
	}
	pol, err := newPolicy(o)
	if err != nil {
		return err
	}
	servers, workers := serverNames(o.servers), workerNames(o.workers)
	tk := newTracker(o.workers)
	co, err := ps.NewCoordinator(ps.CoordinatorConfig{
		EPSP:    epsp.Config{NumWorkers: o.workers, Batch: o.batch, Parallelism: o.par, TickPeriod: o.tick},
		Servers: servers, Workers: workers, StartTimeout: o.startWait,
	}, pol, ps.WithObserver(tk))
	if err != nil {
		return err
	}
	index := make(map[transport.NodeID]int, len(workers))
	for i, w := range workers {
		index[w] = i
	}
	doneCh := make(chan doneReport, o.workers)
	h := newCtlHandler(co)
	h.onDone = func(from transport.NodeID, vals []uint64) error {
		i, ok := index[from]
		if !ok || len(vals) != 4 {
			return fmt.Errorf("cluster: bad done report from %q", from)
		}
		select {
		case doneCh <- doneReport{worker: i, samples: vals[0], given: vals[1], take: vals[2], loss: math.Float64frombits(vals[3])}:
		default: // a repeated report (a retried request)
		}
		return nil
	}
	if err := n.open(ctx, h); err != nil {
		return err
	}
	defer n.tr.Close()
	defer co.Close()
	defer func() {
		if err != nil { // tell everyone still reachable, so none waits for a shutdown
			n.abortAll(append(append([]transport.NodeID(nil), workerNames(o.workers)...), serverNames(o.servers)...))
		}
	}()
	fmt.Printf("coordinator: policy=%s on %s; %s, %d keys over %d servers; waiting up to %v for servers\n",
		o.policy, n.tr.Addr(), j.m.Name(), len(j.keys), o.servers, o.startWait)
	if err := n.start(ctx, servers, func(ctx context.Context) error { return co.Start(ctx, n.tr) }); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	cl, err := ps.NewClient(n.tr, ps.ClientConfig{Servers: servers, Width: 1, Partitioner: j.partitioner})
	if err != nil {
		return err
	}
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
	loss0, acc0, err := evaluate() // the initial parameters
	if err != nil {
		return err
	}
	fmt.Printf("coordinator: servers up, parameters initialised (loss=%.4f acc=%.4f); waiting up to %v for %d workers\n", loss0, acc0, o.startWait, o.workers)
	if err := co.WaitWorkers(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	n.watch(ctx, append(append([]transport.NodeID(nil), workers...), servers...)...)
	// Wall time runs from the moment every worker has joined. (A worker
	// that joined earlier may already have computed part of clock 0.)
	start := time.Now()
	fmt.Printf("coordinator: all %d workers joined; training %d clocks\n", o.workers, o.clocks)

	every := o.evalEvery
	if every == 0 {
		every = max(1, o.clocks/10)
	}
	next := every
	done := make([]bool, o.workers)
	reports := make([]doneReport, o.workers)
	nDone := 0
	var stuckSince time.Time
	var stuckWorkers []int
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for nDone < o.workers && stuckWorkers == nil {
		select {
		case r := <-doneCh:
			if !done[r.worker] {
				done[r.worker], reports[r.worker] = true, r
				nDone++
			}
		case <-tick.C:
			if err := co.Err(); err != nil {
				return fmt.Errorf("run aborted: %w", err)
			}
			if c := tk.minReleased(); c >= next && c < o.clocks {
				loss, acc, err := evaluate()
				if err != nil {
					return err
				}
				fmt.Printf("coordinator: clock %d/%d t=%.2fs loss=%.4f acc=%.4f\n", c, o.clocks, time.Since(start).Seconds(), loss, acc)
				next = (c/every + 1) * every
			}
			// Two seconds (20 control ticks at the default) with every
			// unfinished worker waiting for a release: the policy will not
			// release them. Sync-opt no longer strands workers (they leave
			// after their last clock); this is a safety net for policies
			// that count pushes and ignore epsp.EventLeave.
			if waiting, ok := tk.stuck(done); !ok {
				stuckSince = time.Time{}
			} else if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) > 2*time.Second {
				stuckWorkers = waiting
			}
		case <-ctx.Done():
			return fmt.Errorf("training: %w", context.Cause(ctx))
		}
	}
	wall := time.Since(start)
	if stuckWorkers != nil {
		wall = stuckSince.Sub(start) // the run ended when they began to wait
	}
	if err := co.Err(); err != nil {
		return fmt.Errorf("run aborted: %w", err)
	}
	loss, acc, err := evaluate()
	if err != nil {
		return err
	}
	for w, r := range reports {
		if done[w] {
			fmt.Printf("coordinator: %s done: samples=%d given=%d taken=%d last_loss=%.4f\n", workers[w], r.samples, r.given, r.take, r.loss)
		}
	}
	for _, w := range stuckWorkers {
		fmt.Printf("coordinator: %s left waiting for a release the policy does not give once the others finished (%s counts steps, not clocks)\n", workers[w], o.policy)
	}
	st := co.Stats()
	accepted, parSets := tk.counts()
	fmt.Printf("coordinator: policy stats: applied=%d accumulated=%d dropped=%d flushes=%d max_lead=%d transfers=%d (samples %d) parallelism_orders=%d batch_changes=%d\n",
		st.Applied, st.Accumulated, st.Dropped, st.Flushes, st.MaxLead, accepted, st.SamplesTransferred, parSets, st.BatchChanges)

	// Traffic of every node, then the end of the run for every node.
	others := append(append([]transport.NodeID(nil), workers...), servers...)
	total := n.tr.Stats()
	var missing []string
	for _, p := range others {
		s, err := n.nodeStats(ctx, p)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		total.FramesSent += s.FramesSent
		total.RawBytesSent += s.RawBytesSent
		total.WireBytesSent += s.WireBytesSent
	}
	if len(missing) > 0 {
		fmt.Printf("coordinator: no traffic figures from %s\n", strings.Join(missing, ", "))
	}
	var unreached []string
	for _, p := range others {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := n.tr.Request(sctx, p, ctlMsg(ctlShutdown)); err != nil {
			unreached = append(unreached, fmt.Sprintf("%s (%v)", p, err))
		}
		cancel()
	}
	ratio := 1.0
	if total.RawBytesSent > 0 {
		ratio = float64(total.WireBytesSent) / float64(total.RawBytesSent)
	}
	fmt.Printf("coordinator: final loss=%.4f acc=%.4f (from %.4f); wall %.2fs; %d frames, wire %d B / raw %d B = %.3f (-compress %s)\n",
		loss, acc, acc0, wall.Seconds(), total.FramesSent, total.WireBytesSent, total.RawBytesSent, ratio, o.compress)
	fmt.Printf("cluster policy=%s workers=%d servers=%d clocks=%d final_acc=%.4f wall_s=%.3f wire_bytes=%d raw_bytes=%d\n",
		o.policy, o.workers, o.servers, o.clocks, acc, wall.Seconds(), total.WireBytesSent, total.RawBytesSent)
	if len(unreached) > 0 {
		return fmt.Errorf("could not tell %s that the run is over", strings.Join(unreached, ", "))
	}
	return nil
}

// abortAll tells peers the run failed, best effort and at most a second
// per peer, all at once.
func (n *node) abortAll(peers []transport.NodeID) {
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, _ = n.tr.Request(ctx, p, ctlMsg(ctlAbort))
		}()
	}
	wg.Wait()
}

// nodeStats asks node p for its transport's traffic counters.
func (n *node) nodeStats(ctx context.Context, p transport.NodeID) (transport.Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := n.tr.Request(ctx, p, ctlMsg(ctlStats))
	if err != nil {
		return transport.Stats{}, err
	}
	op, v, ok := parseCtl(resp)
	if !ok || op != ctlStats || len(v) != 6 {
		return transport.Stats{}, errors.New("malformed stats response")
	}
	return transport.Stats{FramesSent: v[0], RawBytesSent: v[1], WireBytesSent: v[2], FramesReceived: v[3], RawBytesReceived: v[4], WireBytesReceived: v[5]}, nil
}
