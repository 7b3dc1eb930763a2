package ps_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/store"
)

// tol is the float32 comparison tolerance: a few ulps at magnitude 1.
const tol = 1e-6

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= tol*math.Max(1, math.Abs(float64(b))) }

func nearAll(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestOptimizer_Update(t *testing.T) {
	// Each want is computed by hand from the formula in the doc comment.
	tests := []struct {
		name  string
		opt   store.Optimizer
		w     []float32
		steps [][]float32 // gradients, one per step
		scale float32
		want  []float32
	}{
		// w ← w − η·scale·g: 1 − 0.1·2·0.5 = 0.9; 2 − 0.1·2·(−1) = 2.2.
		{"sgd", store.SGD{LR: 0.1}, []float32{1, 2}, [][]float32{{0.5, -1}}, 2, []float32{0.9, 2.2}},
		// v=1, w=0.9; then v=0.9·1+1=1.9, w=0.9−0.19=0.71.
		{"momentum", store.Momentum{LR: 0.1, Mu: 0.9}, []float32{1}, [][]float32{{1}, {1}}, 1, []float32{0.71}},
		// Adam, β=(0.9,0.999): step 1 with g=2 moves w by exactly η (m̂=2,
		// v̂=4); step 2 with g=−1: m=0.08, v=0.004996, m̂=0.08/0.19,
		// v̂=0.004996/0.001999, w = 0.9 − 0.1·m̂/√v̂ = 0.8733663.
		{"adam", store.Adam{LR: 0.1}, []float32{1}, [][]float32{{2}, {-1}}, 1, []float32{0.8733663}},
		// scale folds into g before the moments: g'=0.5·4=2, same as above.
		{"adam-scaled", store.Adam{LR: 0.1}, []float32{1}, [][]float32{{4}}, 0.5, []float32{0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := slices.Clone(tt.w)
			state := make([][]float32, tt.opt.Slots())
			for k := range state {
				state[k] = make([]float32, len(w))
			}
			for i, g := range tt.steps {
				tt.opt.Update(w, g, tt.scale, state, int64(i+1))
			}
			if !nearAll(w, tt.want) {
				t.Errorf("w = %v, want %v", w, tt.want)
			}
		})
	}
}

func newStore(t *testing.T, opt store.Optimizer) *store.Store {
	t.Helper()
	s, err := store.New(store.Config{Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func value(t *testing.T, s *store.Store, k uint64) []float32 {
	t.Helper()
	v, ok := s.Value(nil, k)
	if !ok {
		t.Fatalf("key %d missing", k)
	}
	return v
}

func TestStore_InitApplyPull(t *testing.T) {
	s := newStore(t, store.SGD{LR: 1})
	if err := s.InitValues([]uint64{1, 5}, []int{2, 1}, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	// Re-init with the same lengths keeps values; new keys are added.
	if err := s.Init([]uint64{1, 9}, []int{2, 3}, store.Constant{C: 7}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, s, 1); !nearAll(got, []float32{1, 2}) {
		t.Errorf("key 1 = %v after re-init, want unchanged [1 2]", got)
	}
	if got := value(t, s, 9); !nearAll(got, []float32{7, 7, 7}) {
		t.Errorf("key 9 = %v, want [7 7 7]", got)
	}
	if err := s.Apply([]uint64{1, 9}, nil, []float32{1, 1, 1, 2, 3}, 0.5); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 6)
	if err := s.Pull([]uint64{1, 5, 9}, []int{2, 1, 3}, out); err != nil {
		t.Fatal(err)
	}
	want := []float32{0.5, 1.5, 3, 6.5, 6, 5.5}
	if !nearAll(out, want) {
		t.Errorf("pull = %v, want %v", out, want)
	}
	if s.Steps(1) != 1 || s.Steps(5) != 0 {
		t.Errorf("steps = %d, %d; want 1, 0", s.Steps(1), s.Steps(5))
	}
}

func TestStore_AccumulateFlush(t *testing.T) {
	// Reference: falcon.md §4 — the enforced-mode merge Σ n_i g_i / Σ n_i.
	s := newStore(t, store.SGD{LR: 1})
	if err := s.InitValues([]uint64{1, 2}, []int{1, 1}, []float32{10, 20}); err != nil {
		t.Fatal(err)
	}
	must(t, s.Accumulate(0, []uint64{1, 2}, nil, []float32{1, 4}, 3))
	must(t, s.Accumulate(0, []uint64{1}, nil, []float32{5}, 1))
	must(t, s.Accumulate(1, []uint64{2}, nil, []float32{100}, 1))
	if got := value(t, s, 1); got[0] != 10 {
		t.Fatalf("accumulate applied early: %v", got)
	}
	if n, err := s.Flush(0, 2); n != 2 || err != nil {
		t.Errorf("flush updated %d keys (%v), want 2", n, err)
	}
	// key 1: (3·1 + 1·5)/4 = 2, scaled 2 → 10 − 4 = 6. key 2: 4 → 20 − 8 = 12.
	if got := []float32{value(t, s, 1)[0], value(t, s, 2)[0]}; !nearAll(got, []float32{6, 12}) {
		t.Errorf("after flush = %v, want [6 12]", got)
	}
	if got := s.Pending(); !slices.Equal(got, []int{1}) {
		t.Errorf("pending = %v, want [1]", got)
	}
	if n, err := s.Flush(0, 1); n != 0 || err != nil {
		t.Errorf("second flush of clock 0 updated %d keys (%v)", n, err)
	}
	must2(s.Flush(1, 1))
	must(t, s.Accumulate(2, []uint64{2}, nil, []float32{1}, 1)) // a new buffer
	must2(s.Flush(2, 1))
	if got := value(t, s, 2)[0]; !near(got, 12-100-1) {
		t.Errorf("key 2 = %v, want %v", got, 12-100-1)
	}
}

// must2 panics on the error of a call returning a count and an error.
func must2(_ int, err error) {
	if err != nil {
		panic(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStore_RefusedRequestsChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		keys []uint64
		lens []int
		vals []float32
		want error
	}{
		{"unknown key last", []uint64{1, 2, 99}, nil, []float32{1, 1, 1, 1}, ps.ErrUnknownKey},
		{"unsorted", []uint64{2, 1}, nil, []float32{1, 1, 1}, ps.ErrUnsortedKeys},
		{"duplicate", []uint64{1, 1}, nil, []float32{1, 1}, ps.ErrUnsortedKeys},
		{"wrong len", []uint64{1, 2}, []int{1, 1}, []float32{1, 1}, ps.ErrLengthMismatch},
		{"short vals", []uint64{1, 2}, nil, []float32{1, 1}, ps.ErrLengthMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, store.Adam{LR: 0.1})
			must(t, s.InitValues([]uint64{1, 2}, []int{1, 2}, []float32{1, 2, 3}))
			before := make([]float32, 3)
			must(t, s.Pull([]uint64{1, 2}, nil, before))
			errs := []error{
				s.Apply(tt.keys, tt.lens, tt.vals, 1),
				s.Accumulate(0, tt.keys, tt.lens, tt.vals, 1),
				s.Pull(tt.keys, tt.lens, tt.vals),
			}
			for i, err := range errs {
				if !errors.Is(err, tt.want) {
					t.Errorf("call %d: err = %v, want %v", i, err, tt.want)
				}
			}
			after := make([]float32, 3)
			must(t, s.Pull([]uint64{1, 2}, nil, after))
			if !slices.Equal(before, after) || s.Steps(1) != 0 || len(s.Pending()) != 0 {
				t.Errorf("refused request changed the store: %v -> %v, steps %d, pending %v", before, after, s.Steps(1), s.Pending())
			}
		})
	}
}

func TestInitializer_SplitInvariant(t *testing.T) {
	inits := []store.Initializer{store.Uniform{Lo: -1, Hi: 1, Seed: 3}, store.Normal{Std: 1, Seed: 3}, store.Constant{C: 2}, store.Zeros{}}
	for _, in := range inits {
		whole := make([]float32, 100)
		in.Init(42, 0, whole)
		parts := make([]float32, 100)
		in.Init(42, 0, parts[:37])
		in.Init(42, 37, parts[37:])
		if !slices.Equal(whole, parts) {
			t.Errorf("%T: split init differs", in)
		}
	}
	u := make([]float32, 1000)
	store.Uniform{Lo: -1, Hi: 1, Seed: 1}.Init(7, 0, u)
	var mean float64
	for _, v := range u {
		if v < -1 || v >= 1 {
			t.Fatalf("uniform value %v outside [-1,1)", v)
		}
		mean += float64(v) / 1000
	}
	if math.Abs(mean) > 0.1 { // 1000 draws: std of the mean ≈ 0.018
		t.Errorf("uniform mean %v, want ≈ 0", mean)
	}
}
