package ps_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/layout"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"go.uber.org/goleak"
)

// A 2-server, 3-worker cluster over loopback TCP with a shared secret and
// lz4, training a linear regression under BSP.
func Example_cluster() {
	ctx := context.Background()
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{
		Servers: 2, Workers: 3, TCP: true,
		Secret:      []byte("a long random shared secret"),
		Compression: transport.Always(transport.CodecLZ4),
		Policy:      epsp.NewBSP(),
		EPSP:        epsp.Config{Batch: 8},
		Store:       store.Config{Optimizer: store.SGD{LR: 0.5}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	m := linReg{n: 96}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: 200}
	if _, err := c.Train(ctx, m, ps.ShardSampler{N: m.n, Workers: 3}, tc); err != nil {
		fmt.Println(err)
		return
	}
	p := make([]float32, 2)
	c.Client().Pull(ctx, tc.Keys, p, tc.Lens)
	fmt.Printf("w=%.2f b=%.2f\n", p[0], p[1])
	// Output: w=3.00 b=-1.00
}

// TestCluster_TCPNoLeak runs the Example's cluster and checks that Close
// leaves no goroutine behind, that Close is idempotent, and that the
// traffic went through lz4 with the secret.
func TestCluster_TCPNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{
		Servers: 2, Workers: 3, TCP: true, Secret: []byte("s3cret, 16 bytes or more"),
		Compression: transport.Always(transport.CodecLZ4),
		EPSP:        epsp.Config{Batch: 8}, Store: store.Config{Optimizer: store.SGD{LR: 0.5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := linReg{n: 96}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: 20}
	stats, err := c.Train(ctx, m, ps.ShardSampler{N: m.n, Workers: 3}, tc)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || len(stats[2].Loss) != 20 {
		t.Fatalf("stats %+v", stats)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("Wait after Train: %v", err)
	}
	ts, err := c.TrafficStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ts.RawBytesSent == 0 || ts.WireBytesSent == ts.RawBytesSent {
		t.Errorf("traffic %+v: want lz4 framing to change the wire size", ts)
	}
	for i := range 3 {
		if got := c.Worker(i).ID(); got != epsp.WorkerID(i) {
			t.Errorf("worker %d has id %d", i, got)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCluster_WrongSecret: a process whose secret differs cannot join;
// its start fails at once, naming the refusal.
func TestCluster_WrongSecret(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	a, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 1, TCP: true, Secret: []byte("the right secret"),
		Local: []transport.NodeID{"server-0"}, Peers: map[transport.NodeID]string{"coordinator": "127.0.0.1:1", "worker-0": "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	start := time.Now()
	_, err = ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 1, TCP: true, Secret: []byte("the wrong secret"),
		Local: []transport.NodeID{"coordinator", "worker-0"}, Peers: map[transport.NodeID]string{"server-0": a.Addr("server-0")}})
	if !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusal took %v", d)
	}
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// TestCluster_OneNodePerProcess runs a cluster as five Cluster values of
// one node each, as five processes with a static address book would:
// every node binds its book address, the workers train, and every node's
// Wait ends cleanly when the coordinator ends the run.
func TestCluster_OneNodePerProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes := []transport.NodeID{"server-0", "server-1", "coordinator", "worker-0", "worker-1"}
	book := map[transport.NodeID]string{}
	for _, n := range nodes {
		book[n] = deadAddr(t) // a free port, bound by the node below
	}
	type res struct {
		i   int
		c   *ps.Cluster
		err error
	}
	ch := make(chan res, len(nodes))
	for i, n := range nodes {
		go func() {
			c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: 2, TCP: true, Secret: []byte("k, 16 bytes long"),
				Local: []transport.NodeID{n}, Listen: book[n], Peers: book, EPSP: epsp.Config{Batch: 8},
				Store: store.Config{Optimizer: store.SGD{LR: 0.5}}, CloseTimeout: 3 * time.Second})
			ch <- res{i, c, err}
		}()
	}
	cs := make([]*ps.Cluster, len(nodes))
	var errs []error
	for range nodes {
		r := <-ch
		cs[r.i] = r.c
		errs = append(errs, r.err)
	}
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	m := linReg{n: 64}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: 10}
	done := make(chan error, len(nodes))
	for i, c := range cs {
		go func() {
			var err error
			if i >= 3 {
				_, err = c.Train(ctx, m, ps.ShardSampler{N: 64, Workers: 2}, tc)
			}
			if err == nil {
				err = c.Wait(ctx)
			}
			done <- err
		}()
	}
	for range nodes {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// The coordinator first: the others wait for it to stop answering
	// before they close (so their last acknowledgement gets out).
	for _, i := range []int{2, 0, 1, 3, 4} {
		if err := cs[i].Close(); err != nil {
			t.Errorf("%s: %v", nodes[i], err)
		}
	}
}

// TestCluster_CloseBoundedDeadPeer: a worker whose coordinator and
// servers vanish mid-run closes within CloseTimeout.
func TestCluster_CloseBoundedDeadPeer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 1, TCP: true,
		Local: []transport.NodeID{"coordinator", "server-0"}, Peers: map[transport.NodeID]string{"worker-0": deadAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 1, TCP: true, CloseTimeout: 2 * time.Second, PeerTimeout: time.Second,
		Local: []transport.NodeID{"worker-0"}, Peers: map[transport.NodeID]string{"coordinator": a.Addr("coordinator"), "server-0": a.Addr("server-0")}})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	trained := make(chan error, 1)
	go func() {
		_, err := b.Train(ctx, slowModel{d: 5 * time.Millisecond}, ps.ShardSampler{N: 64, Workers: 1},
			ps.TrainConfig{Keys: []uint64{0}, Lens: []int{2}, Init: store.Zeros{}, Clocks: 1 << 10})
		trained <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-trained; err == nil {
		t.Fatal("Train survived its coordinator")
	}
	start := time.Now()
	err = b.Close()
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("Close took %v with a dead peer", d)
	}
	if err != nil {
		t.Fatal(err)
	}
}

