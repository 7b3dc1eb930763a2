package ps_test

import (
	"context"
	"math"
	"math/rand/v2"
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

// assignPolicy is BSP (a barrier after every clock, pushes accumulated and
// flushed as their sample-weighted mean) that, at every release of all
// workers into a clock, assigns the pieces layout chooses
// (epsp.Output.Assign). With transfer set it also orders reactive
// transfers at a worker's first progress report of a clock.
type assignPolicy struct {
	flushed  int
	layout   func(clock int, batch func(epsp.WorkerID) int) []epsp.Assignment
	transfer func(v epsp.View, r epsp.ProgressReport, assigned []epsp.Assignment) []epsp.TransferOrder

	mu       sync.Mutex
	assigned map[int][]epsp.Assignment // clock → the assignments ordered
	reported map[[2]int]bool           // (worker, clock) → a transfer was considered
	results  []epsp.TransferResult
	reports  []epsp.ProgressReport
}

func (p *assignPolicy) Name() string { return "test-assign" }

func (p *assignPolicy) Admit(_ time.Duration, _ epsp.View, push epsp.Push) epsp.PushDecision {
	return epsp.PushDecision{Action: epsp.Accumulate, Clock: push.Clock}
}

func (p *assignPolicy) Step(_ time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.assigned == nil {
		p.assigned = map[int][]epsp.Assignment{}
		p.reported = map[[2]int]bool{}
	}
	out := epsp.Barrier(v, &p.flushed, 1)
	if p.layout != nil && len(out.Release) == v.NumWorkers() {
		c := v.Clock(out.Release[0])
		out.Assign = p.layout(c, v.Batch)
		p.assigned[c] = out.Assign
	}
	switch e.Kind {
	case epsp.EventProgress:
		p.reports = append(p.reports, e.Progress)
		k := [2]int{int(e.Worker), e.Clock}
		if p.transfer != nil && !p.reported[k] {
			p.reported[k] = true
			out.Transfers = p.transfer(v, e.Progress, p.assigned[e.Clock])
		}
	case epsp.EventTransferResult:
		p.results = append(p.results, e.Transfer)
	}
	return out
}

func (p *assignPolicy) assignments() map[int][]epsp.Assignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[int][]epsp.Assignment{}
	for c, a := range p.assigned {
		m[c] = append([]epsp.Assignment(nil), a...)
	}
	return m
}

func (p *assignPolicy) progressReports() []epsp.ProgressReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]epsp.ProgressReport(nil), p.reports...)
}

func (p *assignPolicy) transferResults() []epsp.TransferResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]epsp.TransferResult(nil), p.results...)
}

// fixedLayout: at clock c ≥ 1 worker c mod W gives the tail [keep, B) in
// two pieces to the next two workers; keep is 0 (it gives everything)
// every fourth clock and B−6 otherwise.
func fixedLayout(workers int) func(int, func(epsp.WorkerID) int) []epsp.Assignment {
	return func(c int, batch func(epsp.WorkerID) int) []epsp.Assignment {
		if c == 0 {
			return nil
		}
		g := epsp.WorkerID(c % workers)
		b := batch(g)
		keep := b - 6
		if c%4 == 3 {
			keep = 0
		}
		mid := (keep + b) / 2
		return []epsp.Assignment{
			{From: g, To: epsp.WorkerID((c + 1) % workers), Clock: c, Lo: keep, Hi: mid},
			{From: g, To: epsp.WorkerID((c + 2) % workers), Clock: c, Lo: mid, Hi: b},
		}
	}
}

// randomLayout chooses, per clock, each worker's role (giver, taker or
// neither; at least one of each), each giver's keep in [0, B) and a split
// of its tail into one to three pieces, each to a random taker.
func randomLayout(rng *rand.Rand, mu *sync.Mutex, workers int) func(int, func(epsp.WorkerID) int) []epsp.Assignment {
	return func(c int, batch func(epsp.WorkerID) int) []epsp.Assignment {
		mu.Lock()
		defer mu.Unlock()
		role := make([]int, workers) // 0 neither, 1 giver, 2 taker
		for w := range role {
			role[w] = rng.IntN(3)
		}
		role[rng.IntN(workers)] = 1
		for {
			t := rng.IntN(workers)
			if role[t] != 1 {
				role[t] = 2
				break
			}
			if rng.IntN(2) == 0 { // a giver may become the taker if another gives
				role[t] = 2
				role[(t+1)%workers] = 1
				break
			}
		}
		var takers []epsp.WorkerID
		for w, r := range role {
			if r == 2 {
				takers = append(takers, epsp.WorkerID(w))
			}
		}
		var out []epsp.Assignment
		for w, r := range role {
			if r != 1 {
				continue
			}
			g := epsp.WorkerID(w)
			b := batch(g)
			lo := rng.IntN(b)
			for k := 1 + rng.IntN(3); k > 0 && lo < b; k-- {
				hi := b
				if k > 1 {
					hi = lo + 1 + rng.IntN(b-lo)
				}
				out = append(out, epsp.Assignment{From: g, To: takers[rng.IntN(len(takers))], Clock: c, Lo: lo, Hi: hi})
				lo = hi
			}
		}
		return out
	}
}

