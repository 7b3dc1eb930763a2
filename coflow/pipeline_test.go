package coflow_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// phase is one interval of a stepped test schedule: until Until (exclusive),
// the single flow gets Alloc (its Flow field is filled in).
type phase struct {
	Until time.Duration
	Alloc coflow.Allocation
}

// stepped gives the first flow of the first coflow the allocation of the
// phase now falls in, and asks to be woken at each phase boundary.
type stepped []phase

func (p stepped) Name() string { return "stepped" }
func (p stepped) NextWakeup(now time.Duration) (time.Duration, bool) {
	for _, ph := range p {
		if now < ph.Until {
			return ph.Until, true
		}
	}
	return 0, false
}
func (p stepped) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	f := s.Coflows[0].Flows[0]
	a := p[len(p)-1].Alloc
	for _, ph := range p {
		if now < ph.Until {
			a = ph.Alloc
			break
		}
	}
	if a.Rate == 0 {
		return nil
	}
	a.Flow = f.Ref
	return []coflow.Allocation{a}
}

// pipeCodec: ρ = 0.5, s = 1 GB/s, u = 2 GB/s per core; with one core each
// end and 125 MB/s on the wire the flow disposes at D = 250 MB/s (wire-bound).
var pipeCodec = coflow.CodecProfile{Name: "test", CompressSpeed: 1e9, DecompressSpeed: 2e9, Ratio: 0.5}

func pipeFabric() *coflow.Fabric {
	f := coflow.NewFabric(2, coflow.GigabitBytesPerSec).SetCores(4)
	f.Codecs = []coflow.CodecProfile{pipeCodec}
	return f
}

// chunkTime is one 64 KiB chunk through the three stages at rate r, one core
// each end: b/s + ρb/r + b/u.
func chunkTime(r float64) float64 {
	b := float64(coflow.DefaultChunkBytes)
	return b/pipeCodec.CompressSpeed + pipeCodec.Ratio*b/r + b/pipeCodec.DecompressSpeed
}

