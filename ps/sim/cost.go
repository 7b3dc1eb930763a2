package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconml/falcon/model"
)

// CostModel replaces the contention-free [Network] for pulls and pushes
// with a model a systems reviewer can check: the bytes and keys of a
// real network's tensor list, spread over Servers parameter servers, each
// server's link shared fairly by every pull and push that crosses it,
// each worker's link likewise (one worker may have a slow one), and the
// server's time to apply the values it receives. Its zero value disables
// it (the [Network] model, bit for bit as before).
//
// # Links
//
// Every link is a fluid, max-min fair-shared resource in virtual time
// (progressive filling, as in Bertsekas & Gallager, Data Networks, §6.5):
// a message from worker w to server s is a flow over w's link and s's
// link; at every start or end of a flow the rates are recomputed so that
// no flow can go faster without slowing one that is no faster than it.
// Two pushes of b bytes to one server's link of B bytes/s started together
// both end at 2b/B (TestCostModel_SharedLinkTwoPushes). A message is
// delivered Network.Latency after its last byte, so a lone message takes
// Latency + b/B, as in [Network.Delay]. With FullDuplex, pushes (into the
// server) and pulls (out of it) use separate capacities, as on a
// full-duplex Ethernet link; otherwise one capacity carries both, the
// conservative reading.
//
// # Keys and servers
//
// The tensor list (Tensors, or the trained model's [model.Tensors]) gives
// one key per tensor, cut into shards of at most ShardLen values when
// ShardLen > 0. Keys go to servers largest first, each to the server with
// the fewest bytes so far (ties to the lowest index): a balanced layout.
// A pull reads the store at release (the trained model's parameters, as
// without the cost model) and is one message per server holding bytes; a
// push likewise; the step's communication ends with its last message.
//
// # Server apply
//
// A push's part that reaches server s waits for s's previous applies
// (one apply at a time per server, FIFO) and takes ApplyPerValue per
// value; the gradient is applied to the store when the last part is
// applied. Pulls do not wait for applies. ApplyPerValue 0 means free.
//
// # Compute
//
// ComputeScale multiplies every round's work: one trained sample counts
// as ComputeScale samples of the speed model, so a network's per-sample
// time (from its FLOPs at a device's throughput: [Device.SampleTime])
// replaces the speed model's base rate without changing its
// heterogeneity (use [ComputeScaleFor]). Zero means 1.
//
// What it does not model: the transfer of samples between workers
// (SampleBytes) and control messages still take Network.Delay without
// contention; there is no switch fabric beyond the endpoint links (a
// non-blocking fabric).
type CostModel struct {
	// Tensors is the tensor list whose sizes drive bytes and keys; nil
	// means the trained model's. Values are 4-byte floats.
	Tensors []model.Tensor
	// ShardLen cuts a tensor into keys of at most this many values; zero
	// means one key per tensor.
	ShardLen int
	// Servers is the number of parameter servers; zero means 1.
	Servers int
	// ServerBandwidth is each server's link in bytes/s. Zero disables the
	// cost model's links (pulls and pushes then take Network.Delay).
	ServerBandwidth float64
	// WorkerBandwidth is each worker's link in bytes/s; zero means
	// ServerBandwidth.
	WorkerBandwidth float64
	// SlowLink gives some workers a link of this fraction of
	// WorkerBandwidth (in (0, 1]): the slow-link scenario.
	SlowLink map[int]float64
	// FullDuplex gives every link separate capacities in each direction.
	FullDuplex bool
	// ApplyPerValue is the server's time to apply one received value;
	// zero means free. DefaultApplyPerValue is our estimate.
	ApplyPerValue time.Duration
	// ComputeScale is the work of one trained sample in the speed model's
	// samples; zero means 1.
	ComputeScale float64
}

// DefaultApplyPerValue is the server's cost to apply one float32 value
// of a gradient: 1 ns, our estimate of a streaming SGD update
// (w -= η·g reads 8 and writes 4 bytes per value; one core streams about
// 10-15 GB/s on a current server, so 12 bytes take about 1 ns).
const DefaultApplyPerValue = time.Nanosecond

// Gbit is one gigabit per second in bytes per second.
const Gbit = 1e9 / 8

// Enabled reports whether the cost model's links are in use.
func (c CostModel) Enabled() bool { return c.ServerBandwidth > 0 }