type slowModel struct{ d time.Duration }

func (m slowModel) Gradient(p []float32, samples []int, grad []float32) float64 {
	time.Sleep(m.d)
	return 0
}

// TestParseNode: ids come from names, and a name outside the cluster is
// refused.
func TestParseNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		role ps.Role
		rank int
		bad  bool
	}{
		{name: "coordinator", role: ps.RoleCoordinator},
		{name: "server-1", role: ps.RoleServer, rank: 1},
		{name: "worker-2", role: ps.RoleWorker, rank: 2},
		{name: "worker-3", bad: true},
		{name: "worker-01", bad: true},
		{name: "server-", bad: true},
		{name: "boss", bad: true},
	} {
		r, k, err := ps.ParseNode(transport.NodeID(tc.name), 2, 3)
		if tc.bad {
			if !errors.Is(err, ps.ErrBadNodeName) {
				t.Errorf("%s: err = %v", tc.name, err)
			}
			continue
		}
		if err != nil || r != tc.role || k != tc.rank {
			t.Errorf("%s: %v %d %v", tc.name, r, k, err)
		}
		if ps.NodeName(r, k) != transport.NodeID(tc.name) {
			t.Errorf("NodeName(%v, %d) = %s", r, k, ps.NodeName(r, k))
		}
	}
}

