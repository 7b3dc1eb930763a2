package fvdf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/falconml/falcon/coflow"
)

// DAGConfig is the multi-stage job model (ours; Swallow's is not public).
// A job is a chain of 1..k shuffle stages, k drawn per job from
// StageWeights. Stage 1 is the trace's coflow, arriving when the job's map
// stage ends (map time from JobConfig). After shuffle s its reducers run:
//
//	compute_s = ReduceBase + ReducePerMiB · (V_s MiB / #dst_s) · ε
//	io_s      = W_s / (#dst_s · DiskBps)
//
// with V_s the raw and W_s the wire bytes of shuffle s: the reducers read
// the shuffle files as they were written (ρ·V when compressed, V raw), in
// parallel across the #dst_s destination ports. Shuffle s+1 is released
// when reducers of s end (compute_s + io_s after shuffle s completes) and
// is shuffle s's pattern reversed (each flow's ends swapped: the next
// stage's mappers run where this one reduced) with NextBytes × its bytes.
// The job ends after the last stage's compute and io:
//
//	JCT = map + (finish of the last shuffle − arrival of the first)
//	      + compute_last + io_last
//
// Degenerate case: StageWeights {1} and DiskBps 0 give JCT = map + CCT +
// reduce, the one-stage formula of [Jobs], with the same draws.
type DAGConfig struct {
	// Jobs holds the compute constants (map and reduce stages).
	Jobs JobConfig
	// StageWeights[k-1] is the probability of a job of k shuffle stages.
	// Nil means {1}: every job has one stage.
	StageWeights []float64
	// NextBytes scales a later stage's bytes from its parent's, in (0, 1].
	// Zero means 0.5.
	NextBytes float64
	// DiskBps is the rate (bytes/s) at which one destination port reads its
	// shuffle input as written. Zero means no I/O term.
	DiskBps float64
	// Seed seeds the stage counts and the later stages' compute noise
	// (JobConfig.Seed seeds the first stage's, as in Jobs).
	Seed uint64
}

// Validate fills zero fields with defaults and reports invalid ones.
func (c *DAGConfig) Validate() error {
	if err := c.Jobs.Validate(); err != nil {
		return err
	}
	if len(c.StageWeights) == 0 {
		c.StageWeights = []float64{1}
	}
	var sum float64
	for _, w := range c.StageWeights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("%w: stage weight %v", ErrConfig, w)
		}
		sum += w
	}
	if !(sum > 0) {
		return fmt.Errorf("%w: stage weights sum to %v", ErrConfig, sum)
	}
	if c.NextBytes == 0 {
		c.NextBytes = 0.5
	}
	if !(c.NextBytes > 0 && c.NextBytes <= 1) {
		return fmt.Errorf("%w: NextBytes %v must be in (0, 1]", ErrConfig, c.NextBytes)
	}
	if !(c.DiskBps >= 0) || math.IsInf(c.DiskBps, 0) {
		return fmt.Errorf("%w: DiskBps %v", ErrConfig, c.DiskBps)
	}
	return nil
}

// JobPlan is a workload of multi-stage jobs ready for coflow.Sim.
type JobPlan struct {
	// Coflows are the trace's coflows (job j's first stage at index j),
	// then every later stage, with Parent, ReleaseDelay and
	// ReleasePerWireByte set.
	Coflows []coflow.Coflow
	// Stages[j] lists job j's coflow indices, first stage first.
	Stages [][]int
	// Map[j] is job j's map time; Final[j] its last stage's reduce compute
	// and FinalPerWireByte[j] its last stage's io seconds per wire byte.
	Map, Final       []time.Duration
	FinalPerWireByte []float64
	// Raw, set by CompressAtWrite (nil otherwise), is each coflow's raw
	// bytes; its Coflows then carry the compressed bytes. CodecCPUSeconds
	// is the codec core-time CompressAtWrite charged to the compute stages.
	Raw             []float64
	CodecCPUSeconds float64
}

func ports(c *coflow.Coflow) (src, dst int) {
	s, d := map[int]bool{}, map[int]bool{}
	for _, f := range c.Flows {
		s[f.Src], d[f.Dst] = true, true
	}
	return len(s), len(d)
}

