package ps

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/ps/store"
	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// flushClock returns the clock of a flush request (ok false for any other
// request).
func flushClock(req []byte) (int, bool) {
	o, body, err := wire.Header(req)
	if err != nil || o != wire.OpFlush {
		return 0, false
	}
	d := codec.Decoder{B: body}
	c := d.I64()
	return int(c), d.Err == nil
}

// pushClock returns the buffer clock of a push request (ok false for any
// other request).
func pushClock(req []byte) (int, bool) {
	o, body, err := wire.Header(req)
	if err != nil || (o != wire.OpPush && o != wire.OpPushID) {
		return 0, false
	}
	d := codec.Decoder{B: body}
	readReqID(&d, o)
	d.U8() // mode
	c := d.I64()
	return int(c), d.Err == nil
}

// TestPartialFlush: under ContinueWithout, worker w0 dies after its push
// of clock 2 was admitted: "partial", after the push is stored on server
// s1 and before it reaches s0 (the flake tally's run 112 of
// TestMultiProcess_PartitionedWorker: clock 3 counted 16 samples on
// server-0, 24 on server-1); "none", before it reaches either. The run
// goes on without it. With servers that keep each sender's pushes apart
// (Deterministic, CoordinatorConfig.SendersApart) the push is taken back,
// left out of the clock's flush on both servers and w0's samples handed
// to a survivor: every clock counts each sample once on each server (the
// servers' own flush answers say so), and nothing is reported; "restart"
// is "partial" with the coordinator stopped as a crash would (Abandon)
// while it flushes that clock and a successor restored from its store,
// which replays the take-back and flushes the clock again leaving w0 out.
// Without, the coordinator reports the clock at its flush (a warning and
// event.PartialFlush naming w0 and each server's weight) and no other.
func TestPartialFlush(t *testing.T) {
	for _, apart := range []bool{false, true} {
		for _, mode := range []string{"partial", "none", "restart"} {
			if mode == "restart" && !apart {
				continue
			}
			t.Run(fmt.Sprintf("%s/apart=%v", mode, apart), func(t *testing.T) { testPartialFlush(t, mode, apart) })
		}
	}
}

