package fvdf_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/transport"
)

// starvedFabric: three ports of capBps; one lz4-like codec (ρ 0.5, 100 MB/s
// per core compressing, 1 GB/s decompressing); port 0 has 0.5 cores, the
// others 10.
func starvedFabric(capBps float64) *coflow.Fabric {
	fab := coflow.NewFabric(3, capBps)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 1e8, DecompressSpeed: 1e9, Ratio: 0.5}}
	fab.Ports[0].Cores, fab.Ports[1].Cores, fab.Ports[2].Cores = 0.5, 10, 10
	return fab
}

func rates(al []coflow.Allocation) map[coflow.FlowRef]coflow.Allocation {
	m := map[coflow.FlowRef]coflow.Allocation{}
	for _, a := range al {
		m[a.Flow] = a
	}
	return m
}

func near(x, want float64) bool { return x >= want*(1-1e-9) && x <= want*(1+1e-9) }

// TestCompressor_ReoffersFreedBandwidth: flows A (0→2) and B (1→2) of one
// coflow share port 2's egress; SEBF's MADD gives each half of it. Port 0
// has half the cores A needs to compress at that rate, so A is slowed to
// a quarter of the port; B, whose ends have cores to spare, must get the
// egress A cannot use. (The study's wrapper left B at half the port.)
func TestCompressor_ReoffersFreedBandwidth(t *testing.T) {
	const capBps = 1e8
	fab := starvedFabric(capBps)
	st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9), coflowtest.F(1, 2, 1e9)).State()
	for _, tc := range []struct {
		name string
		cfg  fvdf.CompressorConfig
	}{
		{"lz4", fvdf.CompressorConfig{Codec: 1}},
		{"policy", fvdf.CompressorConfig{Codecs: []transport.Codec{transport.CodecLZ4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
			if err != nil {
				t.Fatal(err)
			}
			c, err := fvdf.NewCompressor(sebf, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			al := c.Schedule(0, st)
			if err := coflowtest.CheckAllocation(0, st, al); err != nil {
				t.Fatal(err)
			}
			r := rates(al)
			a, b := r[coflow.FlowRef{Flow: 0}], r[coflow.FlowRef{Flow: 1}]
			// A: wire r needs r/ρ/s = r/5e7 cores at port 0, which has 0.5.
			if !near(a.Rate, 0.25*capBps) || a.Codec != 1 {
				t.Fatalf("A: %+v, want lz4 at its core bound %v", a, 0.25*capBps)
			}
			if !near(b.Rate, capBps-a.Rate) || b.Codec != 1 || !near(b.SendCores, b.Rate/0.5/1e8) {
				t.Fatalf("B: %+v, want lz4 at the egress A cannot use, %v, with its cores", b, capBps-a.Rate)
			}
		})
	}
}

// TestCompressor_PausedFlowTakesFreedBandwidth: SEBF serves the small
// coflow's flow A (0→2) alone at port 2's full egress and pauses the large
// coflow's B (1→2); A, core-starved at port 0, runs at a quarter of it and
// B, paused by SEBF, gets the rest. Without core shortage (port 0 with
// 10 cores) the output is SEBF's allocation with lz4 and its cores added,
// rates scaled by the validator's 1e-12 margin, and B stays paused.
func TestCompressor_PausedFlowTakesFreedBandwidth(t *testing.T) {
	const capBps = 1e8
	for _, tc := range []struct {
		name   string
		cores0 float64
		wantA  float64
		wantB  float64
	}{
		{"starved", 0.5, 0.25 * capBps, 0.75 * capBps},
		{"enough cores", 10, capBps, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fab := starvedFabric(capBps)
			fab.Ports[0].Cores = tc.cores0
			st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).Coflow(2, 0, coflowtest.F(1, 2, 5e9)).State()
			sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
			if err != nil {
				t.Fatal(err)
			}
			c, err := fvdf.NewCompressor(sebf, fvdf.CompressorConfig{Codec: 1})
			if err != nil {
				t.Fatal(err)
			}
			for call := range 2 { // the second call may reuse the first's output
				al := c.Schedule(0, st)
				if err := coflowtest.CheckAllocation(0, st, al); err != nil {
					t.Fatal(err)
				}
				r := rates(al)
				a, b := r[coflow.FlowRef{Coflow: 0}], r[coflow.FlowRef{Coflow: 1}]
				if !near(a.Rate, tc.wantA) || a.Codec != 1 {
					t.Fatalf("call %d: A %+v, want rate %v", call, a, tc.wantA)
				}
				if tc.wantB == 0 && b.Rate != 0 || tc.wantB > 0 && (!near(b.Rate, tc.wantB) || b.Codec != 1 || b.RecvCores <= 0) {
					t.Fatalf("call %d: B %+v, want lz4 at %v", call, b, tc.wantB)
				}
			}
		})
	}
}

