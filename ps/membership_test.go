package ps_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
)

// holdModel's gradient is the sample count; the first time worker `at`
// computes clock `clock` it calls hook once (the clock's work waits).
type holdModel struct {
	worker, at, clock int
	hook              func()
	once              *sync.Once
}

func (m holdModel) Gradient(_ []float32, samples []int, grad []float32) float64 {
	if m.hook != nil && m.worker == m.at && len(samples) > 0 && samples[0]/1000 == m.clock {
		m.once.Do(m.hook)
	}
	for i := range grad {
		grad[i] += float32(len(samples))
	}
	return 0
}

// ledger records what the servers counted and what the coordinator saw.
type ledger struct {
	mu      sync.Mutex
	flushed map[int]int // clock → samples the servers buffered for it
	flushes map[int]int // clock → flushes the servers applied
	starts  map[epsp.WorkerID][]int
	changes []ps.MembershipChange
	joinAt  map[epsp.WorkerID]int
	log     []event.Event
}

func newLedger() *ledger {
	return &ledger{flushed: map[int]int{}, flushes: map[int]int{}, starts: map[epsp.WorkerID][]int{}, joinAt: map[epsp.WorkerID]int{}}
}

func (l *ledger) Observe(e event.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case event.Applied:
		l.flushed[e.Clock] += e.Samples
		l.log = append(l.log, e)
	case event.PushAdmitted, event.Release, event.ClockDone, event.Leave, event.WorkerLost, event.TransferOrdered, event.TransferDone:
		l.log = append(l.log, e)
	case event.Flushed:
		l.flushes[e.Clock]++
	case event.ClockStart:
		l.starts[e.Worker] = append(l.starts[e.Worker], e.Clock)
	case event.Join:
		l.joinAt[e.Worker] = e.Clock
	}
}

func (l *ledger) hook(c ps.MembershipChange) {
	l.mu.Lock()
	l.changes = append(l.changes, c)
	l.mu.Unlock()
}

// checkFlushed: every clock was flushed once (one server) with the
// samples of the members computing it, each counted once.
func (l *ledger) checkFlushed(t *testing.T, want []int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range want {
		if l.flushed[k] != n || l.flushes[k] != 1 {
			for _, e := range l.log {
				t.Logf("%v %s w%d clock %d samples %d dec %+v", e.Kind, e.Node, e.Worker, e.Clock, e.Samples, e.Decision)
			}
			t.Errorf("clock %d: the server buffered %d samples and flushed %d times, want %d and once", k, l.flushed[k], l.flushes[k], n)
		}
	}
	if len(l.flushed) != len(want) {
		t.Errorf("servers flushed clocks %v, want %d clocks", l.flushed, len(want))
	}
}

// checkApplied: every clock's samples were applied once (ApplyNow
// policies: no flushes).
func (l *ledger) checkApplied(t *testing.T, want []int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range want {
		if l.flushed[k] != n {
			t.Errorf("clock %d: the server applied %d samples, want %d", k, l.flushed[k], n)
		}
	}
	if len(l.flushed) != len(want) || len(l.flushes) != 0 {
		t.Errorf("server applied clocks %v and flushed %v, want %d clocks and no flush", l.flushed, l.flushes, len(want))
	}
}

func (l *ledger) sizes() [][2]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s [][2]int
	for _, c := range l.changes {
		s = append(s, [2]int{c.Old, c.New})
	}
	return s
}

type trained struct {
	st  ps.TrainStats
	err error
}

func train(w *ps.Worker, m ps.Model, tc ps.TrainConfig) chan trained {
	ch := make(chan trained, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		st, err := w.Train(ctx, m, clockSampler{}, tc)
		ch <- trained{st, err}
	}()
	return ch
}

func tcfg(clocks int) ps.TrainConfig {
	return ps.TrainConfig{Keys: []uint64{0}, Lens: []int{4}, Init: store.Zeros{}, Clocks: clocks}
}

func elasticCluster(t *testing.T, l *ledger, workers int, opts ...pstest.Option) *pstest.Cluster {
	opts = append([]pstest.Option{pstest.Servers(1), pstest.Workers(workers), pstest.Batch(4), pstest.Policy(epsp.NewBSP()),
		pstest.Observer(l), pstest.Membership(ps.MembershipConfig{OnChange: l.hook})}, opts...)
	return pstest.NewCluster(t, opts...)
}

