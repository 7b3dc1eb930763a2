package mnist_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
)

// The LeNet-5 figures of package model's doc come from this file:
//
//	go test ./model/mnist -run '^$' -bench LeNet5 -benchtime 2s
//	go test ./model/mnist -run TestLeNet5_SGDCurve -v -timeout 1h \
//	    -lenet.samples 60000 -lenet.seeds 3 -lenet.lr 0.01,0.03,0.1
var (
	lenetSamples = flag.Int("lenet.samples", 0, "TestLeNet5_SGDCurve: training samples per run (0 skips the curve)")
	lenetSeeds   = flag.Int("lenet.seeds", 3, "TestLeNet5_SGDCurve: seeds per learning rate")
	lenetLR      = flag.String("lenet.lr", "0.01,0.03,0.1", "TestLeNet5_SGDCurve: comma-separated learning rates")
	lenetBatch   = flag.Int("lenet.batch", 32, "TestLeNet5_SGDCurve: mini-batch size")
	lenetEvery   = flag.Int("lenet.every", 5000, "TestLeNet5_SGDCurve: samples between evaluations on the 10,000 test images")
)

var mnistOnce struct {
	sync.Once
	train, test *model.Dataset
	err         error
}

// loadMNIST loads MNIST once per test binary, or skips tb.
func loadMNIST(tb testing.TB) (train, test *model.Dataset) {
	tb.Helper()
	mnistOnce.Do(func() {
		dir, err := mnist.Locate()
		if err != nil {
			mnistOnce.err = err
			return
		}
		mnistOnce.train, mnistOnce.test, mnistOnce.err = mnist.Load(dir)
	})
	if mnistOnce.err != nil {
		tb.Skipf("MNIST module files not available: %v", mnistOnce.err)
	}
	return mnistOnce.train, mnistOnce.test
}

func newLeNet5(tb testing.TB) *model.CNN {
	m, err := model.NewCNN(model.DefaultCNNConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkLeNet5_LossGrad is the ladder of forward+backward cost over
// batch sizes on MNIST images; µs/sample is the figure a simulated
// worker's compute stands for.
func BenchmarkLeNet5_LossGrad(b *testing.B) {
	train, _ := loadMNIST(b)
	for _, batch := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			m := newLeNet5(b)
			w, g := make([]float32, m.NumParams()), make([]float32, m.NumParams())
			m.Init(w, rand.New(rand.NewPCG(1, 1)))
			idx := make([]int, batch)
			for i := range idx {
				idx[i] = i * 97 % train.N
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				m.LossGrad(w, train, idx, g)
			}
			reportPerSample(b, cpu0, b.N*batch)
		})
	}
}

// BenchmarkLeNet5_Evaluate is the forward-only cost of an evaluation.
func BenchmarkLeNet5_Evaluate(b *testing.B) {
	_, test := loadMNIST(b)
	m := newLeNet5(b)
	w := make([]float32, m.NumParams())
	m.Init(w, rand.New(rand.NewPCG(1, 1)))
	idx := make([]int, 1000)
	for i := range idx {
		idx[i] = i
	}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		m.Evaluate(w, test, idx)
	}
	reportPerSample(b, cpu0, b.N*len(idx))
}

// reportPerSample reports wall-clock and process CPU time per sample since
// cpu0. The CPU time is the figure to read on a loaded machine: it does not
// count the time the benchmark waited for a core.
func reportPerSample(b *testing.B, cpu0 time.Duration, samples int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(samples), "µs/sample")
	if cpu := cputime.Process(); cpu > 0 {
		b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/1e3/float64(samples), "cpu-µs/sample")
	}
}

// sgdRun trains LeNet-5 with plain mini-batch SGD (batches drawn with
// replacement, seeded) and calls eval after every `every` samples.
func sgdRun(m *model.CNN, train *model.Dataset, seed uint64, lr float64, batch, samples, every int, eval func(seen int, w []float32)) {
	rng := rand.New(rand.NewPCG(seed, 0x1e7))
	w, g := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.Init(w, rng)
	idx := make([]int, batch)
	lr32 := float32(lr)
	for seen := 0; seen < samples; {
		for i := range idx {
			idx[i] = rng.IntN(train.N)
		}
		m.LossGrad(w, train, idx, g)
		for i := range w {
			w[i] -= lr32 * g[i]
		}
		prev := seen
		seen += batch
		if seen/every != prev/every || seen >= samples {
			eval(seen, w)
		}
	}
}

// TestLeNet5_SGD: a short run of plain SGD on MNIST reaches well above
// chance on 1,000 test images.
func TestLeNet5_SGD(t *testing.T) {
	if testing.Short() {
		t.Skip("trains LeNet-5 on 4,096 MNIST images")
	}
	train, test := loadMNIST(t)
	m := newLeNet5(t)
	var acc float64
	sgdRun(m, train, 1, 0.05, 32, 4096, 4096, func(_ int, w []float32) {
		_, acc = m.Evaluate(w, test.Head(1000), nil)
	})
	// Seeds 1-3 reach 0.89-0.92 on the whole test set (doc.go of package
	// model); 0.8 leaves room for the seed, and is far above the 0.1 of
	// chance.
	if acc < 0.8 {
		t.Errorf("LeNet-5 after 4,096 samples of SGD (lr 0.05, batch 32): test accuracy %.3f, want >= 0.8", acc)
	}
}

// TestLeNet5_SGDCurve prints test accuracy against samples seen for each
// learning rate and seed (skipped unless -lenet.samples > 0).
func TestLeNet5_SGDCurve(t *testing.T) {
	if *lenetSamples <= 0 {
		t.Skip("set -lenet.samples to run the curve")
	}
	train, test := loadMNIST(t)
	var rates []float64
	for _, s := range strings.Split(*lenetLR, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			t.Fatalf("bad -lenet.lr entry %q", s)
		}
		rates = append(rates, r)
	}
	m := newLeNet5(t)
	for _, lr := range rates {
		curves := map[int][]float64{}
		for seed := range uint64(*lenetSeeds) {
			sgdRun(m, train, seed+1, lr, *lenetBatch, *lenetSamples, *lenetEvery, func(seen int, w []float32) {
				_, acc := m.Evaluate(w, test, nil)
				curves[seen] = append(curves[seen], acc)
			})
		}
		keys := make([]int, 0, len(curves))
		for k := range curves {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			accs := curves[k]
			var mean float64
			for _, a := range accs {
				mean += a
			}
			mean /= float64(len(accs))
			t.Logf("lr=%g batch=%d samples=%d: test accuracy mean %.4f min %.4f max %.4f (%d seeds)",
				lr, *lenetBatch, k, mean, slices.Min(accs), slices.Max(accs), len(accs))
		}
	}
}