// TestSim_FillLagFollowsRates: a 1 GiB compressed flow runs for 1 s with
// 1 B/s on the wire and 1e-9 of a sender core (compression at 1 B/s), then
// at 125 MB/s with a whole core. Its pipeline fill must be re-derived when
// the rates change: it finishes within one chunk-time (at the new rates) of
// the fluid value 1 s + V/D, not after the ~9 h (ρ·b at 1 B/s) that the
// first phase's fill lag would take.
func TestSim_FillLagFollowsRates(t *testing.T) {
	const V = 1 << 30
	r := coflow.GigabitBytesPerSec
	sched := stepped{
		{Until: time.Second, Alloc: coflow.Allocation{Rate: 1, Codec: 1, SendCores: 1e-9, RecvCores: 1}},
		{Until: math.MaxInt64, Alloc: coflow.Allocation{Rate: r, Codec: 1, SendCores: 1, RecvCores: 1}},
	}
	sim, err := coflow.NewSim(coflow.DefaultConfig(), pipeFabric(), sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(oneFlow(V))
	if err != nil {
		t.Fatal(err)
	}
	fluid := 1 + V/(r/pipeCodec.Ratio)
	got := res.Coflows[0].CCT.Seconds()
	if math.Abs(got-fluid) > chunkTime(r) {
		t.Fatalf("CCT = %.6f s, want %.6f s ± one chunk-time %.6f s", got, fluid, chunkTime(r))
	}
}

// TestSim_NoRefillOnResume: a compressed flow paused for 1 s and resumed
// with the same codec does not fill its pipeline again: it finishes at
// V/D + L + 1 s, with L the one fill lag of the package doc (Config).
func TestSim_NoRefillOnResume(t *testing.T) {
	const V = 1e9
	r := coflow.GigabitBytesPerSec
	run := coflow.Allocation{Rate: r, Codec: 1, SendCores: 1, RecvCores: 1}
	sched := stepped{
		{Until: time.Second, Alloc: run},
		{Until: 2 * time.Second, Alloc: coflow.Allocation{}},
		{Until: math.MaxInt64, Alloc: run},
	}
	sim, err := coflow.NewSim(coflow.DefaultConfig(), pipeFabric(), sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(oneFlow(V))
	if err != nil {
		t.Fatal(err)
	}
	D := r / pipeCodec.Ratio
	b := float64(coflow.DefaultChunkBytes)
	lag := chunkTime(r) - b/D
	want := V/D + lag + 1
	if got := res.Coflows[0].CCT.Seconds(); math.Abs(got-want) > 2e-9 {
		t.Fatalf("CCT = %.9f s, want %.9f s (one fill of %.6f s)", got, want, lag)
	}
}

// TestSim_RefillOnCodecChange: switching codec (1 → 2 → 1 here, through a
// raw interval) does restart the pipeline; each compressed start pays one
// fill lag.
func TestSim_RefillOnCodecChange(t *testing.T) {
	const V = 1e9
	r := coflow.GigabitBytesPerSec
	run := coflow.Allocation{Rate: r, Codec: 1, SendCores: 1, RecvCores: 1}
	sched := stepped{
		{Until: time.Second, Alloc: run},
		{Until: 2 * time.Second, Alloc: coflow.Allocation{Rate: r}},
		{Until: math.MaxInt64, Alloc: run},
	}
	sim, err := coflow.NewSim(coflow.DefaultConfig(), pipeFabric(), sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(oneFlow(V))
	if err != nil {
		t.Fatal(err)
	}
	D := r / pipeCodec.Ratio
	b := float64(coflow.DefaultChunkBytes)
	lag := chunkTime(r) - b/D
	// Disposed by 2 s: D·(1 − lag) compressed, then r raw for 1 s.
	left := V - D*(1-lag) - r
	want := 2 + lag + left/D
	if got := res.Coflows[0].CCT.Seconds(); math.Abs(got-want) > 2e-9 {
		t.Fatalf("CCT = %.9f s, want %.9f s", got, want)
	}
}

// TestSim_StagedRelease: a later stage is released at its parent's finish
// plus ReleaseDelay plus ReleasePerWireByte × the parent's wire bytes, and
// its CCT counts from that release.
func TestSim_StagedRelease(t *testing.T) {
	cfs := []coflow.Coflow{
		{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 125e6}}},
		{ID: 2, Parent: 1, ReleaseDelay: 2 * time.Second, ReleasePerWireByte: 1e-8, Arrival: time.Hour,
			Flows: []coflow.Flow{{Src: 1, Dst: 0, Bytes: 250e6}}},
		{ID: 3, Arrival: 3 * time.Second, Flows: []coflow.Flow{{Src: 2, Dst: 3, Bytes: 125e6}}},
	}
	sched, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	sim, err := coflow.NewSim(coflow.DefaultConfig(), coflow.NewFabric(4, coflow.GigabitBytesPerSec), sched)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(cfs)
	if err != nil {
		t.Fatal(err)
	}
	// Parent done at 1 s; release at 1 + 2 + 1.25 = 4.25 s; 2 s of transfer.
	c := res.Coflows[1]
	if c.Arrival != 4250*time.Millisecond || c.CCT != 2*time.Second || c.Finish != 6250*time.Millisecond {
		t.Fatalf("stage 2: arrival %v CCT %v finish %v, want 4.25s 2s 6.25s", c.Arrival, c.CCT, c.Finish)
	}
	if res.Coflows[2].CCT != time.Second {
		t.Fatalf("independent coflow CCT %v, want 1s", res.Coflows[2].CCT)
	}
	bad := []coflow.Coflow{{ID: 1, Parent: 2, Flows: cfs[0].Flows}, cfs[0]}
	if _, err := sim.Run(bad); !errors.Is(err, coflow.ErrInvalidCoflow) {
		t.Fatalf("parent after child: %v", err)
	}
}

// TestSim_CoalesceFlowEvents: with coalescing, a flow completion soon after
// the last call leaves the freed capacity idle until last call + Δ.
func TestSim_CoalesceFlowEvents(t *testing.T) {
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 1e6}, {Src: 0, Dst: 2, Bytes: 10e6}}}}
	for _, tc := range []struct {
		coalesce time.Duration
		want     time.Duration
		calls    int
	}{
		{0, 88 * time.Millisecond, 2},                       // 16 ms at 62.5 MB/s each, then 125 MB/s
		{100 * time.Millisecond, 130 * time.Millisecond, 2}, // 62.5 MB/s until 100 ms
	} {
		cfg := coflow.DefaultConfig()
		cfg.CoalesceFlowEvents = tc.coalesce
		sim, err := coflow.NewSim(cfg, coflow.NewFabric(3, coflow.GigabitBytesPerSec), coflow.NewFair())
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(cfs)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Coflows[0].CCT; got != tc.want || res.Calls != tc.calls {
			t.Fatalf("coalesce %v: CCT %v calls %d, want %v and %d", tc.coalesce, got, res.Calls, tc.want, tc.calls)
		}
	}
}