// Validate checks the cost model for cfg's workers.
func (c CostModel) Validate(workers int) error {
	switch {
	case c.ShardLen < 0 || c.Servers < 0:
		return fmt.Errorf("%w: CostModel: negative ShardLen or Servers", ErrConfig)
	case !(c.ServerBandwidth >= 0) || !(c.WorkerBandwidth >= 0) || math.IsInf(c.ServerBandwidth, 0) || math.IsInf(c.WorkerBandwidth, 0):
		return fmt.Errorf("%w: CostModel: bandwidth must be finite and >= 0", ErrConfig)
	case c.ApplyPerValue < 0:
		return fmt.Errorf("%w: CostModel: ApplyPerValue = %v", ErrConfig, c.ApplyPerValue)
	case !(c.ComputeScale >= 0) || math.IsInf(c.ComputeScale, 0):
		return fmt.Errorf("%w: CostModel: ComputeScale = %v", ErrConfig, c.ComputeScale)
	}
	for w, f := range c.SlowLink {
		if w < 0 || w >= workers || !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: CostModel: SlowLink[%d] = %v, want a worker and a fraction in (0, 1]", ErrConfig, w, f)
		}
	}
	for _, t := range c.Tensors {
		if t.Size <= 0 {
			return fmt.Errorf("%w: CostModel: tensor %q of size %d", ErrConfig, t.Name, t.Size)
		}
	}
	return nil
}

// Device is an accelerator class by its effective training throughput.
type Device struct {
	Name string
	// FLOPS is the sustained floating-point operations per second of a
	// training step (not the datasheet peak).
	FLOPS float64
}

// DefaultDevice is a V100-class GPU in FP32: the datasheet peak of the
// NVIDIA Tesla V100 SXM2 is 15.7 TFLOP/s (NVIDIA V100 datasheet); we take
// 40 % of it as sustained (our assumption), 6.28 TFLOP/s, which puts
// ResNet-50 at about 256 images/s.
var DefaultDevice = Device{Name: "V100-class FP32 at 40% of 15.7 TFLOP/s", FLOPS: 0.4 * 15.7e12}

// SampleTime is the forward+backward time of one sample of a network of
// forwardMACs multiply-accumulates per sample on d: 2 FLOPs per
// multiply-accumulate and a backward pass of twice the forward's
// operations (the gradients with respect to the activations and to the
// weights, each about one forward; Kaplan et al. 2020, §2.1, C ≈ 6N per
// token; Epoch AI, "What's the backward-forward FLOP ratio for neural
// networks?", 2021, finds 2:1 for convolutional nets), so
// 6·forwardMACs / FLOPS.
func (d Device) SampleTime(forwardMACs float64) time.Duration {
	return time.Duration(6 * forwardMACs / d.FLOPS * float64(time.Second))
}

// ComputeScaleFor is the CostModel.ComputeScale that makes one sample
// take sample at the reference rate ref (samples/s of a normal worker at
// its initial parallelism in the speed model): sample·ref.
func ComputeScaleFor(sample time.Duration, ref float64) float64 {
	return sample.Seconds() * ref
}

// ---- layout ----

// costKeys returns the bytes each of n servers holds for tensors cut into
// shards of shard values (0: none), and the number of keys.
func costKeys(tensors []model.Tensor, shard, n int) (bytes []int, keys int) {
	var sizes []int
	for _, t := range tensors {
		if shard <= 0 || t.Size <= shard {
			sizes = append(sizes, t.Size)
			continue
		}
		for off := 0; off < t.Size; off += shard {
			sizes = append(sizes, min(shard, t.Size-off))
		}
	}
	slices.SortStableFunc(sizes, func(a, b int) int { return b - a })
	bytes = make([]int, n)
	for _, sz := range sizes {
		s := 0
		for i := range bytes {
			if bytes[i] < bytes[s] {
				s = i
			}
		}
		bytes[s] += 4 * sz
	}
	return bytes, len(sizes)
}

// ---- fluid links ----

type flow struct {
	links []int // indices into fluid.cap
	rem   float64
	rate  float64
	done  func()
}

// fluid is a set of max-min fair-shared links carrying flows in virtual
// time, driven by a Queue.
type fluid struct {
	q     *Queue
	cap   []float64
	flows []*flow
	last  time.Duration
	gen   uint64
}

func (f *fluid) start(links []int, bytes float64, done func()) {
	f.advance()
	f.flows = append(f.flows, &flow{links: links, rem: bytes, done: done})
	f.replan()
}

// advance drains every flow at its rate since the last event.
func (f *fluid) advance() {
	now := f.q.Now()
	if dt := (now - f.last).Seconds(); dt > 0 {
		for _, x := range f.flows {
			x.rem -= x.rate * dt
		}
	}
	f.last = now
}