func TestNewCompressor_Errors(t *testing.T) {
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	for _, tc := range []struct {
		inner coflow.Scheduler
		cfg   fvdf.CompressorConfig
	}{
		{nil, fvdf.CompressorConfig{Codec: 1}},
		{sebf, fvdf.CompressorConfig{}},
		{sebf, fvdf.CompressorConfig{Codec: -1}},
		{sebf, fvdf.CompressorConfig{Codec: 1, Overhead: -1}},
	} {
		if _, err := fvdf.NewCompressor(tc.inner, tc.cfg); !errors.Is(err, fvdf.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", tc.cfg, err)
		}
	}
}

// halfSpeed estimates every codec at half the fabric's nominal speeds.
type halfSpeed struct{}

func (halfSpeed) Estimate(_ time.Duration, f *coflow.Fabric, k int) coflow.CodecProfile {
	p := f.Codec(k)
	p.CompressSpeed /= 2
	p.DecompressSpeed /= 2
	return p
}

// TestCompressor_Estimator: with an Estimator the wrapper reserves cores
// for the estimated speeds (half the nominal: twice the cores), and
// without one for the fabric's.
func TestCompressor_Estimator(t *testing.T) {
	fab := starvedFabric(1e8)
	fab.Ports[0].Cores = 10
	st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).State()
	for _, tc := range []struct {
		est       fvdf.Estimator
		wantCores float64 // sender cores at the full port: 1e8/0.5/s
	}{{nil, 2}, {halfSpeed{}, 4}} {
		sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
		c, err := fvdf.NewCompressor(sebf, fvdf.CompressorConfig{Codec: 1, Estimator: tc.est})
		if err != nil {
			t.Fatal(err)
		}
		al := c.Schedule(0, st)
		if len(al) != 1 || !near(al[0].SendCores, tc.wantCores) || !near(al[0].RecvCores, tc.wantCores/10) {
			t.Fatalf("estimator %T: %+v, want %v sender cores", tc.est, al, tc.wantCores)
		}
	}
}

// TestCompressor_NoStaleReuse: the inner allocation is the same in two
// calls (SEBF serves A alone), but in the second a coflow has arrived
// whose paused flow can take what A frees: the wrapper must not return
// its previous output.
func TestCompressor_NoStaleReuse(t *testing.T) {
	fab := starvedFabric(1e8)
	one := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).State()
	two := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).Coflow(2, 0, coflowtest.F(1, 2, 5e9)).State()
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	c, err := fvdf.NewCompressor(sebf, fvdf.CompressorConfig{Codec: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		st    *coflow.State
		wantB float64
	}{{one, 0}, {two, 0.75e8}, {two, 0.75e8}, {one, 0}} {
		al := c.Schedule(0, tc.st)
		if err := coflowtest.CheckAllocation(0, tc.st, al); err != nil {
			t.Fatal(err)
		}
		b := rates(al)[coflow.FlowRef{Coflow: 1}]
		if tc.wantB == 0 && b.Rate != 0 || tc.wantB > 0 && !near(b.Rate, tc.wantB) {
			t.Fatalf("call %d: B %+v, want rate %v", i, b, tc.wantB)
		}
	}
}

