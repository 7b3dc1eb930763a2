package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps/sim"
	"github.com/falconml/falcon/straggler"
)

// costOptions select the simulator's cost model (sim.CostModel) and
// ground-truth speed-up curve; their zero values keep the Network model
// and the Amdahl curve, so every earlier run is reproduced bit for bit.
type costOptions struct {
	net     string        // "", "model", "cnn", "resnet50", "vgg16"
	link    float64       // Gbit/s of every server's and worker's link
	servers int           // parameter servers
	shard   int           // values per key at most (0: one key per tensor)
	duplex  bool          // full-duplex links
	apply   time.Duration // server apply time per value
	tflops  float64       // device TFLOP/s for compute from FLOPs; 0: the speed model's rate
	curve   string        // "amdahl" or "usl"
}

func (c *costOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&c.net, "cost-net", "", "simulator only: charge pulls and pushes with this network's tensor list over fair-shared links (sim.CostModel): model (the trained model's), cnn (LeNet-5), resnet50 or vgg16; empty for the contention-free -latency model")
	fs.Float64Var(&c.link, "link", 10, "with -cost-net: every server's and worker's link in Gbit/s")
	fs.IntVar(&c.servers, "servers", 1, "with -cost-net: parameter servers (keys spread by bytes)")
	fs.IntVar(&c.shard, "shard", 0, "with -cost-net: cut tensors into keys of at most this many values (0: one key per tensor)")
	fs.BoolVar(&c.duplex, "duplex", false, "with -cost-net: full-duplex links (pushes and pulls do not share a direction)")
	fs.DurationVar(&c.apply, "apply", 0, "with -cost-net: server apply time per value (e.g. 1ns, sim.DefaultApplyPerValue)")
	fs.Float64Var(&c.tflops, "device-tflops", 0, "with -cost-net cnn, resnet50 or vgg16: compute per sample from that network's forward+backward FLOPs at this sustained TFLOP/s (sim.DefaultDevice is 6.28); 0 keeps the scenario's rate per sample")
	fs.StringVar(&c.curve, "curve", "amdahl", "ground-truth speed-up of the simulated hosts: amdahl (the controller's own assumption) or usl (sim.DefaultContention: USL and an oversubscription cost)")
}

// defaultCostFlags are the cost flags' defaults (no cost model).
func defaultCostFlags() costOptions {
	return costOptions{link: 10, servers: 1, curve: "amdahl"}
}

// tensorsFor returns the tensor list and forward multiply-accumulates per
// sample (0 when unknown) of -cost-net for the trained model m.
func tensorsFor(net string, m model.Model) ([]model.Tensor, float64, error) {
	switch net {
	case "model":
		return model.Tensors(m), 0, nil
	case "cnn":
		c, err := model.NewCNN(model.DefaultCNNConfig())
		if err != nil {
			return nil, 0, err
		}
		return c.Tensors(), float64(c.ForwardMACs()), nil
	case "resnet50":
		return model.ResNet50Tensors(), model.ResNet50ForwardMACs, nil
	case "vgg16":
		return model.VGG16Tensors(), model.VGG16ForwardMACs, nil
	}
	return nil, 0, fmt.Errorf("unknown -cost-net %q (have model, cnn, resnet50, vgg16)", net)
}

// withCurve applies -curve to a scenario.
func (c costOptions) withCurve(sc sim.Scenario) (sim.Scenario, error) {
	switch c.curve {
	case "", "amdahl":
	case "usl":
		sc.Contention = sim.DefaultContention
	default:
		return sc, fmt.Errorf("unknown -curve %q (have amdahl, usl)", c.curve)
	}
	return sc, nil
}

// refRate is the samples/s of the scenario's fastest worker at its
// initial parallelism at time 0: the rate one sample's device time is
// mapped to.
func refRate(speed straggler.Model, p int) float64 {
	var r float64
	for w := range speed.NumWorkers() {
		r = max(r, speed.Rate(w, p, 0))
	}
	return r
}

// costModel returns the scenario's cost model and the compute time of one
// sample of a normal worker, for the trained model m.
func (c costOptions) costModel(sc sim.Scenario, m model.Model, speed straggler.Model) (sim.CostModel, time.Duration, error) {
	ref := refRate(speed, max(sc.Parallelism, 1))
	sample := time.Duration(float64(time.Second) / ref)
	if c.net == "" {
		if len(sc.SlowLink) > 0 {
			return sim.CostModel{}, 0, fmt.Errorf("scenario %s needs a cost model with links: give -cost-net", sc.Name)
		}
		if c.tflops != 0 {
			return sim.CostModel{}, 0, fmt.Errorf("-device-tflops needs -cost-net")
		}
		return sim.CostModel{}, sample, nil
	}
	if !(c.link > 0) || c.servers < 1 {
		return sim.CostModel{}, 0, fmt.Errorf("-link %v, -servers %d: want > 0 and >= 1", c.link, c.servers)
	}
	tensors, macs, err := tensorsFor(c.net, m)
	if err != nil {
		return sim.CostModel{}, 0, err
	}
	cm := sim.CostModel{
		Tensors: tensors, ShardLen: c.shard, Servers: c.servers, ServerBandwidth: c.link * sim.Gbit,
		SlowLink: sc.SlowLink, FullDuplex: c.duplex, ApplyPerValue: c.apply,
	}
	if c.tflops != 0 {
		if !(c.tflops > 0) || macs == 0 {
			return sim.CostModel{}, 0, fmt.Errorf("-device-tflops %v with -cost-net %s: want > 0 and a network of known FLOPs", c.tflops, c.net)
		}
		sample = sim.Device{FLOPS: c.tflops * 1e12}.SampleTime(macs)
		cm.ComputeScale = sim.ComputeScaleFor(sample, ref)
	}
	return cm, sample, nil
}

// printCost writes the scenario's comp/comm line (sim.EstimateStep) when
// a cost model is selected.
func printCost(w io.Writer, c costOptions, cfg sim.Config, sc sim.Scenario, sample time.Duration) {
	if c.net == "" {
		return
	}
	est, err := sim.EstimateStep(cfg, nil, sample)
	if err != nil {
		fmt.Fprintf(w, "cost %s: %v\n", sc.Name, err)
		return
	}
	fmt.Fprintf(w, "cost %s (%s, %g Gbit/s, %d server(s), %v/sample): %v\n", sc.Name, c.net, c.link, c.servers, sample.Round(100*time.Nanosecond), est)
}

// printScenarioCost writes a scenario's comp/comm line for the trained
// model m (nothing without -cost-net).
func printScenarioCost(o options, sc sim.Scenario, m model.Model) error {
	sc, err := o.cost.withCurve(sc)
	if err != nil {
		return err
	}
	speed, err := sc.Model()
	if err != nil {
		return err
	}
	cfg := simConfig(o, sc)
	var sample time.Duration
	if cfg.Cost, sample, err = o.cost.costModel(sc, m, speed); err != nil {
		return err
	}
	printCost(o.stdout, o.cost, cfg, sc, sample)
	return nil
}

// newCNN is LeNet-5 (model.DefaultCNNConfig) for d's classes, on 28×28
// one-channel images.
func newCNN(d *model.Dataset) (model.Model, error) {
	cfg := model.DefaultCNNConfig()
	cfg.Classes = d.Classes
	if n := cfg.Height * cfg.Width * cfg.Channels; n != d.D {
		return nil, fmt.Errorf("-model cnn wants %dx%d images (MNIST: -data mnist), the data has %d values per row", cfg.Height, cfg.Width, d.D)
	}
	return model.NewCNN(cfg)
}
