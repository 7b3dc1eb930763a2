package predictor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// regimeSeries returns a synthetic series whose compress speed is a
// per-class level times log-normal noise (σ = 0.3 in log space), with the
// class switching every 30–60 steps. Decompress speed is 3× and the ratio
// 0.1·class with the same noise.
func regimeSeries(n int, seed uint64) []Measurement {
	rng := rand.New(rand.NewPCG(seed, 1))
	levels := []float64{0, 4e8, 2e9, 8e8, 1.5e10, 3e9}
	out := make([]Measurement, n)
	class, left := 1, 0
	for i := range out {
		if left == 0 {
			class = 1 + (class+rng.IntN(4))%5
			left = 30 + rng.IntN(31)
		}
		left--
		s := levels[class] * math.Exp(0.3*rng.NormFloat64())
		out[i] = Measurement{CompressSpeed: s, DecompressSpeed: 3 * s, Ratio: 0.1 * float64(class) * math.Exp(0.05*rng.NormFloat64()),
			Class: class, Contention: 0}
	}
	return out
}

// smallRNN is a configuration small enough for fast tests.
func smallRNN(cell Cell) Config {
	return Config{RNN: RNNConfig{Cell: cell, Hidden: 8, Window: 8, Epochs: 15, Seed: 42}}
}

func TestRNN_FitBeatsLastValueOnClassRegimes(t *testing.T) {
	// With i.i.d. noise around a per-class level, the best predictor is the
	// class level (its MAPE is E|e^{0.3ε}−1| ≈ 0.25 when centred), while
	// LastValue pays the noise twice (≈ 0.35). A network that reads the
	// class one-hot and the EWMA level must beat LastValue.
	s := regimeSeries(1500, 9)
	from := 1000
	last := NewLastValue(Estimate{})
	if err := Warm(last, s[:from]); err != nil {
		t.Fatal(err)
	}
	rl := Evaluate(last, s, from, 5)
	for _, cell := range []Cell{CellLSTM, CellGRU} {
		t.Run(cell.String(), func(t *testing.T) {
			cfg := smallRNN(cell)
			cfg.RNN.Epochs = 40
			p, err := NewRNN(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := Warm(p, s[:from]); err != nil {
				t.Fatal(err)
			}
			r := Evaluate(p, s, from, 5)
			t.Logf("%s (%v, %d params) MAPE %.6f, LastValue %.3f", cell, p.Network().Cell, len(p.Network().Params), r.MAPE, rl.MAPE)
			if !(r.MAPE < rl.MAPE) {
				t.Fatalf("%s MAPE %.3f not below LastValue's %.3f", cell, r.MAPE, rl.MAPE)
			}
		})
	}
}

func TestRNN_SaveLoadBitIdentical(t *testing.T) {
	s := regimeSeries(400, 3)
	for _, cell := range []Cell{CellLSTM, CellGRU} {
		t.Run(cell.String(), func(t *testing.T) {
			p, err := NewRNN(smallRNN(cell))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fit(s[:300]); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := p.Network().Save(&buf); err != nil {
				t.Fatal(err)
			}
			n, err := Load(&buf)
			if err != nil {
				t.Fatal(err)
			}
			cfg := smallRNN(cell)
			cfg.RNN.Model = n
			q, err := NewRNN(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p.Reset()
			// Online fine-tuning stays on: both must also update identically.
			for i, m := range s {
				p.Observe(m)
				q.Observe(m)
				if a, b := p.Predict(), q.Predict(); a != b {
					t.Fatalf("step %d: original %+v, loaded %+v", i, a, b)
				}
			}
			for i := range p.Network().Params {
				if math.Float64bits(p.Network().Params[i]) != math.Float64bits(q.Network().Params[i]) {
					t.Fatalf("param %d differs after identical online updates", i)
				}
			}
		})
	}
}

func TestLoad_Errors(t *testing.T) {
	n := NewNetwork(CellLSTM, featFixed+8, 4, 3, rand.NewPCG(1, 2))
	n.Norm = Norm{NumClasses: 8, Alpha: 0.3, Std: [4]float64{1, 1, 1, 1}}
	good, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadMagic},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"json", []byte(`{"cell":"lstm","hidden":16}`), ErrBadMagic},
		{"version", mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 2); return b }), ErrVersion},
		{"truncated", good[:len(good)-10], ErrCorrupt},
		{"bitflip", mod(func(b []byte) []byte { b[200] ^= 1; return b }), ErrCorrupt},
		{"huge", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[104:], 1<<40); return b }), ErrCorrupt},
		{"trailing", append(append([]byte(nil), good...), 0), ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Network
			if err := m.UnmarshalBinary(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
		})
	}
	var m Network
	if err := m.UnmarshalBinary(good); err != nil {
		t.Fatalf("good model: %v", err)
	}
}

func TestRNN_FitDeterministic(t *testing.T) {
	s := regimeSeries(300, 5)
	var params [2][]float64
	for i := range params {
		p, err := NewRNN(smallRNN(CellLSTM))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Fit(s); err != nil {
			t.Fatal(err)
		}
		params[i] = p.Network().Params
	}
	for i := range params[0] {
		if params[0][i] != params[1][i] {
			t.Fatalf("param %d differs between two fits with the same seed", i)
		}
	}
}

func TestRNN_UntrainedAnswersEWMAUntilWarm(t *testing.T) {
	cfg := Config{Alpha: 0.5, RNN: RNNConfig{WarmUp: 20, Hidden: 4, Window: 4}}
	p, err := NewRNN(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEWMA(0.5, Estimate{})
	s := regimeSeries(30, 1)
	for i, m := range s {
		if i < 20 && p.Predict() != e.Predict() {
			t.Fatalf("step %d: RNN %+v, EWMA %+v", i, p.Predict(), e.Predict())
		}
		p.Observe(m)
		e.Observe(m)
	}
	if p.Predict() == e.Predict() {
		t.Fatal("after warm-up the network should answer, not EWMA")
	}
}

func TestRNN_FitTooShort(t *testing.T) {
	p, err := NewRNN(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fit(regimeSeries(10, 1)); !errors.Is(err, ErrTooShort) {
		t.Fatalf("error = %v, want ErrTooShort", err)
	}
}

func TestRNN_ObserveDoesNotAllocate(t *testing.T) {
	p, err := NewRNN(Config{RNN: RNNConfig{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := regimeSeries(200, 2)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		p.Observe(s[i%len(s)])
		_ = p.Predict()
		i++
	})
	if allocs != 0 {
		t.Fatalf("Observe+Predict allocates %v times per call", allocs)
	}
}

func TestNew_RNNModelShapeMismatch(t *testing.T) {
	n := NewNetwork(CellLSTM, 5, 4, 3, rand.NewPCG(1, 1))
	if _, err := New(NameLSTM, Config{RNN: RNNConfig{Model: n}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("error = %v, want ErrConfig", err)
	}
}