// TestElastic_ScaleUp: 2 → 3. A worker that joins while worker 0 computes
// clock 3 is admitted at the join clock J — under BSP exactly 4 (the next
// barrier), under SSP(1) and ASP the clock after the highest one a member
// started — pulls then, runs clocks J..7 only, and every clock's samples
// count once: 2·4 per clock before J, 3·4 from J on (asserted from the
// server's counts). The hook sees 2→3 first.
func TestElastic_ScaleUp(t *testing.T) {
	const clocks = 8
	for _, tc := range []struct {
		policy func() epsp.Policy
		wantJ  int // -1: whatever the race between the members gives
	}{
		{func() epsp.Policy { return epsp.NewBSP() }, 4},
		{func() epsp.Policy { return epsp.NewSSP(1) }, -1},
		{func() epsp.Policy { return epsp.NewASP() }, -1},
	} {
		pol := tc.policy()
		t.Run(pol.Name(), func(t *testing.T) {
			l := newLedger()
			c := elasticCluster(t, l, 2, pstest.Elastic(3, 0, 0), pstest.Policy(pol))
			var joiner chan trained
			var joinErr error
			var jw *ps.Worker
			hook := func() {
				jw, joinErr = c.PS.AddWorker(context.Background(), 2)
				if joinErr == nil {
					joiner = train(jw, holdModel{worker: 2}, tcfg(clocks))
				}
			}
			res := []chan trained{
				train(c.Workers[0], holdModel{worker: 0, at: 0, clock: 3, hook: hook, once: new(sync.Once)}, tcfg(clocks)),
				train(c.Workers[1], holdModel{worker: 1}, tcfg(clocks)),
			}
			for i, r := range res {
				if got := <-r; got.err != nil || len(got.st.Loss) != clocks {
					t.Fatalf("worker-%d: %v, %d clocks", i, got.err, len(got.st.Loss))
				}
			}
			if joinErr != nil {
				t.Fatalf("join: %v", joinErr)
			}
			got := <-joiner
			if got.err != nil {
				t.Fatalf("joiner: %v", got.err)
			}
			j := jw.JoinClock()
			if (tc.wantJ >= 0 && j != tc.wantJ) || j < 4 || len(got.st.Loss) != clocks-j || got.st.Samples != 4*(clocks-j) {
				t.Errorf("joiner: joined at %d, ran %d clocks, %d samples; want J=%d (>= 4), %d clocks, %d samples",
					j, len(got.st.Loss), got.st.Samples, tc.wantJ, clocks-j, 4*(clocks-j))
			}
			want := make([]int, clocks)
			var starts []int
			for k := range want {
				want[k] = 8
				if k >= j {
					want[k] = 12
					starts = append(starts, k)
				}
			}
			l.mu.Lock()
			if s := l.starts[2]; !slices.Equal(s, starts) {
				t.Errorf("joiner started clocks %v, want %v", s, starts)
			}
			l.mu.Unlock()
			if _, ok := pol.(*epsp.BSP); ok {
				l.checkFlushed(t, want)
			} else {
				l.checkApplied(t, want)
			}
			if s := l.sizes(); tc.wantJ >= 0 && !slices.Equal(s, [][2]int{{2, 3}, {3, 2}, {2, 1}, {1, 0}}) {
				t.Errorf("membership changes %v, want 2→3 then three leaves", s)
			}
			l.mu.Lock()
			i := slices.IndexFunc(l.changes, func(ch ps.MembershipChange) bool { return ch.Kind == ps.Joined })
			if i < 0 || l.changes[i].Node != "worker-2" || l.changes[i].Clock != j || l.changes[i].New != l.changes[i].Old+1 || len(l.changes) != 4 {
				t.Errorf("changes %+v, want worker-2 joined at %d (one more member) among 4", l.changes, j)
			}
			l.mu.Unlock()
			if err := c.Coordinator.Err(); err != nil {
				t.Fatal(err)
			}
			if st := c.Coordinator.Stats(); st.Joined != 1 {
				t.Errorf("stats: %d joined", st.Joined)
			}
		})
	}
}

// TestElastic_ScaleDown: 3 → 2. A worker that quits after clock 2 is not
// waited for by the later barriers; the samples flushed are 3·4 per clock
// before and 2·4 after.
func TestElastic_ScaleDown(t *testing.T) {
	l := newLedger()
	c := elasticCluster(t, l, 3)
	quit := tcfg(3)
	quit.Quit = true
	res := []chan trained{train(c.Workers[0], holdModel{}, tcfg(6)), train(c.Workers[1], holdModel{}, tcfg(6)), train(c.Workers[2], holdModel{}, quit)}
	for i, r := range res {
		if got := <-r; got.err != nil {
			t.Fatalf("worker-%d: %v", i, got.err)
		}
	}
	l.checkFlushed(t, []int{12, 12, 12, 8, 8, 8})
	if s := l.sizes(); len(s) == 0 || s[0] != [2]int{3, 2} || l.changes[0].Kind != ps.Quit {
		t.Errorf("changes %+v, want worker-2 quit 3→2 first", l.changes)
	}
}