// setRates is progressive filling: the link with the smallest fair share
// of what is left fixes the rate of its unfixed flows, until all are.
func (f *fluid) setRates() {
	left := slices.Clone(f.cap)
	cnt := make([]int, len(f.cap))
	fixed := make([]bool, len(f.flows))
	for _, x := range f.flows {
		for _, l := range x.links {
			cnt[l]++
		}
	}
	for n := len(f.flows); n > 0; {
		best, share := -1, 0.0
		for l := range left {
			if cnt[l] > 0 {
				if sh := max(left[l], 0) / float64(cnt[l]); best < 0 || sh < share {
					best, share = l, sh
				}
			}
		}
		for i, x := range f.flows {
			if fixed[i] || !slices.Contains(x.links, best) {
				continue
			}
			fixed[i] = true
			n--
			x.rate = share
			for _, l := range x.links {
				left[l] -= share
				cnt[l]--
			}
		}
	}
}

// replan recomputes the rates and schedules the next completion.
func (f *fluid) replan() {
	f.setRates()
	f.gen++
	gen := f.gen
	next := time.Duration(math.MaxInt64)
	for _, x := range f.flows {
		if x.rate > 0 {
			next = min(next, f.q.Now()+time.Duration(math.Ceil(max(x.rem, 0)/x.rate*float64(time.Second))))
		}
	}
	if next == math.MaxInt64 {
		return
	}
	f.q.Schedule(next, func() {
		if f.gen != gen {
			return
		}
		f.advance()
		var done []func()
		keep := f.flows[:0]
		for _, x := range f.flows {
			if x.rem <= x.rate*1e-9+1e-9 { // within a nanosecond of its end
				done = append(done, x.done)
			} else {
				keep = append(keep, x)
			}
		}
		clear(f.flows[len(keep):])
		f.flows = keep
		f.replan()
		for _, d := range done {
			d()
		}
	})
}

// ---- the simulator's side ----

// costState is a run's cost model: its links, layout and server queues.
type costState struct {
	cm        CostModel
	latency   time.Duration
	net       fluid
	bytes     []int           // per server
	keys      int             // number of keys
	applyFree []time.Duration // when each server's apply queue is free
	servers   int
}

func newCostState(q *Queue, cm CostModel, latency time.Duration, workers int, tensors []model.Tensor) *costState {
	if cm.Servers == 0 {
		cm.Servers = 1
	}
	if cm.WorkerBandwidth == 0 {
		cm.WorkerBandwidth = cm.ServerBandwidth
	}
	c := &costState{cm: cm, latency: latency, servers: cm.Servers, applyFree: make([]time.Duration, cm.Servers)}
	c.bytes, c.keys = costKeys(tensors, cm.ShardLen, cm.Servers)
	c.net.q = q
	// links: server s in/out, then worker w in/out
	c.net.cap = make([]float64, 2*(cm.Servers+workers))
	for s := range cm.Servers {
		c.net.cap[2*s], c.net.cap[2*s+1] = cm.ServerBandwidth, cm.ServerBandwidth
	}
	for w := range workers {
		b := cm.WorkerBandwidth
		if f, ok := cm.SlowLink[w]; ok {
			b *= f
		}
		i := 2 * (cm.Servers + w)
		c.net.cap[i], c.net.cap[i+1] = b, b
	}
	return c
}

// links is the pair of links a message between worker w and server s
// crosses; push is the direction into the server.
func (c *costState) links(w, s int, push bool) []int {
	sl, wl := 2*s, 2*(c.servers+w)
	if c.cm.FullDuplex && !push {
		sl++ // the server's outgoing direction
	}
	if c.cm.FullDuplex && push {
		wl++ // the worker's outgoing direction
	}
	return []int{sl, wl}
}

// pull delivers a pull from every server to w, then calls done.
func (c *costState) pull(w int, done func()) {
	c.transfer(w, false, done)
}

// push sends a push from w to every server, applies each part on its
// server, then calls done.
func (c *costState) push(w int, done func()) {
	c.transfer(w, true, done)
}