// PlanJobs builds the multi-stage jobs around cfs (one job per coflow).
// Classes (coflow.Flow.Class) are inherited by the later stages.
func PlanJobs(cfs []coflow.Coflow, cfg DAGConfig) (*JobPlan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	first, err := Jobs(cfs, cfg.Jobs)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x64616773))
	noise := func() float64 {
		if cfg.Jobs.Noise <= 0 {
			return 1
		}
		return math.Exp(cfg.Jobs.Noise * rng.NormFloat64())
	}
	var sumW float64
	for _, w := range cfg.StageWeights {
		sumW += w
	}
	ioPerByte := func(c *coflow.Coflow) float64 {
		if cfg.DiskBps == 0 {
			return 0
		}
		_, nd := ports(c)
		return 1 / (float64(max(1, nd)) * cfg.DiskBps)
	}
	p := &JobPlan{Coflows: append([]coflow.Coflow(nil), cfs...), Stages: make([][]int, len(cfs)),
		Map: make([]time.Duration, len(cfs)), Final: make([]time.Duration, len(cfs)), FinalPerWireByte: make([]float64, len(cfs))}
	for j := range cfs {
		u := rng.Float64() * sumW
		k := len(cfg.StageWeights)
		for i, w := range cfg.StageWeights {
			if u < w {
				k = i + 1
				break
			}
			u -= w
		}
		p.Map[j] = first[j].MapDuration
		p.Stages[j] = []int{j}
		reduce := first[j].ReduceDuration // stage 1's reducers, as in Jobs
		prev := j
		for s := 2; s <= k; s++ {
			pc := &p.Coflows[prev]
			next := coflow.Coflow{ID: -1, Weight: pc.Weight, Parent: prev + 1, ReleaseDelay: reduce,
				ReleasePerWireByte: ioPerByte(pc), Flows: make([]coflow.Flow, len(pc.Flows))}
			for i, f := range pc.Flows {
				next.Flows[i] = coflow.Flow{ID: f.ID, Src: f.Dst, Dst: f.Src, Bytes: f.Bytes * cfg.NextBytes, Class: f.Class}
			}
			p.Coflows = append(p.Coflows, next)
			prev = len(p.Coflows) - 1
			p.Stages[j] = append(p.Stages[j], prev)
			nc := &p.Coflows[prev]
			_, nd := ports(nc)
			mib := nc.TotalBytes() / coflow.MiB
			reduce = time.Duration(float64(cfg.Jobs.ReduceBase) + float64(cfg.Jobs.ReducePerMiB)*mib/float64(max(1, nd))*noise())
		}
		p.Final[j] = reduce
		p.FinalPerWireByte[j] = ioPerByte(&p.Coflows[prev])
	}
	// Later stages get ids after the trace's, in creation order.
	maxID := 0
	for i := range cfs {
		maxID = max(maxID, cfs[i].ID)
	}
	for i := len(cfs); i < len(p.Coflows); i++ {
		maxID++
		p.Coflows[i].ID = maxID
	}
	return p, nil
}

// JCTs returns every job's completion time from a run of p.Coflows.
func (p *JobPlan) JCTs(res *coflow.Result) []time.Duration {
	out := make([]time.Duration, len(p.Stages))
	for j, st := range p.Stages {
		last := res.Coflows[st[len(st)-1]]
		io := time.Duration(math.Round(p.FinalPerWireByte[j] * last.WireBytes * 1e9))
		out[j] = p.Map[j] + (last.Finish - res.Coflows[st[0]].Arrival) + p.Final[j] + io
	}
	return out
}

