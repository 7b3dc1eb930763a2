package coflow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// TestSim_Calibration checks the bed-calibration constants against their
// closed forms: a raw flow of V at rate r with wire efficiency e takes
// V/(r·e); a compressed one (pipelined, fluid) at min(k_s·s, r·e/ρ,
// k_r·u), its codec stages times η with a codec core efficiency η; a window W per round trip T caps either at W/T; CompletionDelay adds itself to every CCT and nothing else; and
// the zero values reproduce the uncalibrated run exactly.
func TestSim_Calibration(t *testing.T) {
	const V = 1e9
	codec := coflow.CodecProfile{Name: "test", CompressSpeed: 100e6, DecompressSpeed: 200e6, Ratio: 0.5}
	run := func(cfg coflow.Config, c int) *coflow.Result {
		t.Helper()
		fab := coflow.NewFabric(2, coflow.GigabitBytesPerSec).SetCores(4)
		fab.Codecs = []coflow.CodecProfile{codec}
		f := &fixed{rate: 50e6, codec: c}
		if c != coflow.Raw {
			f.ks, f.kr = 2, 2
		}
		sim, err := coflow.NewSim(cfg, fab, f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(oneFlow(V))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	base := coflow.Config{Pipelining: true}
	for _, c := range []int{coflow.Raw, 1} {
		cal := base
		cal.WireEfficiency = 0.8
		got := run(cal, c).Coflows[0].CCT.Seconds()
		want := V / (50e6 * 0.8) // raw: 25 s
		if c == 1 {
			want = V / min(200e6, 50e6*0.8/0.5, 400e6) // transmit binds: 12.5 s
		}
		if !near(got, want) {
			t.Errorf("codec %d, wire efficiency 0.8: CCT %.9f s, want %.9f s", c, got, want)
		}
		cal = base
		cal.CompletionDelay = 7 * time.Millisecond
		plain, delayed := run(base, c), run(cal, c)
		if d := delayed.Coflows[0].CCT - plain.Coflows[0].CCT; d != 7*time.Millisecond {
			t.Errorf("codec %d: completion delay added %v, want 7ms", c, d)
		}
		if delayed.WireBytes != plain.WireBytes || delayed.Coflows[0].Start != plain.Coflows[0].Start {
			t.Errorf("codec %d: completion delay changed the run beyond the finish", c)
		}
		win := base
		win.FlowWindowBytes, win.ChunkRoundTrip = 1e6, 100*time.Millisecond // cap 10 MB/s
		if got := run(win, c).Coflows[0].CCT.Seconds(); !near(got, V/10e6) {
			t.Errorf("codec %d, window 1 MB per 100 ms: CCT %.9f s, want %.9f s", c, got, V/10e6)
		}
		win.ChunkRoundTrip = time.Millisecond // cap 1 GB/s: the allocation binds
		if got, want := run(win, c).Coflows[0].CCT, run(base, c).Coflows[0].CCT; got != want {
			t.Errorf("codec %d, a window that does not bind: CCT %v, want %v", c, got, want)
		}
		if c == 1 {
			eta := base
			eta.CodecCoreEfficiency = 0.25 // compress 50 MB/s binds
			if got := run(eta, c).Coflows[0].CCT.Seconds(); !near(got, V/50e6) {
				t.Errorf("codec core efficiency 0.25: CCT %.9f s, want %.9f s", got, V/50e6)
			}
		}
		one := base
		one.WireEfficiency = 1
		if a, b := run(base, c), run(one, c); a.Coflows[0].CCT != b.Coflows[0].CCT || a.WireBytes != b.WireBytes {
			t.Errorf("codec %d: wire efficiency 0 and 1 differ: %v vs %v", c, a.Coflows[0].CCT, b.Coflows[0].CCT)
		}
	}
	for _, bad := range []coflow.Config{{WireEfficiency: -0.1}, {WireEfficiency: 1.5}, {CompletionDelay: -time.Millisecond},
		{FlowWindowBytes: 1e6}, {ChunkRoundTrip: time.Millisecond}, {FlowWindowBytes: -1, ChunkRoundTrip: time.Millisecond},
		{CodecCoreEfficiency: -0.5}, {CodecCoreEfficiency: 2}} {
		if err := bad.Validate(); !errors.Is(err, coflow.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}