// TestWorker_IDMismatchFailsAtStart: a worker whose WorkerConfig.ID is
// not its position in the coordinator's list fails at Start, not at its
// first push.
func TestWorker_IDMismatchFailsAtStart(t *testing.T) {
	ctx := context.Background()
	netw := transport.NewInmemNetwork()
	defer netw.Close()
	srv, _ := ps.NewServer("server-0", ps.DefaultServerConfig())
	netw.Join("server-0", srv)
	co, err := ps.NewCoordinator(ps.CoordinatorConfig{EPSP: epsp.Config{NumWorkers: 2, Batch: 4},
		Servers: []transport.NodeID{"server-0"}, Workers: []transport.NodeID{"a", "b"}}, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	ctr, _ := netw.Join("coordinator", co)
	if err := co.Start(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	w, _ := ps.NewWorker("b", ps.WorkerConfig{ID: 0, Coordinator: "coordinator", Client: ps.ClientConfig{Servers: []transport.NodeID{"server-0"}}})
	defer w.Close()
	wtr, _ := netw.Join("b", w)
	err = w.Start(ctx, wtr)
	if !errors.Is(err, ps.ErrRejected) {
		t.Fatalf("Start with ID 0 on node b (worker 1): err = %v, want ErrRejected", err)
	}
}

// TestCluster_KeysSpread: the default placement puts keys 0..10 on both
// servers (the old default, KeyRange over all of uint64, put all eleven
// on server-0), and IdleServers names a server that holds none.
func TestCluster_KeysSpread(t *testing.T) {
	cfg := ps.ClientConfig{Servers: []transport.NodeID{"server-0", "server-1"}}
	keys := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if idle := ps.IdleServers(cfg, keys, nil); len(idle) != 0 {
		t.Errorf("default placement leaves %v idle", idle)
	}
	cfg.Partitioner = layout.KeyRange{Servers: 2}
	if idle := ps.IdleServers(cfg, keys, nil); len(idle) != 1 || idle[0] != "server-1" {
		t.Errorf("KeyRange over uint64: idle %v, want [server-1]", idle)
	}
	c, err := ps.NewCluster(context.Background(), ps.ClusterConfig{Servers: 2, Workers: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := c.Client()
	ctx := context.Background()
	if err := cl.Init(ctx, keys, make([]float32, len(keys)), nil); err != nil {
		t.Fatal(err)
	}
	for s := range 2 {
		n := 0
		c.Server(s).View(func(st *store.Store) { n = st.NumKeys() })
		if n < 5 {
			t.Errorf("server-%d holds %d of 11 keys", s, n)
		}
	}
}

// TestCluster_ElasticEPSPGetsTopology: epsp.DefaultEPSPConfig turns
// elastic parallelism on, which without a Topology never changes anything;
// an in-process cluster knows its topology and supplies it.
func TestCluster_ElasticEPSPGetsTopology(t *testing.T) {
	pol, err := epsp.NewEPSP(epsp.DefaultEPSPConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ps.NewCluster(context.Background(), ps.ClusterConfig{Servers: 1, Workers: 3, Policy: pol, EPSP: epsp.Config{Batch: 8, TickPeriod: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e, ok := c.Policy().(*epsp.EPSP)
	if !ok {
		t.Fatalf("policy %T", c.Policy())
	}
	top := e.Config().Topology
	if top == nil || top.NumHosts() != 1 || top.Host(2) != 0 || top.Cores(0) < 1 {
		t.Fatalf("topology %+v", top)
	}
	if e.Name() != pol.Name() {
		t.Errorf("name %s, want %s", e.Name(), pol.Name())
	}
	// Given explicitly, the user's own policy is kept.
	cfg := epsp.DefaultEPSPConfig()
	cfg.Parallelism.PMax = 4
	own, _ := epsp.NewEPSP(cfg)
	c2, err := ps.NewCluster(context.Background(), ps.ClusterConfig{Servers: 1, Workers: 2, Policy: own})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Policy() != epsp.Policy(own) {
		t.Error("a configured EPSP was replaced")
	}
}

// TestCluster_BadConfigs: a config NewCluster cannot run is refused
// before anything starts, and a coordinator that cannot bind closes
// cleanly.
func TestCluster_BadConfigs(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []ps.ClusterConfig{
		{Servers: 0, Workers: 1},
		{Servers: 1, Workers: 1, Local: []transport.NodeID{"worker-0"}},                       // in-process, part of it
		{Servers: 1, Workers: 1, TCP: true, Local: []transport.NodeID{"worker-0"}},            // no peers
		{Servers: 1, Workers: 1, TCP: true, Local: []transport.NodeID{"worker-7"}},            // no such node
		{Servers: 1, Workers: 0, TCP: true, Local: []transport.NodeID{"coordinator"}},         // no coordinator without workers
		{Servers: 2, Workers: 1, TCP: true, Listen: "127.0.0.1:7777"},                         // four nodes on one port
		{Servers: 1, Workers: 1, TCP: true, Listen: "256.0.0.1:0", CloseTimeout: time.Second}, // cannot bind
	} {
		c, err := ps.NewCluster(ctx, cfg)
		if err == nil {
			c.Close()
			t.Errorf("%+v: started", cfg)
		}
	}
}

func TestPeersFromTemplate(t *testing.T) {
	p, err := ps.PeersFromTemplate("falcon-{role}-0-{rank}.falcon:7000", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[transport.NodeID]string{"coordinator": "falcon-coordinator-0-0.falcon:7000",
		"server-0": "falcon-server-0-0.falcon:7000", "server-1": "falcon-server-0-1.falcon:7000",
		"worker-0": "falcon-worker-0-0.falcon:7000", "worker-1": "falcon-worker-0-1.falcon:7000"}
	if len(p) != len(want) {
		t.Fatalf("%v", p)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	if p, err := ps.PeersFromTemplate("h-{role}-{rank}:1", 1, 0); err != nil || len(p) != 1 || p["server-0"] != "h-server-0:1" {
		t.Errorf("servers only: %v %v", p, err)
	}
	for _, bad := range []string{"static:7000", "{role}-{rank}", "{role}-{rank}:x:y"} {
		if _, err := ps.PeersFromTemplate(bad, 1, 1); !errors.Is(err, ps.ErrBadPeers) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := ps.ParsePeers("a=h:1,a=h:2"); !errors.Is(err, ps.ErrBadPeers) {
		t.Errorf("duplicate: %v", err)
	}
	if m, err := ps.ParsePeers(" a=h:1 , b=[::1]:2,"); err != nil || m["b"] != "[::1]:2" || m["a"] != "h:1" {
		t.Errorf("%v %v", m, err)
	}
}

// TestCluster_AbandonSuccessorFinishes: over TCP, a coordinator's node
// (a Cluster of that node alone, with a CoordinatorStore) abandoned
// mid-run tells the other nodes nothing: a successor started from the
// same store at the same address finishes the run, and every node's
// Wait ends cleanly; the abandoned coordinator reports ErrSuperseded.
func TestCluster_AbandonSuccessorFinishes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	book := map[transport.NodeID]string{}
	for _, n := range []transport.NodeID{"coordinator", "server-0", "worker-0"} {
		book[n] = deadAddr(t)
	}
	st := ps.DirCoordinatorStore(t.TempDir())
	cfg := ps.ClusterConfig{Servers: 1, Workers: 1, TCP: true, Secret: []byte("k, 16 bytes long"), Peers: book,
		EPSP: epsp.Config{Batch: 8}, Store: store.Config{Optimizer: store.SGD{LR: 0.5}}, CloseTimeout: 3 * time.Second,
		CoordinatorStore: st, CoordinatorWait: 30 * time.Second}
	node := func(n transport.NodeID) ps.ClusterConfig {
		c := cfg
		c.Local, c.Listen = []transport.NodeID{n}, book[n]
		return c
	}
	type res struct {
		c   *ps.Cluster
		err error
	}
	start := func(n transport.NodeID) <-chan res {
		ch := make(chan res, 1)
		go func() {
			c, err := ps.NewCluster(ctx, node(n))
			ch <- res{c, err}
		}()
		return ch
	}
	chs := []<-chan res{start("coordinator"), start("server-0"), start("worker-0")}
	cs := make([]*ps.Cluster, len(chs))
	var errs []error
	for i, ch := range chs {
		r := <-ch
		cs[i] = r.c
		errs = append(errs, r.err)
	}
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	const clocks = 40
	m := slowModel{d: 2 * time.Millisecond}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: clocks}
	trained := make(chan error, 1)
	go func() {
		_, err := cs[2].Train(ctx, m, ps.ShardSampler{N: 64, Workers: 1}, tc)
		if err == nil {
			err = cs[2].Wait(ctx)
		}
		trained <- err
	}()
	served := make(chan error, 1)
	go func() { served <- cs[1].Wait(ctx) }()
	// mid-run: some clocks done, not all
	for cs[0].Coordinator().Stats().Flushes < 3 {
		select {
		case err := <-trained:
			t.Fatalf("the run ended before the coordinator was abandoned: %v", err)
		case <-ctx.Done():
			t.Fatal("no flush within the test's time")
		case <-time.After(time.Millisecond):
		}
	}
	first := cs[0].Coordinator()
	if err := cs[0].Abandon(); err != nil {
		t.Fatal(err)
	}
	if err := first.Err(); !errors.Is(err, ps.ErrSuperseded) {
		t.Fatalf("abandoned coordinator's Err = %v, want ErrSuperseded", err)
	}
	if first.Stats().Flushes >= clocks {
		t.Fatal("the run was over when the coordinator was abandoned")
	}
	r := <-start("coordinator") // the successor, at the same address
	if r.err != nil {
		t.Fatal(r.err)
	}
	cs[0] = r.c
	if err := cs[0].Wait(ctx); err != nil {
		t.Fatalf("successor's Wait: %v", err)
	}
	if err := <-trained; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	if f := cs[0].Coordinator().Stats().Flushes; f != clocks {
		t.Errorf("successor counts %d flushes, want %d (the whole run)", f, clocks)
	}
}
