package sim

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
)

// oneTensor is a tensor list of n values.
func oneTensor(n int) []model.Tensor {
	return []model.Tensor{{Name: "w", Size: n, Shape: []int{n}}}
}

// pushTimes starts a push of every worker in starts at its time and
// returns when each was delivered and applied.
func pushTimes(t *testing.T, cm CostModel, workers int, tensors []model.Tensor, starts map[int]time.Duration) map[int]time.Duration {
	t.Helper()
	var q Queue
	c := newCostState(&q, cm, 0, workers, tensors)
	end := map[int]time.Duration{}
	for w, at := range starts {
		q.Schedule(at, func() { c.push(w, func() { end[w] = q.Now() }) })
	}
	for q.Step() {
	}
	if len(end) != len(starts) {
		t.Fatalf("%d of %d pushes ended", len(end), len(starts))
	}
	return end
}

func near(a, b time.Duration) bool { return math.Abs(float64(a-b)) <= 2 }

// TestCostModel_SharedLinkTwoPushes is the shared server link: a push of
// 4 MB to a 1 GB/s server link takes 4 ms alone; two pushes started
// together each take 8 ms; a second push started at 2 ms ends the first
// at 6 ms and itself at 8 ms (half rate while both run). The contention-
// free Network model, or a link that gave each flow its whole capacity,
// ends both at 4 ms.
func TestCostModel_SharedLinkTwoPushes(t *testing.T) {
	cm := CostModel{ServerBandwidth: 1e9}
	tens := oneTensor(1_000_000) // 4 MB
	one := 4 * time.Millisecond
	if got := pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0}); !near(got[0], one) {
		t.Fatalf("one push: %v, want %v", got[0], one)
	}
	got := pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0, 1: 0})
	if !near(got[0], 2*one) || !near(got[1], 2*one) {
		t.Fatalf("two concurrent pushes: %v, want both %v", got, 2*one)
	}
	got = pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0, 1: one / 2})
	if !near(got[0], 3*one/2) || !near(got[1], 2*one) {
		t.Fatalf("staggered pushes: %v, want %v and %v", got, 3*one/2, 2*one)
	}
	// Half duplex: a pull and a push share the link; full duplex: not.
	var q Queue
	c := newCostState(&q, cm, 0, 2, tens)
	var pullEnd, pushEnd time.Duration
	c.pull(0, func() { pullEnd = q.Now() })
	c.push(1, func() { pushEnd = q.Now() })
	for q.Step() {
	}
	if !near(pullEnd, 2*one) || !near(pushEnd, 2*one) {
		t.Fatalf("half duplex pull+push: %v %v, want %v", pullEnd, pushEnd, 2*one)
	}
	cm.FullDuplex = true
	q = Queue{}
	c = newCostState(&q, cm, 0, 2, tens)
	c.pull(0, func() { pullEnd = q.Now() })
	c.push(1, func() { pushEnd = q.Now() })
	for q.Step() {
	}
	if !near(pullEnd, one) || !near(pushEnd, one) {
		t.Fatalf("full duplex pull+push: %v %v, want %v", pullEnd, pushEnd, one)
	}
}

// TestCostModel_SlowLinkMaxMin: worker 1's link at a quarter takes 16 ms
// for its push; with worker 0 pushing at the same time the server link
// gives worker 1 its quarter and worker 0 the other three quarters
// (max-min), so worker 0 ends at 16/3 ms, not at 8 ms (an equal split).
func TestCostModel_SlowLinkMaxMin(t *testing.T) {
	cm := CostModel{ServerBandwidth: 1e9, SlowLink: map[int]float64{1: 0.25}}
	tens := oneTensor(1_000_000)
	got := pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0, 1: 0})
	if want := 16 * time.Millisecond; !near(got[1], want) {
		t.Errorf("slow worker: %v, want %v", got[1], want)
	}
	if want := 16 * time.Millisecond / 3; !near(got[0], want) {
		t.Errorf("fast worker beside the slow one: %v, want %v", got[0], want)
	}
}