func testPartialFlush(t *testing.T, mode string, apart bool) {
	const batch, clocks, cut = 4, 5, 2
	net := transport.NewInmemNetwork()
	defer net.Close()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	servers := []transport.NodeID{"s0", "s1"}
	workers := []transport.NodeID{"w0", "w1", "w2"}
	var (
		mu      sync.Mutex
		partial []event.Event
		weight  = map[transport.NodeID]map[int]float64{} // server → clock → weight its flush answered
	)
	obs := WithObserver(event.Func(func(e event.Event) {
		if e.Kind == event.PartialFlush {
			mu.Lock()
			partial = append(partial, e)
			mu.Unlock()
		}
	}))
	logs := &syncBuf{}
	for _, s := range servers {
		sc := DefaultServerConfig()
		sc.Store.Deterministic = apart
		srv, err := NewServer(string(s), sc, obs)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		tr, err := net.Join(s, srv)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
	}
	cfg := DefaultCoordinatorConfig()
	cfg.EPSP = epsp.Config{NumWorkers: len(workers), Batch: batch}
	cfg.Servers, cfg.Workers = servers, workers
	cfg.Lease = LeaseConfig{Timeout: 400 * time.Millisecond, Interval: 25 * time.Millisecond, OnWorkerLost: ContinueWithout}
	cfg.SendersApart = apart
	restart := mode == "restart"
	if restart {
		cfg.Store, cfg.Wait = DirCoordinatorStore(t.TempDir()), 20*time.Second
	}
	flushing := make(chan struct{}) // restart: the first flush of clock cut has begun
	var flushOnce sync.Once
	hooks := transporttest.Hooks{BeforeRequest: func(ctx context.Context, to transport.NodeID, req []byte) error {
		if c, ok := flushClock(req); restart && ok && c == cut {
			first := false
			flushOnce.Do(func() { first = true; close(flushing) })
			if first {
				<-ctx.Done() // the coordinator stops as a crash would
				return ctx.Err()
			}
		}
		return nil
	}, AfterRequest: func(to transport.NodeID, req, resp []byte, err error) ([]byte, error) {
		if clock, ok := flushClock(req); ok && err == nil {
			if p, perr := wire.ParseResponse(resp, string(to)); perr == nil && len(p) == 8 {
				pd := codec.Decoder{B: p}
				mu.Lock()
				if weight[to] == nil {
					weight[to] = map[int]float64{}
				}
				if w := pd.F64(); w > 0 { // a flush again (after a restart) of a flushed clock answers 0
					weight[to][clock] = w
				}
				mu.Unlock()
			}
		}
		return resp, err
	}}
	var (
		co *Coordinator
		ct *transport.Inmem
	)
	start := func() {
		t.Helper()
		var err error
		if co, err = NewCoordinator(cfg, epsp.NewBSP(), obs, WithLogger(logs.logger())); err != nil {
			t.Fatal(err)
		}
		if ct, err = net.Join("coordinator", co); err != nil {
			t.Fatal(err)
		}
		if err := co.Start(ctx, transporttest.WithHooks(ct, hooks)); err != nil {
			t.Fatal(err)
		}
	}
	start()
	defer func() { co.Close(); ct.Close() }()
	stored := make(chan struct{}) // w0's push of clock cut is on s1
	var once sync.Once
	errs := make(chan error, len(workers))
	for i, name := range workers {
		wc := DefaultWorkerConfig()
		wc.ID = epsp.WorkerID(i)
		wc.Coordinator = "coordinator"
		wc.Client.Servers = servers
		wc.Heartbeat = 25 * time.Millisecond
		w, err := NewWorker(string(name), wc)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		wt, err := net.Join(name, w)
		if err != nil {
			t.Fatal(err)
		}
		defer wt.Close()
		var tr transport.Transport = wt
		if i == 0 {
			tr = transporttest.WithHooks(wt, transporttest.Hooks{
				BeforeRequest: func(ctx context.Context, to transport.NodeID, req []byte) error {
					if c, ok := pushClock(req); ok && c == cut && (to == "s0" || mode == "none") {
						if mode != "none" {
							select {
							case <-stored:
							case <-time.After(10 * time.Second):
								return fmt.Errorf("the push to s1 was never stored")
							}
						}
						_ = net.Kill("w0") // dies between its sends, or before them
						return transport.ErrUnreachable
					}
					return nil
				},
				AfterRequest: func(to transport.NodeID, req, resp []byte, err error) ([]byte, error) {
					if c, ok := pushClock(req); ok && c == cut && to == "s1" && err == nil {
						once.Do(func() { close(stored) })
					}
					return resp, err
				},
			})
		}
		if err := w.Start(ctx, tr); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := w.Train(ctx, oneModel{}, ShardSampler{N: 64, Workers: len(workers)},
				TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: clocks})
			errs <- err
		}()
	}
	if restart {
		select {
		case <-flushing:
		case <-ctx.Done():
			t.Fatal("the flush of the clock never began")
		}
		co.Abandon()
		_ = net.Kill("coordinator")
		co.Close()
		start()
	}
	for i := range workers {
		if err := <-errs; err != nil && i > 0 {
			t.Logf("a worker's Train: %v", err) // w0's, killed
		}
	}
	if err := co.Err(); err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	st := co.Stats()
	if st.Flushes != clocks {
		t.Fatalf("%d flushes, want %d", st.Flushes, clocks)
	}
	mu.Lock()
	defer mu.Unlock()
	a, b := weight["s0"][cut], weight["s1"][cut]
	t.Logf("clock %d: s0 flushed a weight of %v, s1 %v; %d revoked, %d hand-overs", cut, a, b, st.Revoked, st.HandOvers)
	full, part := float64(len(workers)*batch), float64((len(workers)-1)*batch)
	for k := range clocks {
		want := map[bool]float64{true: full, false: part}[k < cut]
		if k == cut {
			continue
		}
		if weight["s0"][k] != want || weight["s1"][k] != want {
			t.Errorf("clock %d: weights s0 %v, s1 %v; want %v", k, weight["s0"][k], weight["s1"][k], want)
		}
	}
	if restart && !strings.Contains(logs.String(), "coordinator restored from its state") {
		t.Fatalf("no successor restored the run:\n%s", logs.String())
	}
	if apart {
		if a != full || b != full || st.Revoked != 1 || st.HandOvers != 1 || st.SamplesHandedOver != batch {
			t.Errorf("clock %d: weights s0 %v, s1 %v, want %v each (w0's push taken back and handed over: revoked %d, hand-overs %d of %d samples)",
				cut, a, b, full, st.Revoked, st.HandOvers, st.SamplesHandedOver)
		}
		if len(partial) != 0 {
			t.Errorf("PartialFlush events %+v, want none", partial)
		}
		return
	}
	what := "partial update"
	switch {
	case mode == "partial" && (a != part || b != full):
		t.Fatalf("clock %d: s0 %v, s1 %v: want the partial update %v, %v", cut, a, b, part, full)
	case mode == "none":
		what = "push stored on no server"
		if a != part || b != part {
			t.Fatalf("clock %d: s0 %v, s1 %v; want %v each", cut, a, b, part)
		}
	}
	if len(partial) != 1 || partial[0].Worker != 0 || partial[0].Clock != cut || partial[0].Samples != batch {
		t.Fatalf("PartialFlush events %+v, want one for w0's %d samples of clock %d", partial, batch, cut)
	}
	out := logs.String()
	want := fmt.Sprintf("%s of clock %d", what, cut)
	if !strings.Contains(out, want) || !strings.Contains(out, "w0") || !strings.Contains(out, fmt.Sprintf("s0 %v", a)) || !strings.Contains(out, fmt.Sprintf("s1 %v", b)) {
		t.Errorf("the coordinator's log lacks %q with w0 and each server's weight (s0 %v, s1 %v):\n%s", want, a, b, out)
	}
}

// syncBuf is a log destination safe for concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(s, nil)) }
