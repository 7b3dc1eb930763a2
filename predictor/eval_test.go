package predictor

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEvaluate_HandComputed(t *testing.T) {
	// LastValue on speeds 100, 200, 100, 100 with a class change at t = 2,
	// scored from t = 1 with span 1:
	//   t=1: pred 100, actual 200 → APE 0.5 (steady)
	//   t=2: pred 200, actual 100 → APE 1.0 (regime change at t=2)
	//   t=3: pred 100, actual 100 → APE 0   (steady)
	s := []Measurement{
		{CompressSpeed: 100, Class: 1}, {CompressSpeed: 200, Class: 1},
		{CompressSpeed: 100, Class: 2}, {CompressSpeed: 100, Class: 2},
	}
	p := NewLastValue(Estimate{})
	Replay(p, s[:1])
	r := Evaluate(p, s, 1, 1)
	want := Result{N: 3, MAPE: 0.5, RMSE: math.Sqrt(20000.0 / 3), RegimeN: 1, RegimeMAPE: 1, SteadyMAPE: 0.25}
	if r.N != want.N || r.RegimeN != want.RegimeN || !close(r.MAPE, want.MAPE, tol) || !close(r.RMSE, want.RMSE, tol) ||
		!close(r.RegimeMAPE, want.RegimeMAPE, tol) || !close(r.SteadyMAPE, want.SteadyMAPE, tol) {
		t.Fatalf("Evaluate = %+v, want %+v", r, want)
	}
	if !math.IsNaN(r.RatioMAPE) {
		t.Fatalf("RatioMAPE with no ratios = %v, want NaN", r.RatioMAPE)
	}
}

func TestTuneAlpha_PrefersSmoothingOnNoise(t *testing.T) {
	// i.i.d. noise around a constant: heavy smoothing wins; a steady
	// geometric trend (+10 % per step): every α < 1 lags, α = 1 wins.
	noise := regimeSeries(600, 4)
	for i := range noise {
		noise[i].Class = 1
		noise[i].CompressSpeed = 1e9 * math.Exp(0.3*math.Sin(float64(i*i)))
	}
	a, err := TuneAlpha(noise, 0.3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a > 0.2 {
		t.Fatalf("alpha on noise = %v, want <= 0.2", a)
	}
	walk := make([]Measurement, 300)
	v := 1e9
	for i := range walk {
		v *= 1.1
		walk[i] = Measurement{CompressSpeed: v}
	}
	if a, err = TuneAlpha(walk, 0.3, []float64{0.1, 0.5, 1}); err != nil || a != 1 {
		t.Fatalf("alpha on a trending walk = %v (err %v), want 1", a, err)
	}
	if _, err := TuneAlpha(walk[:2], 0.3, nil); !errors.Is(err, ErrTooShort) {
		t.Fatalf("short series error = %v", err)
	}
}

func TestRNN_FineTuneReducesWindowLoss(t *testing.T) {
	// Repeated updates on the same latest window must drive its loss down
	// (Adam on a fixed objective with a small step). A wrong gradient sign or
	// a window misaligned with its targets would raise it or leave it flat;
	// 0.75 is a loose bound (50 steps of 0.01 remove about half of it).
	cfg := Config{RNN: RNNConfig{Hidden: 8, Window: 8, OnlineSteps: -1, WarmUp: 1, OnlineRate: 0.01, Seed: 3}}
	p, err := NewRNN(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.FineTune() {
		t.Fatal("FineTune with no observations should report false")
	}
	for _, m := range regimeSeries(40, 8) {
		p.Observe(m)
	}
	loss := func() float64 {
		end, W := p.count-1, p.cfg.Window
		first := end - W
		R := W + 1
		n := p.net
		I, O, H := n.In, n.Out, n.Hidden
		for j := 0; j < W; j++ {
			s := (first + j) % R
			copy(p.winX[j*I:(j+1)*I], p.ringX[s*I:(s+1)*I])
			copy(p.winT[j*O:(j+1)*O], p.ringT[s*O:(s+1)*O])
			copy(p.winM[j*O:(j+1)*O], p.ringM[s*O:(s+1)*O])
		}
		s0 := first % R
		ys := p.tape.Forward(p.winX, W, p.ringH[s0*H:(s0+1)*H], p.ringC[s0*H:(s0+1)*H])
		return p.lossGrad(ys, p.winT, p.winM, p.dys, W)
	}
	before := loss()
	for i := 0; i < 50; i++ {
		if !p.FineTune() {
			t.Fatal("FineTune reported no window after 40 observations")
		}
	}
	if after := loss(); !(after < 0.75*before) {
		t.Fatalf("window loss %v → %v after 50 updates, want below 0.75×", before, after)
	}
}

func FuzzReadCSV(f *testing.F) {
	f.Add(CSVHeader + "\n1,lz4,2,sparse,0,1000,100,2000,500,2100,510,5e+08,2e+09,0.1\n")
	f.Add(CSVHeader + "\n1,lz4,2,sparse,NaN,1000,100,2000,500,2100,510,5e+08,2e+09,0.1\n")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := ReadCSV(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCSV) {
				t.Fatalf("error %v does not wrap ErrCSV", err)
			}
			return
		}
		for _, r := range recs {
			m := r.Measurement()
			if math.IsNaN(m.CompressSpeed) || m.CompressSpeed < 0 || math.IsNaN(m.Contention) {
				t.Fatalf("accepted row gives measurement %+v", m)
			}
		}
	})
}

func FuzzLoad(f *testing.F) {
	n := NewNetwork(CellGRU, featFixed+2, 2, 3, rand.NewPCG(1, 1))
	n.Norm = Norm{NumClasses: 2, Alpha: 0.3, Std: [4]float64{1, 1, 1, 1}}
	good, _ := n.MarshalBinary()
	f.Add(good)
	f.Add(good[:50])
	f.Add([]byte("FLCNRNN\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Load(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if err := m.check(); err != nil {
			t.Fatalf("Load accepted an inconsistent network: %v", err)
		}
	})
}