// lsqModel is least squares on synthetic features: sample s has features
// x_s ∈ [−1,1)^Dim and target y_s = w*·x_s (w*_j = (j+1)/Dim), and its
// gradient (w·x_s − y_s)·x_s depends on the parameters, so a run's final
// parameters depend on which samples every update averaged, not on who
// computed them. Delay is slept per Gradient call (a slow worker).
type lsqModel struct {
	Dim   int
	Delay time.Duration
}

func lsqFeature(s, j int) float32 {
	h := uint64(s)*0x9e3779b97f4a7c15 ^ uint64(j+1)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return float32(h%2000)/1000 - 1
}

func (m lsqModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	loss := 0.0
	for _, s := range samples {
		var r float32
		for j := range m.Dim {
			r += (params[j] - float32(j+1)/float32(m.Dim)) * lsqFeature(s, j)
		}
		for j := range m.Dim {
			grad[j] += r * lsqFeature(s, j)
		}
		loss += 0.5 * float64(r) * float64(r)
	}
	if m.Delay > 0 {
		time.Sleep(m.Delay)
	}
	return loss
}

// framesSent sums the frames every node of c has sent.
func framesSent(c *pstest.Cluster) uint64 {
	n, _ := traffic(c)
	return n
}

// traffic sums the frames and raw bytes every node of c has sent.
func traffic(c *pstest.Cluster) (frames, bytes uint64) {
	ids := append(append([]transport.NodeID{pstest.CoordinatorID}, c.ServerIDs...), c.WorkerIDs...)
	for _, id := range ids {
		s := c.Net.Node(id).Stats()
		frames += s.FramesSent
		bytes += s.RawBytesSent
	}
	return frames, bytes
}