// TestCostModel_ServersAndApply: with two servers and two equal tensors a
// push is two messages of half the bytes on two links (2 ms), and with
// ApplyPerValue 1 ns two pushes that arrive together at 4 ms are applied
// one after the other on each server: 4 ms + 0.5 ms and + 1 ms.
func TestCostModel_ServersAndApply(t *testing.T) {
	tens := append(oneTensor(500_000), model.Tensor{Name: "b", Offset: 500_000, Size: 500_000, Shape: []int{500_000}})
	cm := CostModel{ServerBandwidth: 1e9, WorkerBandwidth: 1e12, Servers: 2}
	if got := pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0}); !near(got[0], 2*time.Millisecond) {
		t.Errorf("one push on two servers: %v, want 2ms", got[0])
	}
	cm.ApplyPerValue = time.Nanosecond
	got := pushTimes(t, cm, 2, tens, map[int]time.Duration{0: 0, 1: 0})
	a, b := min(got[0], got[1]), max(got[0], got[1])
	if !near(a, 4500*time.Microsecond) || !near(b, 5*time.Millisecond) {
		t.Errorf("two pushes with apply: %v, want 4.5ms and 5ms", got)
	}
}

// TestEstimateStep is the comp/comm report: ResNet-50 on one 10 Gbit/s
// server with 12 workers, batch 32, on the default device: 102 MB each
// way, 163.6 ms for a pull and a push alone, twelve times that with
// every worker at once (to a microsecond), and
// the compute from 6·4.09 GMAC per sample at 6.28 TFLOP/s.
func TestEstimateStep(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Batch = 12, 32
	cfg.Network.Latency = 0
	cfg.Cost = CostModel{ServerBandwidth: 10 * Gbit, Tensors: model.ResNet50Tensors()}
	sample := DefaultDevice.SampleTime(model.ResNet50ForwardMACs)
	if want := 3908 * time.Microsecond; sample.Round(time.Microsecond) != want {
		t.Fatalf("ResNet-50 sample time %v, want %v", sample, want)
	}
	c, err := EstimateStep(cfg, nil, sample)
	if err != nil {
		t.Fatal(err)
	}
	bytes := 4 * model.ResNet50Params
	alone := 2 * time.Duration(float64(bytes)/(10*Gbit)*1e9)
	us := func(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }
	if c.Bytes != bytes || c.Keys != 161 || !us(c.Alone, alone) || !us(c.All, 12*alone) || c.Compute != 32*sample {
		t.Fatalf("got %+v, want %d bytes, 161 keys, alone %v, all %v, compute %v", c, bytes, alone, 12*alone, 32*sample)
	}
	if s := c.ShareAlone(); math.Abs(s-c.Alone.Seconds()/(c.Alone+32*sample).Seconds()) > 1e-12 {
		t.Fatalf("share %v", s)
	}
	t.Log(c)
	// Without the cost model: Network.Delay each way.
	cfg.Cost = CostModel{}
	cfg.Network = Network{Latency: time.Millisecond, Bandwidth: 1e9}
	c, err = EstimateStep(cfg, model.ResNet50Tensors(), sample)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * cfg.Network.Delay(bytes); c.Alone != want || c.All != want {
		t.Fatalf("Network model: %+v, want %v", c, want)
	}
}

// TestCostModel_RunDeterministic runs a short simulation under the cost
// model (two servers, a slow link, apply time, compute scaled) twice and
// gets the same CSVs; communicating the ResNet-50 list over 1 Gbit/s makes
// every clock slower than without the cost model.
func TestCostModel_RunDeterministic(t *testing.T) {
	run := func(cost CostModel) (*Result, string) {
		cfg := testConfig(4)
		cfg.Duration = time.Second
		cfg.ComputeNoise = 0.05
		cfg.Cost = cost
		res, err := Run(cfg, testJob(t, 4, nil, epsp.NewBSP()))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for _, tab := range CSVTables() {
			if err := tab.Write(&buf, res); err != nil {
				t.Fatal(err)
			}
		}
		return res, buf.String()
	}
	cm := CostModel{ServerBandwidth: Gbit, Servers: 2, SlowLink: map[int]float64{3: 0.5},
		ApplyPerValue: DefaultApplyPerValue, ComputeScale: 2, Tensors: model.ResNet50Tensors()[:40]}
	r1, a := run(cm)
	_, b := run(cm)
	if a != b {
		t.Fatal("same config, different CSVs")
	}
	r0, _ := run(CostModel{})
	c0, c1 := r0.Workers[0].Clocks, r1.Workers[0].Clocks
	if c1 == 0 || c1 >= c0 {
		t.Fatalf("clocks with the cost model %d, without %d: want fewer but some", c1, c0)
	}
}