// CompressAtWrite returns a copy of p in which every shuffle is compressed
// when its map output is written and decompressed when its reducers read
// it, as Spark does by default (spark.shuffle.compress = true: "Whether to
// compress map output files", with spark.io.compression.codec, lz4 by
// default; Spark configuration guide, "Compression and Serialization").
// It is the baseline "sebf+write-lz4": the network then carries
// already-compressed bytes at full wire rate and the codec's CPU is
// charged to the compute stages, not to the transfer:
//
//   - every flow's bytes become ρ_f·V_f (ρ_f: fabric codec codec on the
//     flow's class, coflow.Fabric.Profile); the copy's flows are sent raw;
//   - the map side of shuffle c takes longer by
//     Δmap_c = max_p (Σ_{f from p} V_f/s_f) / K_p, where s_f is the
//     codec's per-core compression speed for f's class at p
//     (coflow.Fabric.ClassSpeeds) and K_p the port's free cores
//     (Port.FreeCores: the codec cores of the other baselines), spread
//     over them as fluid cores (the study's CPU model); the stage ends
//     with its slowest machine;
//   - the reduce side takes longer by Δred_c = max_p (Σ_{f to p} V_f/u_f) / K_p
//     (decompression at the readers).
//
// A first stage's map ends Δmap later: its Arrival and Map grow by Δmap. A
// later stage is released Δred of its parent plus its own Δmap later
// (ReleaseDelay; its mappers are the parent's reducers, which write it
// compressed). A job's last reduce grows by that stage's Δred (Final).
// ReleasePerWireByte and FinalPerWireByte are unchanged: they already
// charge reading the shuffle as written, now ρ·V. Raw holds every
// coflow's raw bytes and CodecCPUSeconds the codec core-seconds
// (Σ V_f/s_f + V_f/u_f), which the simulator, seeing raw flows, does not
// count. The speeds are the fabric's nominal profiles (no drift). It
// fails with ErrConfig when a port that sends or receives has no free
// cores, or codec is not a fabric codec.
func (p *JobPlan) CompressAtWrite(fab *coflow.Fabric, codec int) (*JobPlan, error) {
	if codec < 1 || codec > len(fab.Codecs) {
		return nil, fmt.Errorf("%w: codec %d not in [1,%d]", ErrConfig, codec, len(fab.Codecs))
	}
	q := &JobPlan{Coflows: make([]coflow.Coflow, len(p.Coflows)), Stages: p.Stages,
		Map: append([]time.Duration(nil), p.Map...), Final: append([]time.Duration(nil), p.Final...),
		FinalPerWireByte: p.FinalPerWireByte, Raw: make([]float64, len(p.Coflows))}
	n := fab.NumPorts()
	cin, cout := make([]float64, n), make([]float64, n)
	dmap, dred := make([]time.Duration, len(p.Coflows)), make([]time.Duration, len(p.Coflows))
	sec := func(x float64) time.Duration { return time.Duration(math.Round(x * 1e9)) }
	for i := range p.Coflows {
		c := p.Coflows[i]
		c.Flows = append([]coflow.Flow(nil), c.Flows...)
		clear(cin)
		clear(cout)
		for j := range c.Flows {
			f := &c.Flows[j]
			if f.Class < 0 || f.Class >= fab.NumClasses() {
				return nil, fmt.Errorf("%w: coflow index %d flow %d: class %d, fabric has %d", ErrConfig, i, j, f.Class, fab.NumClasses())
			}
			if f.Src < 0 || f.Src >= n || f.Dst < 0 || f.Dst >= n {
				return nil, fmt.Errorf("%w: coflow index %d flow %d: ports %d->%d outside [0,%d)", ErrConfig, i, j, f.Src, f.Dst, n)
			}
			s, u := fab.ClassSpeeds(f.Src, f.Dst, f.Class, codec)
			cin[f.Src] += f.Bytes / s
			cout[f.Dst] += f.Bytes / u
			q.CodecCPUSeconds += f.Bytes/s + f.Bytes/u
			q.Raw[i] += f.Bytes
			f.Bytes *= fab.Profile(f.Class, codec).Ratio
		}
		var tm, tr float64
		for port := range n {
			k := fab.Ports[port].FreeCores()
			if (cin[port] > 0 || cout[port] > 0) && !(k > 0) {
				return nil, fmt.Errorf("%w: port %d has no free cores to compress at write", ErrConfig, port)
			}
			if cin[port] > 0 {
				tm = math.Max(tm, cin[port]/k)
			}
			if cout[port] > 0 {
				tr = math.Max(tr, cout[port]/k)
			}
		}
		dmap[i], dred[i] = sec(tm), sec(tr)
		q.Coflows[i] = c
	}
	for i := range q.Coflows {
		c := &q.Coflows[i]
		if c.Parent == 0 {
			c.Arrival += dmap[i]
		} else {
			c.ReleaseDelay += dred[c.Parent-1] + dmap[i]
		}
	}
	for j, st := range q.Stages {
		q.Map[j] += dmap[st[0]]
		q.Final[j] += dred[st[len(st)-1]]
	}
	return q, nil
}

// RawBytes returns the plan's total raw bytes: Raw's sum after
// CompressAtWrite, else the coflows' bytes.
func (p *JobPlan) RawBytes() float64 {
	var s float64
	for i := range p.Coflows {
		if p.Raw != nil {
			s += p.Raw[i]
		} else {
			s += p.Coflows[i].TotalBytes()
		}
	}
	return s
}