// TestAssign_FixedPiecesExactlyOnce runs BSP with fixed assignments at
// every release (including a giver that gives its whole batch): every
// sample of every clock is computed and pushed exactly once, each push of
// a taker carries the right Parts, every parameter of the ledger model
// ends at exactly 1/W (each clock's update counted the whole clock once),
// and each push's Busy covers its own chunks' compute time but not the
// waits.
func TestAssign_FixedPiecesExactlyOnce(t *testing.T) {
	const workers, clocks, batch, delay = 3, 6, 16, 200 * time.Microsecond
	rec := &pstest.Recorder{}
	pol := &assignPolicy{layout: fixedLayout(workers)}
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(3),
		pstest.Optimizer(store.SGD{LR: 1}), pstest.Observer(rec), pstest.Policy(pol))
	m := &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: 0, Full: 1.0 / workers,
		Delay: func(epsp.WorkerID, int) time.Duration { return delay }}
	n := workers * clocks
	stats, err := c.Train(context.Background(), m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{n}, Init: store.Zeros{}, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	if v := m.Violations(); len(v) > 0 {
		t.Errorf("reads missed updates: %v", v[:min(5, len(v))])
	}
	events := rec.Events()
	complete := []int{clocks, clocks, clocks}
	pstest.CheckExactlyOnce(t, events, complete)
	for i, v := range finalParams(t, c, n) {
		if math.Abs(float64(v)-1.0/workers) > 1e-6 {
			t.Errorf("param %d (worker %d clock %d) = %v, want %v", i, i/clocks, i%clocks, v, 1.0/workers)
		}
	}
	st := c.Coordinator.Stats()
	// Releases into clocks 1..clocks each assign two pieces (the release
	// into clock `clocks` too, though nobody computes it).
	if st.Assignments != 2*clocks {
		t.Errorf("%d assignments recorded, want %d", st.Assignments, 2*clocks)
	}
	given, taken := 0, 0
	for _, s := range stats {
		given += s.Given
		taken += s.Taken
	}
	want := 0
	for cl, as := range pol.assignments() {
		for _, a := range as {
			if cl < clocks {
				want += a.Samples()
			}
		}
	}
	if taken != want || given != want {
		t.Errorf("workers took %d and gave %d assigned samples, want %d computed", taken, given, want)
	}

	// Parts of each own push: the pusher's own samples and, per giver, the
	// samples assigned to it.
	type wc struct{ w, c int }
	wantParts := map[wc]map[epsp.WorkerID]int{}
	for cl, as := range pol.assignments() {
		for _, a := range as {
			k := wc{int(a.To), cl}
			if wantParts[k] == nil {
				wantParts[k] = map[epsp.WorkerID]int{a.To: batch}
			}
			wantParts[k][a.From] += a.Samples()
		}
	}
	start := map[wc]time.Duration{}
	last := map[wc]time.Duration{}
	calls := map[wc]int{}
	for _, e := range events {
		k := wc{int(e.Worker), e.Clock}
		switch e.Kind {
		case event.ClockStart:
			start[k] = e.At
		case event.Chunk:
			last[k] = e.At
			calls[k]++
		}
	}
	pushes := 0
	for _, e := range events {
		if e.Kind != event.PushAdmitted || e.Push.Owner != e.Push.Worker {
			continue
		}
		p := e.Push
		k := wc{int(p.Worker), p.Clock}
		pushes++
		if wp := wantParts[k]; wp != nil {
			got := map[epsp.WorkerID]int{}
			for _, x := range p.Parts {
				got[x.Owner] += x.Samples
			}
			extra := 0
			for o, s := range wp {
				if got[o] != s {
					t.Errorf("worker %d clock %d: part of worker %d has %d samples, want %d (parts %+v)", p.Worker, p.Clock, o, got[o], s, p.Parts)
				}
				if o != p.Worker {
					extra += s
				}
			}
			if p.BatchSamples != batch+extra || p.Samples != batch+extra {
				t.Errorf("worker %d clock %d: push of %d samples, batch samples %d, want %d", p.Worker, p.Clock, p.Samples, p.BatchSamples, batch+extra)
			}
		} else if len(p.Parts) != 0 {
			t.Errorf("worker %d clock %d: parts %+v in a push with nothing assigned", p.Worker, p.Clock, p.Parts)
		}
		// One goroutine: every Gradient call (one per chunk part) slept
		// delay inside the busy span, which lies between the clock's start
		// and its last chunk.
		if lo, hi := time.Duration(calls[k])*delay, last[k]-start[k]; p.Busy < lo || p.Busy > hi {
			t.Errorf("worker %d clock %d: busy %v, want within [%v, %v] (%d chunk parts)", p.Worker, p.Clock, p.Busy, lo, hi, calls[k])
		}
	}
	// Progress reports: Done, Assigned and Claimed count own samples
	// (Assigned = what the worker kept), Extra and ExtraDone assigned
	// ones; with one goroutine and one cursor, assigned samples are done
	// only after every own sample.
	extraSeen := 0
	for _, r := range pol.progressReports() {
		keep, extra := batch, 0
		for _, a := range pol.assignments()[r.Clock] {
			if a.From == r.Worker {
				keep = min(keep, a.Lo)
			}
			if a.To == r.Worker {
				extra += a.Samples()
			}
		}
		if r.Assigned != keep || r.Extra != extra || r.Done > r.Assigned || r.Claimed > r.Assigned || r.ExtraDone > r.Extra ||
			(r.ExtraDone > 0 && r.Done != r.Assigned) {
			t.Errorf("worker %d clock %d: report %+v, kept %d, %d assigned to it", r.Worker, r.Clock, r, keep, extra)
		}
		extraSeen += r.ExtraDone
	}
	if extraSeen == 0 {
		t.Error("no progress report counted assigned samples done")
	}
	wantPushes := workers * clocks // one per worker and clock, but none by a giver that kept nothing
	for cl := 1; cl < clocks; cl++ {
		if cl%4 == 3 {
			wantPushes--
		}
	}
	if pushes != wantPushes {
		t.Errorf("%d own pushes, want %d", pushes, wantPushes)
	}
}

