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

// TestPartialFlushReported: under ContinueWithout, worker w0 dies after
// its push of clock 2 was admitted: "partial", after the push is stored on
// server s1 and before it reaches s0 (the flake tally's run 112 of
// TestMultiProcess_PartitionedWorker: clock 3 counted 16 samples on
// server-0, 24 on server-1); "none", before it reaches either. The run
// goes on without it, and the coordinator reports the clock at its flush
// (a warning and event.PartialFlush naming w0 and each server's weight);
// no other clock is reported. Without the report the run is silent.
func TestPartialFlushReported(t *testing.T) {
	for _, mode := range []string{"partial", "none"} {
		t.Run(mode, func(t *testing.T) { testPartialFlush(t, mode) })
	}
}

func testPartialFlush(t *testing.T, mode string) {
	const batch, clocks, cut = 4, 5, 2
	net := transport.NewInmemNetwork()
	defer net.Close()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	servers := []transport.NodeID{"s0", "s1"}
	workers := []transport.NodeID{"w0", "w1", "w2"}
	var (
		mu       sync.Mutex
		partial  []event.Event
		flushedW = map[string]map[int]int{} // server → clock → Applied samples
	)
	obs := WithObserver(event.Func(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case event.PartialFlush:
			partial = append(partial, e)
		case event.Applied:
			if flushedW[e.Node] == nil {
				flushedW[e.Node] = map[int]int{}
			}
			flushedW[e.Node][e.Clock] += e.Samples
		}
	}))
	logs := &syncBuf{}
	for _, s := range servers {
		srv, err := NewServer(string(s), DefaultServerConfig(), obs)
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
	co, err := NewCoordinator(cfg, epsp.NewBSP(), obs, WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := net.Join("coordinator", co)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Start(ctx, ct); err != nil {
		t.Fatal(err)
	}
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
						if mode == "partial" {
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
	var failed int
	for range workers {
		if err := <-errs; err != nil {
			failed++
			if !strings.Contains(err.Error(), "w0") && !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "unreachable") {
				t.Errorf("a worker failed: %v", err)
			}
		}
	}
	if err := co.Err(); err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	if st := co.Stats(); st.Flushes != clocks {
		t.Fatalf("%d flushes, want %d", st.Flushes, clocks)
	}
	mu.Lock()
	defer mu.Unlock()
	a, b := flushedW["s0"][cut], flushedW["s1"][cut]
	what := "partial update"
	switch {
	case mode == "partial" && a == b:
		t.Fatalf("clock %d: s0 and s1 both hold %d samples: the partial update was not made", cut, a)
	case mode == "none":
		what = "push stored on no server"
		if a != b || a != (len(workers)-1)*batch {
			t.Fatalf("clock %d: s0 holds %d samples, s1 %d; want %d each", cut, a, b, (len(workers)-1)*batch)
		}
	}
	if len(partial) != 1 || partial[0].Worker != 0 || partial[0].Clock != cut || partial[0].Samples != batch {
		t.Fatalf("PartialFlush events %+v, want one for w0's %d samples of clock %d", partial, batch, cut)
	}
	out := logs.String()
	t.Logf("clock %d: s0 holds %d samples, s1 %d; workers failed: %d", cut, a, b, failed)
	want := fmt.Sprintf("%s of clock %d", what, cut)
	if !strings.Contains(out, want) || !strings.Contains(out, "w0") || !strings.Contains(out, fmt.Sprintf("s0 %d", a)) || !strings.Contains(out, fmt.Sprintf("s1 %d", b)) {
		t.Errorf("the coordinator's log lacks %q with w0 and each server's weight (s0 %d, s1 %d):\n%s", want, a, b, out)
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