// TestEstimateStep_Table logs the communication share of the study's
// setting (12 workers, batch 64, 600 µs latency, one server, half duplex)
// for LeNet-5, ResNet-50 and VGG-16 at 10 and 1 Gbit/s, with compute from
// the default device and, for LeNet-5, also at the suite's CPU rate
// (1 ms per sample per core, 4 goroutines, Amdahl 0.1: 0.325 ms); it
// asserts that a slower link and a bigger network give a larger share.
// go test ./ps/sim -run EstimateStep_Table -v prints the table.
func TestEstimateStep_Table(t *testing.T) {
	cnn, err := model.NewCNN(model.DefaultCNNConfig())
	if err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(float64(time.Second) / (1000 * 4 / (0.1*4 + 0.9)))
	rows := []struct {
		name    string
		tensors []model.Tensor
		sample  time.Duration
	}{
		{"lenet5/cpu", cnn.Tensors(), cpu},
		{"lenet5/device", cnn.Tensors(), DefaultDevice.SampleTime(float64(cnn.ForwardMACs()))},
		{"resnet50/device", model.ResNet50Tensors(), DefaultDevice.SampleTime(model.ResNet50ForwardMACs)},
		{"vgg16/device", model.VGG16Tensors(), DefaultDevice.SampleTime(model.VGG16ForwardMACs)},
	}
	for _, apply := range []time.Duration{0, DefaultApplyPerValue} {
		for _, r := range rows {
			var prev float64
			for _, gbit := range []float64{10, 1} {
				cfg := DefaultConfig()
				cfg.Workers, cfg.Batch = 12, 64
				cfg.Network.Latency = 600 * time.Microsecond
				cfg.Cost = CostModel{ServerBandwidth: gbit * Gbit, ApplyPerValue: apply}
				c, err := EstimateStep(cfg, r.tensors, r.sample)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%-16s %2g Gbit/s apply %v: %v", r.name, gbit, apply, c)
				if c.ShareAlone() <= prev || c.ShareAll() < c.ShareAlone() {
					t.Errorf("%s at %g Gbit/s: shares %v alone, %v all; previous %v", r.name, gbit, c.ShareAlone(), c.ShareAll(), prev)
				}
				prev = c.ShareAlone()
			}
		}
	}
}

// TestEstimateStep_SlowLink: the step alone is a normal worker's (worker
// 0's link at a quarter does not slow it), and with every worker at once
// the slow link ends last: 4 × the lone time of 2 × 4 MB at 1 GB/s.
func TestEstimateStep_SlowLink(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Batch = 2, 1
	cfg.Network.Latency = 0
	cfg.Cost = CostModel{ServerBandwidth: 1e9, Servers: 2, SlowLink: map[int]float64{0: 0.25}}
	tens := append(oneTensor(500_000), model.Tensor{Name: "b", Offset: 500_000, Size: 500_000, Shape: []int{500_000}})
	c, err := EstimateStep(cfg, tens, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !near(c.Alone, 8*time.Millisecond) || !near(c.All, 32*time.Millisecond) {
		t.Fatalf("alone %v, all %v: want 8ms and 32ms", c.Alone, c.All)
	}
}

// TestCostKeys_Shards: ResNet-50 cut into keys of at most 2^20 values
// gives more keys than tensors, spread over 4 servers within one key's
// bytes of each other, and every byte is placed.
func TestCostKeys_Shards(t *testing.T) {
	bytes, keys := costKeys(model.ResNet50Tensors(), 1<<20, 4)
	if keys <= 161 {
		t.Fatalf("%d keys, want more than the 161 tensors", keys)
	}
	total := 0
	for _, b := range bytes {
		total += b
		if d := b - bytes[0]; d > 4<<20 || d < -4<<20 {
			t.Fatalf("servers' bytes %v differ by more than one key", bytes)
		}
	}
	if total != 4*model.ResNet50Params {
		t.Fatalf("%d bytes placed, want %d", total, 4*model.ResNet50Params)
	}
}