// TestAssign_NoMessageAdded counts the frames every node sent in a BSP run
// with assignments at every release and in the same run without: the
// assignments ride on the releases and the taker's single push, so the
// counts are equal. (Progress reports, whose number follows the chunks a
// worker computes, and heartbeats and lease pings, whose number follows
// the wall clock, are off; every giver keeps part of its batch, so it still pushes.)
func TestAssign_NoMessageAdded(t *testing.T) {
	const workers, clocks, batch = 3, 5, 12
	run := func(layout func(int, func(epsp.WorkerID) int) []epsp.Assignment) (uint64, uint64, epsp.Stats) {
		pol := &assignPolicy{layout: layout}
		// Heartbeats (and the server pings that ride on them) and the
		// coordinator's lease pings to the servers follow the wall clock,
		// not the run: off, or a run slowed by a loaded machine sends
		// more frames (193 against 190, then 193 against 192 — two lease
		// pings — were seen; with both off, 160 runs at load 11 sent 189).
		c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(2),
			pstest.ProgressEvery(1<<20), pstest.Optimizer(store.SGD{LR: 0.1}), pstest.Policy(pol), pstest.Heartbeat(-1, 0),
			pstest.Lease(ps.LeaseConfig{Timeout: -1}))
		m := lsqModel{Dim: 6}
		_, err := c.Train(context.Background(), m, ps.ShardSampler{N: 600, Workers: workers}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{6}, Init: store.Zeros{}, Clocks: clocks})
		if err != nil {
			t.Fatal(err)
		}
		f, b := traffic(c)
		return f, b, c.Coordinator.Stats()
	}
	layout := func(c int, b func(epsp.WorkerID) int) []epsp.Assignment {
		g := epsp.WorkerID(c % workers)
		return []epsp.Assignment{
			{From: g, To: (g + 1) % workers, Clock: c, Lo: 4, Hi: 8},
			{From: g, To: (g + 2) % workers, Clock: c, Lo: 8, Hi: b(g)},
		}
	}
	with, withBytes, st := run(layout)
	without, withoutBytes, _ := run(nil)
	if st.SamplesAssigned != clocks*(batch-4) {
		t.Fatalf("%d samples assigned, want %d: the comparison is vacuous", st.SamplesAssigned, clocks*(batch-4))
	}
	t.Logf("frames: %d with assignments, %d without (%d clocks); bytes: %d with, %d without", with, without, clocks, withBytes, withoutBytes)
	if with != without {
		t.Errorf("frames sent: %d with assignments, %d without; want equal", with, without)
	}
}

// TestAssign_RandomLayouts is a property test over seeds: random worker
// speeds, chunk sizes, parallelism, batch sizes, network delays and piece
// layouts (givers keeping anything from nothing to all but one sample,
// tails split into up to three pieces among random takers). Every sample
// of every clock is computed and pushed exactly once; the final parameters
// of a least-squares model equal those of the same run without
// assignments (each BSP update averages the same samples; only float32
// summation order differs); and the frames sent are those of the run
// without assignments, less the pushes of givers that kept nothing.
func TestAssign_RandomLayouts(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 3
	}
	const dim, clocks = 6, 5
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 17))
		workers := 2 + rng.IntN(3)
		batch := 4 + rng.IntN(16)
		chunk := 1 + rng.IntN(4)
		par := 1 + rng.IntN(3)
		delays := make([]time.Duration, workers)
		for i := range delays {
			delays[i] = time.Duration(rng.IntN(400)) * time.Microsecond
		}
		// Even seeds count frames (progress reports off: their number
		// follows the chunks each worker computes); odd seeds report
		// progress every chunk.
		progress := 1
		if seed%2 == 0 {
			progress = 1 << 20
		}
		var mu sync.Mutex
		layout := randomLayout(rand.New(rand.NewPCG(seed, 99)), &mu, workers)
		pol := &assignPolicy{layout: layout}
		run := func(pol *assignPolicy) ([]float32, []event.Event, epsp.Stats, uint64) {
			rec := &pstest.Recorder{}
			c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(chunk),
				pstest.Parallelism(par), pstest.ProgressEvery(progress), pstest.Optimizer(store.SGD{LR: 0.05}), pstest.Observer(rec), pstest.Policy(pol))
			c.Net.SetDelay(0, 50*time.Microsecond)
			_, err := c.TrainWith(context.Background(), func(i int) ps.Model { return lsqModel{Dim: dim, Delay: delays[i]} },
				ps.ShardSampler{N: 997, Workers: workers}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{dim}, Init: store.Zeros{}, Clocks: clocks})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			frames := framesSent(c)
			return finalParams(t, c, dim), rec.Events(), c.Coordinator.Stats(), frames
		}
		got, events, st, with := run(pol)
		complete := make([]int, workers)
		for i := range complete {
			complete[i] = clocks
		}
		pstest.CheckExactlyOnce(t, events, complete)
		if st.SamplesAssigned == 0 {
			t.Fatalf("seed %d: nothing assigned; the check is vacuous", seed)
		}
		want, _, _, without := run(&assignPolicy{})
		if progress > 1 {
			// A giver that kept nothing pushes nothing: one admit and one
			// server push (request and reply each) fewer; nothing else
			// changes.
			emptied := 0
			for cl, as := range pol.assignments() {
				keep := map[epsp.WorkerID]int{}
				for _, a := range as {
					if k, ok := keep[a.From]; !ok || a.Lo < k {
						keep[a.From] = a.Lo
					}
				}
				for _, k := range keep {
					if k == 0 && cl < clocks {
						emptied++
					}
				}
			}
			if with+4*uint64(emptied) != without {
				t.Errorf("seed %d: %d frames with assignments (%d givers kept nothing), %d without", seed, with, emptied, without)
			}
			t.Logf("seed %d: %d frames with assignments, %d without (%d givers kept nothing)", seed, with, without, emptied)
		}
		for j := range want {
			if d := math.Abs(float64(got[j] - want[j])); d > 1e-5*max(1, math.Abs(float64(want[j]))) {
				t.Errorf("seed %d: param %d = %v with assignments, %v without", seed, j, got[j], want[j])
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d: %d workers, batch %d, chunk %d, p %d, delays %v", seed, workers, batch, chunk, par, delays)
		}
		t.Logf("seed %d: %d workers, batch %d, chunk %d, p %d: %d assignments, %d samples", seed, workers, batch, chunk, par, st.Assignments, st.SamplesAssigned)
	}
}

