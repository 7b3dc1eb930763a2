package coflowtr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Test bounds: short so failure tests end quickly, far above the live
// runtime's report interval on a loaded 2-core machine.
const (
	agentTimeout = 800 * time.Millisecond
	flowTimeout  = 3 * time.Second
)

// rig is one job (server-0 on machine m0, worker-i on machine m<i+1>) on
// an in-process network, and the live runtime (a coordinator running
// SEBF, one agent per machine) on another.
type rig struct {
	net, anet *transport.InmemNetwork
	coord     *live.Coordinator
	agents    []*live.Agent
	names     []transport.NodeID
	reg       *Registry
	workers   []transport.Transport // wrapped
	handler   *Handler
	closeOnce sync.Once
}

func agentName(i int) transport.NodeID { return transport.NodeID(fmt.Sprintf("m%d", i)) }

func newRig(t *testing.T, workers int, server transport.Handler, rate float64) *rig {
	t.Helper()
	r := &rig{net: transport.NewInmemNetwork(), anet: transport.NewInmemNetwork()}
	t.Cleanup(r.close)
	sebf, err := coflow.NewScheduler("sebf")
	if err != nil {
		t.Fatal(err)
	}
	cfg := live.DefaultConfig()
	for i := range workers + 1 {
		r.names = append(r.names, agentName(i))
	}
	cfg.Agents, cfg.Fabric, cfg.Scheduler, cfg.AgentTimeout = r.names, coflow.NewFabric(workers+1, rate), sebf, agentTimeout
	if r.coord, err = live.NewCoordinator(cfg); err != nil {
		t.Fatal(err)
	}
	ctr, err := r.anet.Join("coord", r.coord)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.coord.Start(ctr); err != nil {
		t.Fatal(err)
	}
	acfg := live.DefaultAgentConfig()
	acfg.Coordinator, acfg.ReportInterval, acfg.CoordinatorTimeout = "coord", 20*time.Millisecond, agentTimeout
	acfg.ChunkTimeout = flowTimeout
	for _, n := range r.names {
		a, err := live.NewAgent(acfg)
		if err != nil {
			t.Fatal(err)
		}
		r.agents = append(r.agents, a)
		tr, err := r.anet.Join(n, a)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = a.Start(ctx, tr)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	rc := RegistryConfig{Job: "A", Servers: []transport.NodeID{"server-0"}, Ports: map[transport.NodeID]int{"server-0": 0}}
	for i := range workers {
		w := transport.NodeID(fmt.Sprintf("worker-%d", i))
		rc.Workers = append(rc.Workers, w)
		rc.Ports[w] = i + 1
	}
	if r.reg, err = NewRegistry(rc); err != nil {
		t.Fatal(err)
	}
	if server != nil {
		if r.handler, err = NewHandler(server, "server-0", r.config(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.net.Join("server-0", r.handler); err != nil {
			t.Fatal(err)
		}
		for i, w := range rc.Workers {
			tr, err := r.net.Join(w, nopHandler{})
			if err != nil {
				t.Fatal(err)
			}
			wt, err := Wrap(tr, r.config(i+1))
			if err != nil {
				t.Fatal(err)
			}
			r.workers = append(r.workers, wt)
		}
	}
	return r
}

func (r *rig) config(machine int) Config {
	return Config{Registry: r.reg, Agent: r.agents[machine], AgentName: r.names[machine], FlowTimeout: flowTimeout}
}

func (r *rig) close() {
	r.closeOnce.Do(func() {
		r.reg.Close()
		for _, a := range r.agents {
			a.Close()
		}
		r.coord.Close()
		r.net.Close()
		r.anet.Close()
	})
}

type nopHandler struct{}

func (nopHandler) HandleRequest(context.Context, transport.NodeID, []byte) ([]byte, error) {
	return nil, errors.New("nothing served here")
}
func (nopHandler) HandleMessage(transport.NodeID, []byte) {}

// fakeServer answers a push with the SHA-256 of the bytes it got and a
// pull with replyBytes derived from the requester and the request.
type fakeServer struct {
	mu     sync.Mutex
	pushes int
	fail   error // returned for every request when set
}

func pullReply(from transport.NodeID, req []byte, n int64) []byte {
	h := sha256.Sum256(append([]byte(from), req...))
	rng := rand.New(rand.NewChaCha8(h))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	return out
}

func (s *fakeServer) HandleRequest(_ context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	ph, _, reply := classify(req)
	switch ph {
	case Push:
		s.mu.Lock()
		s.pushes++
		s.mu.Unlock()
		h := sha256.Sum256(req)
		return h[:], nil
	case Pull:
		return pullReply(from, req, reply), nil
	}
	return []byte("plain:" + string(req)), nil
}
func (*fakeServer) HandleMessage(transport.NodeID, []byte) {}

// pushMsg is an OpPush of clock with n random value bytes.
func pushMsg(clock int64, n int, seed uint64) []byte {
	b := []byte{wire.Version, byte(wire.OpPush), wire.ModeApply}
	b = binary.LittleEndian.AppendUint64(b, uint64(clock))
	b = append(b, make([]byte, 16+4+12)...) // scale, weight, n=0 segments (the fake server reads none)
	rng := rand.New(rand.NewPCG(seed, uint64(clock)))
	for range n {
		b = append(b, byte(rng.Uint32()))
	}
	return b
}

// pullMsg is an OpPull of one key with vals values.
func pullMsg(vals int) []byte {
	b := []byte{wire.Version, byte(wire.OpPull)}
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint64(b, 7)
	return binary.LittleEndian.AppendUint32(b, uint32(vals))
}

func TestClassify(t *testing.T) {
	ph, c, _ := classify(pushMsg(42, 10, 1))
	if ph != Push || c != 42 {
		t.Fatalf("push: %v clock %d", ph, c)
	}
	id := []byte{wire.Version, byte(wire.OpPushID)}
	id = append(id, make([]byte, 16)...)
	id = append(id, pushMsg(9, 0, 1)[2:]...)
	if ph, c, _ := classify(id); ph != Push || c != 9 {
		t.Fatalf("push with id: %v clock %d", ph, c)
	}
	if ph, _, n := classify(pullMsg(1000)); ph != Pull || n != 4000 {
		t.Fatalf("pull: %v reply %d", ph, n)
	}
	for _, b := range [][]byte{nil, {wire.Version}, {1, byte(wire.OpPush)}, {wire.Version, byte(wire.OpFlush)}, pullMsg(1)[:8]} {
		if ph, _, _ := classify(b); ph != 0 {
			t.Fatalf("%x classified %v", b, ph)
		}
	}
}

// TestBytesIntactAndCoflowPerClock: two workers push and pull through the
// wrappers for three clocks; every push reaches the server intact (its
// SHA-256 comes back), every pull reply is exactly the server's, each
// clock's pushes are one coflow of two flows and its pulls another, and
// every coflow is unregistered once received.
func TestBytesIntactAndCoflowPerClock(t *testing.T) {
	srv := &fakeServer{}
	r := newRig(t, 2, srv, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const clocks = 3
	for c := range int64(clocks) {
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(r.workers))
		for i, w := range r.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pull := pullMsg(50_000 + 10*int(c)) // 200 KB replies, another size each clock
				got, err := w.Request(ctx, "server-0", pull)
				if err != nil {
					errs <- fmt.Errorf("pull %d: %w", c, err)
					return
				}
				if !bytes.Equal(got, pullReply(w.LocalID(), pull, int64(len(got)))) || len(got) != 4*(50_000+10*int(c)) {
					errs <- fmt.Errorf("clock %d: %s got a wrong pull reply (%d bytes)", c, w.LocalID(), len(got))
				}
				msg := pushMsg(c, 300_000, uint64(i))
				resp, err := w.Request(ctx, "server-0", msg)
				if err != nil {
					errs <- fmt.Errorf("push %d: %w", c, err)
					return
				}
				if h := sha256.Sum256(msg); !bytes.Equal(resp, h[:]) {
					errs <- fmt.Errorf("clock %d: %s's push arrived altered", c, w.LocalID())
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// A small push and a control request go direct and still work.
	if resp, err := r.workers[0].Request(ctx, "server-0", pushMsg(clocks, 10, 1)); err != nil || len(resp) != 32 {
		t.Fatalf("small push: %d bytes, %v", len(resp), err)
	}
	if resp, err := r.workers[0].Request(ctx, "server-0", []byte("hi")); err != nil || string(resp) != "plain:hi" {
		t.Fatalf("plain request: %q, %v", resp, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.reg.Stats().Unregistered < 2*clocks && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := r.reg.Stats()
	if st.Registered != 2*clocks || st.Unregistered != 2*clocks || st.FlowMsgs != 4*clocks || st.DirectMsgs != 1 {
		t.Fatalf("stats %+v: want %d coflows registered and unregistered, %d messages as flows, 1 direct", st, 2*clocks, 4*clocks)
	}
	res := r.coord.Results()
	if len(res) != 0 {
		t.Fatalf("%d coflows still at the coordinator after unregistering", len(res))
	}
}

// TestReplyErrorsPassThrough: a server's error comes back to the worker
// as the inner transport's RemoteError, for pushes and pulls.
func TestReplyErrorsPassThrough(t *testing.T) {
	srv := &fakeServer{fail: errors.New("store says no")}
	r := newRig(t, 1, srv, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, msg := range [][]byte{pushMsg(0, 200_000, 1), pullMsg(100_000)} {
		_, err := r.workers[0].Request(ctx, "server-0", msg)
		var re *transport.RemoteError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, "store says no") {
			t.Fatalf("got %v, want the server's error", err)
		}
	}
}

// TestAgentDeathFailsPush: with the server machine's agent dead, a push
// fails with live.ErrAgentDead naming it, well within the configured
// bounds; with the worker's own agent closed, it fails naming that one.
func TestAgentDeathFailsPush(t *testing.T) {
	r := newRig(t, 2, &fakeServer{}, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.workers[0].Request(ctx, "server-0", pushMsg(0, 200_000, 1)); err != nil {
		t.Fatal(err)
	}
	r.agents[0].Close()
	if err := r.anet.Kill(r.names[0]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := r.workers[1].Request(ctx, "server-0", pushMsg(1, 200_000, 2))
	t.Log(err)
	if !errors.Is(err, live.ErrAgentDead) || !strings.Contains(err.Error(), string(r.names[0])) {
		t.Fatalf("push with the server's agent dead: %v; want live.ErrAgentDead naming %s", err, r.names[0])
	}
	// bound: the coordinator's AgentTimeout or the chunk timeout, whichever
	// comes first, plus wide slack for a loaded machine
	if took := time.Since(start); took > flowTimeout+agentTimeout+5*time.Second {
		t.Fatalf("the failure took %v", took)
	}
	r.agents[2].Close()
	_, err = r.workers[1].Request(ctx, "server-0", pushMsg(5, 200_000, 3))
	if !errors.Is(err, live.ErrClosed) || !strings.Contains(err.Error(), string(r.names[2])) {
		t.Fatalf("push with the worker's agent closed: %v; want live.ErrClosed naming %s", err, r.names[2])
	}
}

// TestServerWaitBounded: an envelope naming a registered flow whose bytes
// never come fails at FlowTimeout, not later; one naming another
// worker's flow is refused at once.
func TestServerWaitBounded(t *testing.T) {
	r := newRig(t, 2, &fakeServer{}, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := pushMsg(0, 200_000, 1)
	id, j, ok, err := r.reg.flow(ctx, r.agents[1], r.names[1], 0, Push, "worker-0", "server-0", int64(len(msg)))
	if err != nil || !ok {
		t.Fatalf("flow: %v %v", ok, err)
	}
	env := encodeEnvelope(envelope{kind: kindData, coflow: id, flow: j, bytes: int64(len(msg))})
	w0 := r.net.Node("worker-0")
	w1 := r.net.Node("worker-1")
	if _, err := w1.Request(ctx, "server-0", env); err == nil || !strings.Contains(err.Error(), ErrForeignFlow.Error()) {
		t.Fatalf("worker-1 naming worker-0's flow: %v", err)
	}
	start := time.Now()
	_, err = w0.Request(ctx, "server-0", env)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("bytes never sent: %v", err)
	}
	if took < flowTimeout/2 || took > flowTimeout+5*time.Second {
		t.Fatalf("the server waited %v, want about FlowTimeout %v", took, flowTimeout)
	}
	// the caller's ctx bounds it too
	cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer ccancel()
	if _, err := w0.Request(cctx, "server-0", env); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a short ctx: %v", err)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, e := range []envelope{{kind: kindData, coflow: 3, flow: 7, bytes: 1 << 20}, {kind: kindReply, coflow: 1<<63 + 5, flow: 0, bytes: 4, inline: []byte("pull")}} {
		got, err := decodeEnvelope(encodeEnvelope(e), 1<<30)
		if err != nil || got.kind != e.kind || got.coflow != e.coflow || got.flow != e.flow || got.bytes != e.bytes || !bytes.Equal(got.inline, e.inline) {
			t.Fatalf("%+v → %+v, %v", e, got, err)
		}
	}
	if _, err := decodeEnvelope(encodeEnvelope(envelope{kind: kindData, bytes: 2 << 30}), 1<<30); !errors.Is(err, ErrMalformed) {
		t.Fatalf("over the bound: %v", err)
	}
}

func FuzzEnvelope(f *testing.F) {
	f.Add(encodeEnvelope(envelope{kind: kindData, coflow: 3, flow: 7, bytes: 100}))
	f.Add(encodeEnvelope(envelope{kind: kindReply, coflow: 1, bytes: 8, inline: pullMsg(2)}))
	f.Add(pushMsg(3, 5, 1))
	f.Add([]byte{Magic, respFlow})
	f.Fuzz(func(t *testing.T, b []byte) {
		classify(b)
		decodeResponse(b)
		e, err := decodeEnvelope(b, 1<<20)
		if err != nil {
			return
		}
		if e.bytes < 1 || e.bytes > 1<<20 {
			t.Fatalf("accepted %d bytes", e.bytes)
		}
		if !bytes.Equal(encodeEnvelope(e), b) {
			t.Fatalf("round trip differs")
		}
	})
}

// TestPullClockFollowsPush: a pull belongs to the clock after the
// worker's last push, a push too small to be a flow included.
func TestPullClockFollowsPush(t *testing.T) {
	r := newRig(t, 1, &fakeServer{}, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.workers[0].Request(ctx, "server-0", pushMsg(4, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.workers[0].Request(ctx, "server-0", pullMsg(50_000)); err != nil {
		t.Fatal(err)
	}
	r.reg.mu.Lock()
	defer r.reg.mu.Unlock()
	for k := range r.reg.entries {
		t.Fatalf("coflow %+v still listed after its flows were received", k)
	}
	if r.reg.floor[Pull] != 5-int64(r.reg.cfg.Keep) {
		t.Fatalf("the pull registered a coflow for clock %d, want 5", r.reg.floor[Pull]+int64(r.reg.cfg.Keep))
	}
}
