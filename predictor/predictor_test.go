package predictor

import (
	"errors"
	"math"
	"testing"
)

// tol is the tolerance for float comparisons of values computed by a few
// arithmetic operations (a handful of ulps of relative error).
const tol = 1e-12

func close(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestPredictors_DefaultBeforeObservation(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			def := Estimate{CompressSpeed: 123e6, DecompressSpeed: 456e6, Ratio: 0.5}
			p, err := New(name, Config{Default: def})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Predict(); got != def {
				t.Fatalf("Predict() before Observe = %+v, want %+v", got, def)
			}
		})
	}
}

func TestNew_Errors(t *testing.T) {
	tests := []struct {
		name string
		pred string
		cfg  Config
		want error
	}{
		{"unknown", "nope", Config{}, ErrUnknownPredictor},
		{"alpha>1", NameEWMA, Config{Alpha: 1.5}, ErrConfig},
		{"alpha<0", NameEWMA, Config{Alpha: -0.1}, ErrConfig},
		{"ratio", NameLastValue, Config{Default: Estimate{Ratio: 100}}, ErrConfig},
		{"speed", NameLastValue, Config{Default: Estimate{CompressSpeed: -1}}, ErrConfig},
		{"ar order", NameAR, Config{AROrder: -1}, ErrConfig},
		{"ar history", NameAR, Config{AROrder: 8, ARHistory: 10}, ErrConfig},
		{"rnn hidden", NameEWMA, Config{RNN: RNNConfig{Hidden: -3}}, ErrConfig},
		{"rnn valfrac", NameEWMA, Config{RNN: RNNConfig{ValFrac: 0.95}}, ErrConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.pred, tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New(%q) error = %v, want %v", tc.pred, err, tc.want)
			}
		})
	}
}

func TestEWMA_Recurrence(t *testing.T) {
	p := NewEWMA(0.25, Estimate{})
	xs := []float64{100, 200, 50, 50, 400}
	want := xs[0]
	for i, x := range xs {
		p.Observe(Measurement{CompressSpeed: x, DecompressSpeed: 2 * x, Ratio: x / 1000})
		if i > 0 {
			want = 0.25*x + 0.75*want
		}
		got := p.Predict()
		if !close(got.CompressSpeed, want, tol) || !close(got.DecompressSpeed, 2*want, tol) || !close(got.Ratio, want/1000, tol) {
			t.Fatalf("step %d: got %+v, want speed %v", i, got, want)
		}
	}
}

func TestBaselines_SkipInvalidComponents(t *testing.T) {
	for _, name := range []string{NameLastValue, NameEWMA, NameAR} {
		t.Run(name, func(t *testing.T) {
			p, err := New(name, Config{})
			if err != nil {
				t.Fatal(err)
			}
			p.Observe(Measurement{CompressSpeed: 5e8, DecompressSpeed: 2e9, Ratio: 0.3})
			for _, bad := range []Measurement{
				{CompressSpeed: math.NaN(), DecompressSpeed: math.Inf(1), Ratio: -1},
				{CompressSpeed: 0, DecompressSpeed: -5, Ratio: 1e9},
			} {
				p.Observe(bad)
			}
			got := p.Predict()
			want := Estimate{CompressSpeed: 5e8, DecompressSpeed: 2e9, Ratio: 0.3}
			if !close(got.CompressSpeed, want.CompressSpeed, tol) || !close(got.DecompressSpeed, want.DecompressSpeed, tol) || !close(got.Ratio, want.Ratio, tol) {
				t.Fatalf("after invalid observations got %+v, want %+v", got, want)
			}
		})
	}
}

func TestLastValue_Tracks(t *testing.T) {
	p := NewLastValue(Estimate{})
	for _, x := range []float64{3e8, 1e8, 7e8} {
		p.Observe(Measurement{CompressSpeed: x})
		if got := p.Predict().CompressSpeed; got != x {
			t.Fatalf("got %v, want %v", got, x)
		}
	}
	p.Reset()
	if got := p.Predict(); got != DefaultEstimate {
		t.Fatalf("after Reset got %+v, want default %+v", got, DefaultEstimate)
	}
}

func TestKeyed_SeparatesKeys(t *testing.T) {
	k, err := NewKeyedByName[HostCodec](NameLastValue, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := HostCodec{"h1", "lz4"}
	b := HostCodec{"h1", "snappy"}
	if err := k.Observe(a, Measurement{CompressSpeed: 1e8}); err != nil {
		t.Fatal(err)
	}
	if err := k.Observe(b, Measurement{CompressSpeed: 2e8}); err != nil {
		t.Fatal(err)
	}
	if got := k.Predict(a).CompressSpeed; got != 1e8 {
		t.Fatalf("Predict(a) = %v, want 1e8", got)
	}
	if got := k.Predict(b).CompressSpeed; got != 2e8 {
		t.Fatalf("Predict(b) = %v, want 2e8", got)
	}
	if got := k.Predict(HostCodec{"h2", "lz4"}); got != DefaultEstimate {
		t.Fatalf("unknown key: got %+v, want default", got)
	}
	keys := k.Keys(CompareHostCodec)
	if len(keys) != 2 || keys[0] != a || keys[1] != b {
		t.Fatalf("Keys = %v", keys)
	}
	if _, err := NewKeyedByName[HostCodec]("nope", Config{}); !errors.Is(err, ErrUnknownPredictor) {
		t.Fatalf("bad name error = %v", err)
	}
}

func TestFitAR_RecoversCoefficients(t *testing.T) {
	// A noiseless AR(2) y_t = 0.5 + 0.6 y_{t-1} - 0.3 y_{t-2}, started away
	// from its fixed point so that it is excited; least squares must recover
	// the coefficients up to the ridge's tiny bias.
	const arTol = 1e-5 // ridge λ = 1e-8·n biases β by about λ‖β‖/σ²
	y := []float64{3, -1}
	for len(y) < 60 {
		n := len(y)
		y = append(y, 0.5+0.6*y[n-1]-0.3*y[n-2])
	}
	m, err := FitAR(y, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !close(m.C, 0.5, arTol) || !close(m.A[0], 0.6, arTol) || !close(m.A[1], -0.3, arTol) {
		t.Fatalf("FitAR = %+v, want C=0.5 A=[0.6 -0.3]", m)
	}
	if _, err := FitAR(y[:4], 2); !errors.Is(err, ErrTooShort) {
		t.Fatalf("short series error = %v, want ErrTooShort", err)
	}
}

func TestAR_OnlineRefitForecastsSinusoid(t *testing.T) {
	// log speed = mu + sin(w t): a sinusoid satisfies exactly the AR(2)
	// recursion x_t = 2cos(w)·x_{t−1} − x_{t−2}, so once refitted online the
	// predictor must forecast the next value up to the ridge bias.
	const forecastTol = 1e-4 // relative; ridge bias (see arRidge) is far below this
	p, err := NewAR(Config{AROrder: 2, ARHistory: 64, ARRefit: 8})
	if err != nil {
		t.Fatal(err)
	}
	mu, w := math.Log(3e8), 0.4
	for i := 0; i < 100; i++ {
		p.Observe(Measurement{CompressSpeed: math.Exp(mu + 0.5*math.Sin(w*float64(i)))})
	}
	if _, ok := p.Models(); !ok[0] {
		t.Fatal("compress-speed model not fitted after 100 observations")
	}
	want := math.Exp(mu + 0.5*math.Sin(w*100))
	if got := p.Predict().CompressSpeed; !close(got, want, forecastTol) {
		t.Fatalf("AR forecast = %v, want %v", got, want)
	}
}
