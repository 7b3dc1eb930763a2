package ps_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/store"
)

// TestTimeline_JSON runs a cluster with a straggler and checks the
// Chrome trace it writes: valid JSON in the trace-event object format,
// one named row per worker, pull/compute/push spans for every clock in
// that order and a wait between clocks, transfer spans matching the
// coordinator's count; the straggler's compute spans are the longest.
// The periodic state report sees the straggler too.
func TestTimeline_JSON(t *testing.T) {
	const nw, clocks = 3, 8
	tl := &ps.Timeline{}
	var mu sync.Mutex
	var reports [][]ps.WorkerState
	pol, err := epsp.NewEPSP(epsp.DefaultEPSPConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: nw, Policy: pol, Observer: tl,
		EPSP: epsp.Config{Batch: 16, TickPeriod: 2 * time.Millisecond}, Chunk: 2, ProgressEvery: 1,
		StateEvery: 5 * time.Millisecond, OnState: func(s []ps.WorkerState) { mu.Lock(); reports = append(reports, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.TrainWith(ctx, func(w int) ps.Model {
		if w == 0 {
			return delayed{linReg{n: 96}, time.Millisecond}
		}
		return linReg{n: 96}
	}, ps.ShardSampler{N: 96, Workers: nw}, ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{1, 1}, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tl.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   *float64       `json:"ts"`
			Dur  float64        `json:"dur"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
		DisplayTimeUnit string `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(buf.Bytes(), &trace); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.String())
	}
	rows := map[int]string{}
	type k struct {
		w, clock int
		name     string
	}
	span := map[k][2]float64{}
	transfers := 0
	for _, e := range trace.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				rows[e.Tid] = e.Args["name"].(string)
			}
		case "X":
			if e.Ts == nil || e.Dur < 0 {
				t.Fatalf("bad span %+v", e)
			}
			clock := int(e.Args["clock"].(float64))
			if e.Name == "transfer" {
				transfers++
				continue
			}
			span[k{e.Tid, clock, e.Name}] = [2]float64{*e.Ts, *e.Ts + e.Dur}
		default:
			t.Fatalf("unexpected phase %q", e.Ph)
		}
	}
	for w := range nw {
		if rows[w] != string(ps.WorkerNode(w)) {
			t.Errorf("row %d named %q", w, rows[w])
		}
	}
	var slow, fast float64
	for w := range nw {
		for c := range clocks {
			prev := -1.0
			for _, name := range []string{"pull", "compute", "push", "wait"} {
				s, ok := span[k{w, c, name}]
				if !ok {
					if name == "wait" && c == clocks-1 {
						continue // the last clock has no next start
					}
					t.Fatalf("worker %d clock %d: no %s span", w, c, name)
				}
				if s[0] < prev-1e-3 {
					t.Errorf("worker %d clock %d: %s starts at %v before the previous span ends (%v)", w, c, name, s[0], prev)
				}
				prev = s[1]
				if name == "compute" {
					if w == 0 {
						slow += s[1] - s[0]
					} else {
						fast += (s[1] - s[0]) / (nw - 1)
					}
				}
			}
		}
	}
	if slow <= fast {
		t.Errorf("straggler computed %vµs, the others %vµs on average", slow, fast)
	}
	if want := c.Coordinator().Stats().TransfersDone; transfers != want {
		t.Errorf("%d transfer spans, coordinator counts %d done", transfers, want)
	}
	mu.Lock()
	n := len(reports)
	sawStraggler := false
	for _, r := range reports {
		if len(r) != nw {
			t.Fatalf("report of %d workers", len(r))
		}
		if r[0].Class == "straggler" {
			sawStraggler = true
		}
	}
	mu.Unlock()
	if n == 0 {
		t.Fatal("no state reports")
	}
	final := c.WorkerStates()
	for _, s := range final {
		if !s.Left || s.Clock != clocks {
			t.Errorf("final state %v", s)
		}
	}
	if !sawStraggler && final[0].Class != "straggler" {
		t.Errorf("worker 0 never classified a straggler; final %v", final)
	}
}