// transfer sends one message per server holding bytes between w and the
// servers and calls done when the last is delivered (and, for a push,
// applied).
func (c *costState) transfer(w int, push bool, done func()) {
	left := 0
	for _, b := range c.bytes {
		if b > 0 {
			left++
		}
	}
	if left == 0 {
		c.net.q.After(c.latency, done)
		return
	}
	finish := func() {
		if left--; left == 0 {
			done()
		}
	}
	for s, b := range c.bytes {
		if b == 0 {
			continue
		}
		c.net.start(c.links(w, s, push), float64(b), func() {
			c.net.q.After(c.latency, func() {
				if !push || c.cm.ApplyPerValue == 0 {
					finish()
					return
				}
				now := c.net.q.Now()
				end := max(now, c.applyFree[s]) + time.Duration(b/4)*c.cm.ApplyPerValue
				c.applyFree[s] = end
				c.net.q.Schedule(end, finish)
			})
		})
	}
}

// StepCost is what one clock of one worker costs under a configuration,
// without heterogeneity or noise: the compute of its batch and the
// communication of its pull and push, alone on the links and when every
// worker pulls (and then pushes) at the same instant.
type StepCost struct {
	// Bytes is one pull's (and one push's) bytes; Keys the number of keys.
	Bytes, Keys int
	// Compute is Batch samples at the given per-sample time.
	Compute time.Duration
	// Alone is a pull then a push of one worker with the links to itself
	// (latencies and server apply included), on the fastest worker link.
	Alone time.Duration
	// All is the same when all Workers pull together and then push
	// together, until the last push is applied: the servers' links are
	// shared Workers ways (and a slow link, if any, ends last).
	All time.Duration
}

// ShareAlone is the communication's share of a step, Alone/(Compute+Alone).
func (c StepCost) ShareAlone() float64 { return share(c.Alone, c.Compute) }

// ShareAll is the communication's share of a step when every worker
// communicates at once, All/(Compute+All).
func (c StepCost) ShareAll() float64 { return share(c.All, c.Compute) }

func share(comm, comp time.Duration) float64 {
	if comm+comp == 0 {
		return 0
	}
	return comm.Seconds() / (comm + comp).Seconds()
}

func (c StepCost) String() string {
	return fmt.Sprintf("%d keys, %.2f MB per pull/push; step compute %v, communication %v alone (%.1f%%), %v with every worker at once (%.1f%%)",
		c.Keys, float64(c.Bytes)/1e6, c.Compute.Round(time.Microsecond), c.Alone.Round(time.Microsecond), 100*c.ShareAlone(),
		c.All.Round(time.Microsecond), 100*c.ShareAll())
}

// EstimateStep reports the cost of one step under cfg (Workers, Batch,
// Network and Cost) for a network of the given tensors (nil: cfg.Cost's,
// which must then be set) and per-sample compute time: the same links,
// layout and apply queues as a run, driven by pulls and pushes alone.
// Without an enabled cost model the communication is Network.Delay of
// the bytes each way, as in a run.
func EstimateStep(cfg Config, tensors []model.Tensor, sample time.Duration) (StepCost, error) {
	if err := cfg.Cost.Validate(cfg.Workers); err != nil {
		return StepCost{}, err
	}
	if tensors == nil {
		tensors = cfg.Cost.Tensors
	}
	if len(tensors) == 0 || cfg.Workers <= 0 || cfg.Batch <= 0 {
		return StepCost{}, fmt.Errorf("%w: EstimateStep needs tensors, Workers and Batch", ErrConfig)
	}
	n := 0
	for _, t := range tensors {
		n += t.Size
	}
	out := StepCost{Bytes: 4 * n, Keys: len(tensors), Compute: time.Duration(cfg.Batch) * sample}
	if !cfg.Cost.Enabled() {
		out.Alone = 2 * cfg.Network.Delay(4*n)
		out.All = out.Alone
		return out, nil
	}
	fast, frac := 0, 0.0 // the worker with the fastest link
	for w := range cfg.Workers {
		f, ok := cfg.Cost.SlowLink[w]
		if !ok {
			f = 1
		}
		if f > frac {
			fast, frac = w, f
		}
	}
	round := func(ws []int) time.Duration {
		var q Queue
		c := newCostState(&q, cfg.Cost, cfg.Network.Latency, cfg.Workers, tensors)
		out.Keys = c.keys
		var end time.Duration
		pulled, k := 0, len(ws)
		for _, w := range ws {
			c.pull(w, func() {
				if pulled++; pulled == k {
					pushed := 0
					for _, w := range ws {
						c.push(w, func() {
							if pushed++; pushed == k {
								end = q.Now()
							}
						})
					}
				}
			})
		}
		for q.Step() {
		}
		return end
	}
	all := make([]int, cfg.Workers)
	for w := range all {
		all[w] = w
	}
	out.Alone = round([]int{fast})
	out.All = round(all)
	return out, nil
}