// TestAssign_ReactiveTransfers orders, at each worker's first progress
// report of a clock, a reactive transfer of the last two samples of what
// it computes of its own: a giver (which kept [0, keep)) gives [keep−2,
// keep) and accepts, a taker (which has assigned samples) refuses, since
// its tail is not its own. Every sample is still computed exactly once.
func TestAssign_ReactiveTransfers(t *testing.T) {
	const workers, clocks, batch = 3, 5, 16
	rec := &pstest.Recorder{}
	pol := &assignPolicy{
		layout: func(c int, b func(epsp.WorkerID) int) []epsp.Assignment {
			g := epsp.WorkerID(c % workers)
			return []epsp.Assignment{{From: g, To: (g + 1) % workers, Clock: c, Lo: 12, Hi: b(g)}}
		},
		transfer: func(v epsp.View, r epsp.ProgressReport, as []epsp.Assignment) []epsp.TransferOrder {
			for _, a := range as {
				to := (a.To + 1) % workers // the worker neither giving nor taking
				switch r.Worker {
				case a.From:
					return []epsp.TransferOrder{{From: a.From, To: to, Clock: r.Clock, Lo: a.Lo - 2, Hi: a.Lo}}
				case a.To:
					return []epsp.TransferOrder{{From: a.To, To: to, Clock: r.Clock, Lo: v.Batch(a.To) - 2, Hi: v.Batch(a.To)}}
				}
			}
			return nil
		},
	}
	c := pstest.NewCluster(t, pstest.Servers(2), pstest.Workers(workers), pstest.Batch(batch), pstest.Chunk(2),
		pstest.ProgressEvery(1), pstest.Optimizer(store.SGD{LR: 1}), pstest.Observer(rec), pstest.Policy(pol))
	m := &pstest.LedgerModel{Workers: workers, Clocks: clocks, Staleness: -1, Delay: func(epsp.WorkerID, int) time.Duration { return time.Millisecond }}
	n := workers * clocks
	if _, err := c.Train(context.Background(), m, pstest.LedgerSampler{Clocks: clocks}, ps.TrainConfig{Keys: []uint64{0}, Lens: []int{n}, Init: store.Zeros{}, Clocks: clocks}); err != nil {
		t.Fatal(err)
	}
	pstest.CheckExactlyOnce(t, rec.Events(), []int{clocks, clocks, clocks})
	for i, v := range finalParams(t, c, n) {
		if math.Abs(float64(v)-1.0/workers) > 1e-6 {
			t.Errorf("param %d = %v, want %v", i, v, 1.0/workers)
		}
	}
	as := pol.assignments()
	giverAcc, takerOrders := 0, 0
	for _, r := range pol.transferResults() {
		var a epsp.Assignment
		if len(as[r.Clock]) > 0 {
			a = as[r.Clock][0]
		}
		switch {
		case len(as[r.Clock]) == 0:
		case r.From == a.To:
			takerOrders++
			if r.Accepted {
				t.Errorf("clock %d: taker %d gave [%d,%d) of its own batch while owing assigned samples", r.Clock, r.From, r.Lo, r.Hi)
			}
		case r.From == a.From && r.Accepted:
			giverAcc++
			if r.Hi != a.Lo {
				t.Errorf("clock %d: giver %d gave [%d,%d), past its keep %d", r.Clock, r.From, r.Lo, r.Hi, a.Lo)
			}
		}
	}
	if giverAcc == 0 || takerOrders == 0 {
		t.Errorf("%d giver transfers accepted, %d taker orders answered: the check is vacuous", giverAcc, takerOrders)
	}
}
