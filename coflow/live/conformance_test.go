package live

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// Three coflows on four agents with bandwidth binding: a large coflow L
// (two flows, 0→1 and 2→3) and, 100 ms later, a medium M (2→3) and a small
// S (0→1) that each share one of L's ports. The live CCTs follow the order
// the scheduler intends: SEBF and FVDF (smallest effective bottleneck
// first) finish S, then M, then L; FIFO finishes L first. Every flow's bytes
// arrive exactly (SHA-256), and FVDF puts fewer bytes on the wire than raw.
func TestConformanceOrder(t *testing.T) {
	type coflowSpec struct {
		name  string
		flows []coflow.Flow
	}
	specs := []coflowSpec{
		{"L", []coflow.Flow{{Src: 0, Dst: 1, Bytes: 3e6}, {Src: 2, Dst: 3, Bytes: 3e6}}},
		{"M", []coflow.Flow{{Src: 2, Dst: 3, Bytes: 750e3}}},
		{"S", []coflow.Flow{{Src: 0, Dst: 1, Bytes: 250e3}}},
	}
	for _, tc := range []struct {
		sched string
		bps   float64 // per port each way
		text  bool    // compressible data and an lz4 codec with a core per port
		want  []string
	}{
		// Alone, L takes 1 s at 3 MB/s; S 83 ms, M 250 ms.
		{"sebf", 3e6, false, []string{"S", "M", "L"}},
		{"fifo", 3e6, false, []string{"L", "S", "M"}},
		// Compressed (lz4 on text, ratio ≈ 0.36), L takes ≈ 1.1 s at 1 MB/s.
		{"fvdf", 1e6, true, []string{"S", "M", "L"}},
	} {
		t.Run(tc.sched, func(t *testing.T) {
			fab := coflow.NewFabric(4, tc.bps)
			if tc.text {
				fab = lz4Fabric(4, tc.bps, 1)
			}
			cfg, acfg := testConfigs(4, fab, mustSched(t, tc.sched))
			cl := newCluster(t, cfg, acfg)
			ctx := testCtx(t)
			ids := make(map[CoflowID]string)
			errs := make(chan error, len(specs))
			var wg sync.WaitGroup
			for i, sp := range specs {
				if i == 1 {
					time.Sleep(100 * time.Millisecond)
				}
				var data [][]byte
				for j, f := range sp.flows {
					if tc.text {
						data = append(data, textBytes(int(f.Bytes), uint64(10*i+j)))
					} else {
						data = append(data, randomBytes(int(f.Bytes), uint64(10*i+j)))
					}
				}
				id, err := cl.agents[sp.flows[0].Src].Register(ctx, sp.flows, 0)
				if err != nil {
					t.Fatal(err)
				}
				ids[id] = sp.name
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- cl.transfer(ctx, id, sp.flows, data)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var res []Result
			for id := range ids {
				res = append(res, waitResult(t, cl.coord, id))
			}
			slices.SortFunc(res, func(a, b Result) int { return int(a.Finish - b.Finish) })
			var got []string
			var raw, wire float64
			for _, r := range res {
				got = append(got, ids[r.ID])
				raw += r.Bytes
				wire += r.WireBytes
				t.Logf("%s %s: arrival %v, CCT %v, raw %.0f, wire %.0f", tc.sched, ids[r.ID], r.Arrival, r.CCT, r.Bytes, r.WireBytes)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("finish order %v, want %v", got, tc.want)
			}
			if tc.text && !(wire < 0.8*raw) {
				t.Fatalf("wire %.0f of raw %.0f: FVDF did not compress", wire, raw)
			}
		})
	}
}