// TestElastic_PauseBelowMinimumAndResume: MinWorkers 3. Worker 2 is lost
// in clock 2 (ContinueWithout: its samples are handed over); the run
// pauses — clock 2 is flushed, nobody starts clock 3 — until worker-3
// joins; then it resumes with 0, 1 and 3, and every sample counts once.
// Without a join, the pause ends the run after PauseTimeout with
// ErrBelowMinimum.
func TestElastic_PauseBelowMinimumAndResume(t *testing.T) {
	for _, resume := range []bool{true, false} {
		name := "resume"
		if !resume {
			name = "timeout"
		}
		t.Run(name, func(t *testing.T) {
			const clocks = 6
			l := newLedger()
			const pause = 400 * time.Millisecond
			c := elasticCluster(t, l, 3, pstest.Elastic(4, 3, 0),
				pstest.Membership(ps.MembershipConfig{OnChange: l.hook, PauseTimeout: pause}),
				pstest.Lease(elasticLease),
				pstest.Heartbeat(testHeartbeat, 5*time.Second))
			release, free := releaser(t)
			res := trainAll(c, func(w int) ps.Model {
				return &hangModel{victim: 2, hangAt: 2, onHang: func() { c.Net.Kill("worker-2") }, release: release, worker: w}
			}, clocks)
			deadline := time.Now().Add(10 * time.Second)
			for !c.Coordinator.Paused() {
				if time.Now().After(deadline) || (c.Coordinator.Err() != nil && !c.Coordinator.Paused()) {
					l.mu.Lock()
					for _, e := range l.log {
						t.Logf("%v %s w%d clock %d samples %d", e.Kind, e.Node, e.Worker, e.Clock, e.Samples)
					}
					t.Logf("changes %+v", l.changes)
					l.mu.Unlock()
					t.Fatalf("the run never paused: coordinator %v, stats %+v", c.Coordinator.Err(), c.Coordinator.Stats())
				}
				time.Sleep(5 * time.Millisecond)
			}
			pausedAt := time.Now()
			if !resume {
				for _, w := range []int{0, 1} {
					r := <-res[w]
					if !errors.Is(r.err, ps.ErrAborted) || !strings.Contains(r.err.Error(), "too few workers") {
						t.Errorf("worker-%d: %v, want ErrAborted: too few workers", w, r.err)
					}
					if d := r.at.Sub(pausedAt); d > pause+testSlack {
						t.Errorf("worker-%d ended %v after the pause began, bound %v", w, d, pause+testSlack)
					}
				}
				if err := c.Coordinator.Err(); !errors.Is(err, ps.ErrBelowMinimum) || !strings.Contains(err.Error(), "worker-2") {
					t.Errorf("coordinator: %v, want ErrBelowMinimum naming the departed worker-2", err)
				}
				free()
				return
			}
			time.Sleep(pause / 4)
			l.mu.Lock()
			for _, w := range []epsp.WorkerID{0, 1} {
				if s := l.starts[w]; slices.Max(s) != 2 {
					t.Errorf("worker-%d started clocks %v during the pause, want none past 2", w, s)
				}
			}
			l.mu.Unlock()
			jw, err := c.PS.AddWorker(context.Background(), 3)
			if err != nil {
				t.Fatalf("join: %v", err)
			}
			joiner := train(jw, holdModel{}, tcfg(clocks))
			for _, w := range []int{0, 1} {
				if r := <-res[w]; r.err != nil {
					t.Fatalf("worker-%d: %v", w, r.err)
				}
			}
			if r := <-joiner; r.err != nil || jw.JoinClock() != 3 || len(r.st.Loss) != clocks-3 {
				t.Fatalf("joiner: %v, joined at %d, %d clocks", r.err, jw.JoinClock(), len(r.st.Loss))
			}
			free()
			<-res[2]
			l.checkFlushed(t, []int{12, 12, 12, 12, 12, 12})
			l.mu.Lock()
			if len(l.changes) < 2 || l.changes[0].Kind != ps.Lost || !l.changes[0].Paused || l.changes[1].Kind != ps.Joined || l.changes[1].Paused {
				t.Errorf("changes %+v, want lost (paused), then joined (resumed)", l.changes)
			}
			l.mu.Unlock()
			if err := c.Coordinator.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestElastic_RejoinCooldown: a worker that quit is refused, as a new
// process under its name, before RejoinAfter with ErrRejoinTooSoon
// saying how long is left, and admitted after it at the next clock.
func TestElastic_RejoinCooldown(t *testing.T) {
	const clocks, cooldown = 6, 300 * time.Millisecond
	l := newLedger()
	c := elasticCluster(t, l, 3, pstest.Elastic(3, 0, cooldown))
	var early, late error
	var jw *ps.Worker
	var joiner chan trained
	hook := func() {
		// worker 0 computes clock 3: worker 2 quit at the start of clock 2
		_, early = c.PS.AddWorker(context.Background(), 2)
		time.Sleep(cooldown + 50*time.Millisecond)
		jw, late = c.PS.AddWorker(context.Background(), 2)
		if late == nil {
			joiner = train(jw, holdModel{}, tcfg(clocks))
		}
	}
	quit := tcfg(2)
	quit.Quit = true
	res := []chan trained{
		train(c.Workers[0], holdModel{worker: 0, at: 0, clock: 3, hook: hook, once: new(sync.Once)}, tcfg(clocks)),
		train(c.Workers[1], holdModel{}, tcfg(clocks)),
		train(c.Workers[2], holdModel{}, quit),
	}
	for i, r := range res {
		if got := <-r; got.err != nil {
			t.Fatalf("worker-%d: %v", i, got.err)
		}
	}
	if !errors.Is(early, ps.ErrRejoinTooSoon) || !strings.Contains(early.Error(), "worker-2") || !strings.Contains(early.Error(), "from now") {
		t.Errorf("rejoin before the cooldown: %v, want ErrRejoinTooSoon naming worker-2 and the time left", early)
	}
	if late != nil {
		t.Fatalf("rejoin after the cooldown: %v", late)
	}
	if r := <-joiner; r.err != nil || jw.JoinClock() != 4 || len(r.st.Loss) != clocks-4 {
		t.Fatalf("rejoined worker: %v, joined at %d, %d clocks", r.err, jw.JoinClock(), len(r.st.Loss))
	}
	l.checkFlushed(t, []int{12, 12, 8, 8, 12, 12})
}

// TestElastic_JoinRefusedByPolicy: a policy that does not accept joins
// refuses a join with ErrJoinRefused, naming the policy.
func TestElastic_JoinRefusedByPolicy(t *testing.T) {
	l := newLedger()
	pol, err := epsp.NewEPSPv2(epsp.DefaultEPSPv2Config())
	if err != nil {
		t.Fatal(err)
	}
	c := elasticCluster(t, l, 2, pstest.Policy(pol))
	quit := tcfg(1)
	quit.Quit = true
	done := []chan trained{train(c.Workers[0], holdModel{}, tcfg(1)), train(c.Workers[1], holdModel{}, quit)}
	for _, r := range done {
		if r := <-r; r.err != nil {
			t.Fatal(r.err)
		}
	}
	_, err = c.PS.AddWorker(context.Background(), 1)
	if !errors.Is(err, ps.ErrJoinRefused) || !strings.Contains(err.Error(), pol.Name()) {
		t.Fatalf("join under EPSP v2: %v, want ErrJoinRefused naming the policy", err)
	}
}

// TestElastic_LostWorkerRejoinsAfterCooldown: worker 2 is lost in clock 2
// under ContinueWithout (its samples handed over); a new process under
// its name is refused with ErrRejoinTooSoon until RejoinAfter has passed
// since it left, then admitted at the next clock; every sample counts once.
func TestElastic_LostWorkerRejoinsAfterCooldown(t *testing.T) {
	const clocks, cooldown = 6, 300 * time.Millisecond
	l := newLedger()
	c := elasticCluster(t, l, 3, pstest.Elastic(3, 0, cooldown),
		pstest.Lease(elasticLease),
		pstest.Heartbeat(testHeartbeat, 5*time.Second))
	release, free := releaser(t)
	var early, late error
	var jw *ps.Worker
	var joiner chan trained
	hook := func() {
		// worker 0 computes clock 3: worker 2 was lost in clock 2 and has left
		_, early = c.PS.AddWorker(context.Background(), 2)
		time.Sleep(cooldown + 50*time.Millisecond)
		jw, late = c.PS.AddWorker(context.Background(), 2)
		if late == nil {
			joiner = train(jw, holdModel{}, tcfg(clocks))
		}
	}
	res := []chan trained{
		train(c.Workers[0], holdModel{worker: 0, at: 0, clock: 3, hook: hook, once: new(sync.Once)}, tcfg(clocks)),
		train(c.Workers[1], holdModel{}, tcfg(clocks)),
		train(c.Workers[2], &hangModel{victim: 2, hangAt: 2, onHang: func() { c.Net.Kill("worker-2") }, release: release, worker: 2}, tcfg(clocks)),
	}
	for i, r := range res[:2] {
		if got := <-r; got.err != nil {
			t.Fatalf("worker-%d: %v", i, got.err)
		}
	}
	if !errors.Is(early, ps.ErrRejoinTooSoon) || !strings.Contains(early.Error(), "worker-2") {
		t.Errorf("rejoin before the cooldown: %v, want ErrRejoinTooSoon naming worker-2", early)
	}
	if late != nil {
		t.Fatalf("rejoin after the cooldown: %v", late)
	}
	if r := <-joiner; r.err != nil || jw.JoinClock() != 4 || len(r.st.Loss) != clocks-4 {
		t.Fatalf("rejoined worker: %v, joined at %d, %d clocks", r.err, jw.JoinClock(), len(r.st.Loss))
	}
	free()
	<-res[2]
	l.checkFlushed(t, []int{12, 12, 12, 8, 12, 12})
	if err := c.Coordinator.Err(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.changes) < 2 || l.changes[0].Kind != ps.Lost || l.changes[1].Kind != ps.Joined || l.changes[1].Node != "worker-2" {
		t.Errorf("changes %+v, want worker-2 lost, then joined", l.changes)
	}
}

// TestElastic_JoinOverTCP: over TCP with a secret, a joiner is a process
// like any worker: worker-2 (a slot of MaxWorkers 3) joins at the next
// barrier and its pushes pass the servers' role checks; worker-3 (no such
// slot) is refused by the coordinator and its pushes by the server, with
// ErrForbidden naming it.
func TestElastic_JoinOverTCP(t *testing.T) {
	const clocks = 8
	const secret = "elastic-secret-16"
	l := newLedger()
	c := elasticCluster(t, l, 2, pstest.Elastic(3, 0, 0), pstest.TCP(secret))
	join := func(i int) (*ps.Worker, *transport.TCP) {
		id := ps.WorkerNode(i)
		w, err := ps.NewWorker(string(id), ps.WorkerConfig{ID: epsp.WorkerID(i), Coordinator: ps.CoordinatorNode, Client: c.ClientCfg,
			StartTimeout: 2 * time.Second}, ps.WithObserver(l))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.NewTCP(transport.TCPConfig{ID: id, Secret: []byte(secret)}, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(); tr.Close() })
		for _, p := range append([]transport.NodeID{ps.CoordinatorNode}, c.ServerIDs...) {
			tr.AddPeer(p, c.PS.Addr(p))
		}
		c.PS.Transport(ps.CoordinatorNode).(*transport.TCP).AddPeer(id, tr.Addr().String())
		return w, tr
	}
	var jw *ps.Worker
	var joinErr, outsider, outsiderPush error
	var joiner chan trained
	hook := func() {
		// worker-2 is a process of its own: a Cluster running only it.
		// Its address is known to the coordinator beforehand, as a
		// Peers template would give it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Error(err)
			return
		}
		addr := ln.Addr().String()
		ln.Close()
		c.PS.Transport(ps.CoordinatorNode).(*transport.TCP).AddPeer("worker-2", addr)
		peers := map[transport.NodeID]string{}
		for _, n := range []transport.NodeID{ps.CoordinatorNode, "server-0", "worker-0", "worker-1"} {
			peers[n] = c.PS.Addr(n)
		}
		jc, err := ps.NewCluster(context.Background(), ps.ClusterConfig{Servers: 1, Workers: 2, EPSP: epsp.Config{Batch: 4, MaxWorkers: 3},
			Local: []transport.NodeID{"worker-2"}, TCP: true, Listen: addr, Peers: peers, Secret: []byte(secret), Observer: l, StartTimeout: 2 * time.Second})
		if joinErr = err; err != nil {
			return
		}
		t.Cleanup(func() { jc.Close() })
		jw = jc.Worker(2)
		joiner = train(jw, holdModel{}, tcfg(clocks))
		w3, tr3 := join(3)
		outsider = w3.Start(context.Background(), tr3)
		cl, err := ps.NewClient(tr3, c.ClientCfg)
		if err != nil {
			t.Error(err)
			return
		}
		outsiderPush = cl.Push(context.Background(), []uint64{0}, []float32{1, 1, 1, 1}, []int{4})
	}
	res := []chan trained{
		train(c.Workers[0], holdModel{worker: 0, at: 0, clock: 3, hook: hook, once: new(sync.Once)}, tcfg(clocks)),
		train(c.Workers[1], holdModel{}, tcfg(clocks)),
	}
	for i, r := range res {
		if got := <-r; got.err != nil {
			t.Fatalf("worker-%d: %v", i, got.err)
		}
	}
	if joinErr != nil {
		t.Fatalf("join over TCP: %v", joinErr)
	}
	if r := <-joiner; r.err != nil || jw.JoinClock() != 4 || len(r.st.Loss) != clocks-4 {
		t.Fatalf("joiner: %v, joined at %d, %d clocks", r.err, jw.JoinClock(), len(r.st.Loss))
	}
	if !errors.Is(outsider, ps.ErrForbidden) || !strings.Contains(outsider.Error(), "worker-3") {
		t.Errorf("worker-3's hello: %v, want ErrForbidden naming it", outsider)
	}
	if !errors.Is(outsiderPush, ps.ErrForbidden) || !strings.Contains(outsiderPush.Error(), "worker-3") {
		t.Errorf("worker-3's push: %v, want ErrForbidden naming it", outsiderPush)
	}
	l.checkFlushed(t, []int{8, 8, 8, 8, 12, 12, 12, 12})
}

// elasticLease loses workers within testLease; the server (never killed
// here) only after 2 s, so a ping a loaded machine delays does not end
// the run.
var elasticLease = ps.LeaseConfig{Timeout: testLease, Interval: testInterval, OnWorkerLost: ps.ContinueWithout, ServerRestart: 2 * time.Second}

// TestElastic_HookRescalesLR: the hook follows the linear scaling rule —
// on worker-2's join (2→3) it sets the coordinator's LR scale to 3/2 — and
// every flush from then on is scaled: with SGD(lr=1) and a mean gradient
// of 1, clocks 0..2 move the parameter by 1 each and clocks 3..7 (flushed
// after the join) by 1.5: -3 - 5·1.5 = -10.5.
func TestElastic_HookRescalesLR(t *testing.T) {
	const clocks = 8
	l := newLedger()
	var coord *ps.Coordinator
	hook := func(ch ps.MembershipChange) {
		l.hook(ch)
		if ch.Kind == ps.Joined {
			if err := coord.SetLRScale(float64(ch.New) / 2); err != nil {
				t.Error(err)
			}
		}
	}
	c := elasticCluster(t, l, 2, pstest.Elastic(3, 0, 0), pstest.Optimizer(store.SGD{LR: 1}), pstest.Membership(ps.MembershipConfig{OnChange: hook}))
	coord = c.Coordinator
	var joiner chan trained
	var joinErr error
	res := []chan trained{
		train(c.Workers[0], holdModel{worker: 0, at: 0, clock: 3, once: new(sync.Once), hook: func() {
			var jw *ps.Worker
			if jw, joinErr = c.PS.AddWorker(context.Background(), 2); joinErr == nil {
				joiner = train(jw, holdModel{}, tcfg(clocks))
			}
		}}, tcfg(clocks)),
		train(c.Workers[1], holdModel{}, tcfg(clocks)),
	}
	for i, r := range res {
		if got := <-r; got.err != nil {
			t.Fatalf("worker-%d: %v", i, got.err)
		}
	}
	if joinErr != nil {
		t.Fatal(joinErr)
	}
	if r := <-joiner; r.err != nil {
		t.Fatal(r.err)
	}
	got := make([]float32, 4)
	if err := c.NewClient(t).Pull(context.Background(), []uint64{0}, got, []int{4}); err != nil {
		t.Fatal(err)
	}
	if want := []float32{-10.5, -10.5, -10.5, -10.5}; !slices.Equal(got, want) {
		t.Errorf("parameters %v, want %v", got, want)
	}
	if s := coord.LRScale(); s != 1.5 {
		t.Errorf("LR scale %v, want 1.5", s)
	}
	if err := coord.SetLRScale(0); err == nil {
		t.Error("SetLRScale(0) accepted")
	}
}