// TestCompressor_WholeCores: with whole codec workers (⌊free cores⌋ per
// port) a flow takes ⌈need⌉ workers at each end, is sent raw where an end
// has none left, and a flow capped by its workers frees wire that a
// paused flow with workers takes. Each case fails with fractional cores
// (the rounding dropped): there A would compress on 0.9 or 1.5 cores.
func TestCompressor_WholeCores(t *testing.T) {
	const capBps = 1e8
	for _, tc := range []struct {
		name         string
		cores0       float64
		st           func(*coflow.Fabric) *coflow.State
		wantA, wantB coflow.Allocation // Flow unset: compared by rate, codec, cores
	}{
		// A (0→2) and B (1→2) share port 2's egress; port 0 has no whole
		// core: A goes raw at its MADD rate, B compresses on 1 + 1 workers
		// (it needs 1 sender and 0.1 receiver core at 5e7 B/s of wire).
		{"no worker: raw", 0.9, func(f *coflow.Fabric) *coflow.State {
			return coflowtest.NewState(f).Coflow(1, 0, coflowtest.F(0, 2, 1e9), coflowtest.F(1, 2, 1e9)).State()
		}, coflow.Allocation{Rate: 0.5 * capBps}, coflow.Allocation{Rate: 0.5 * capBps, Codec: 1, SendCores: 1, RecvCores: 1}},
		// SEBF serves A alone at the full port; A needs 2 sender workers and
		// gets port 0's one: half the wire. The larger coflow's B, paused
		// by SEBF, takes the other half on 1 + 1 workers.
		{"capped: freed wire re-offered", 1.5, func(f *coflow.Fabric) *coflow.State {
			return coflowtest.NewState(f).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).Coflow(2, 0, coflowtest.F(1, 2, 5e9)).State()
		}, coflow.Allocation{Rate: 0.5 * capBps, Codec: 1, SendCores: 1, RecvCores: 1}, coflow.Allocation{Rate: 0.5 * capBps, Codec: 1, SendCores: 1, RecvCores: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fab := starvedFabric(capBps)
			fab.Ports[0].Cores = tc.cores0
			st := tc.st(fab)
			sebf, err := coflow.NewSEBF(coflow.DefaultOrderedConfig())
			if err != nil {
				t.Fatal(err)
			}
			c, err := fvdf.NewCompressor(sebf, fvdf.CompressorConfig{Codec: 1, WholeCores: true})
			if err != nil {
				t.Fatal(err)
			}
			for call := range 2 { // the second call may reuse the first's output
				al := c.Schedule(0, st)
				if err := coflowtest.CheckAllocation(0, st, al); err != nil {
					t.Fatal(err)
				}
				var a, b coflow.Allocation
				for _, x := range al {
					if x.Flow.Coflow == 0 && x.Flow.Flow == 0 {
						a = x
					} else {
						b = x
					}
				}
				for _, p := range []struct {
					name      string
					got, want coflow.Allocation
				}{{"A", a, tc.wantA}, {"B", b, tc.wantB}} {
					if !near(p.got.Rate, p.want.Rate) || p.got.Codec != p.want.Codec || p.got.SendCores != p.want.SendCores || p.got.RecvCores != p.want.RecvCores {
						t.Fatalf("call %d: %s %+v, want %+v", call, p.name, p.got, p.want)
					}
				}
			}
		})
	}
}

// TestNewBaseline_WholeCores: BaselineConfig.WholeCores reaches FVDF's
// Config and the always-compress wrapper (whole cores reserved).
func TestNewBaseline_WholeCores(t *testing.T) {
	fab := starvedFabric(1e8)
	fab.Ports[0].Cores = 10
	st := coflowtest.NewState(fab).Coflow(1, 0, coflowtest.F(0, 2, 1e9)).State()
	for _, name := range []string{"sebf+lz4", "sebf-rho", "fvdf", "sebf-order+fvdf"} {
		b, err := fvdf.ParseBaseline(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fvdf.NewBaseline(b, fvdf.BaselineConfig{Codecs: []transport.Codec{transport.CodecLZ4}, WholeCores: true})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := s.(*fvdf.Scheduler); ok && !f.Config().WholeCores {
			t.Fatalf("%s: Config.WholeCores not set", name)
		}
		compressed := false
		for _, a := range s.Schedule(0, st) {
			if a.Codec == coflow.Raw {
				continue
			}
			compressed = true
			if a.SendCores != float64(int(a.SendCores)) || a.RecvCores != float64(int(a.RecvCores)) {
				t.Fatalf("%s: fractional cores %+v", name, a)
			}
		}
		if !compressed {
			t.Fatalf("%s: nothing compressed", name)
		}
	}
}
