package clusterbin

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/model/mnist"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/layout"
)

// policies maps each -policy name to its constructor. The baselines run at
// their constructors' documented defaults; ssp and epsp-slack use
// -staleness, epsp-* use -cores as each worker host's core budget.
var policies = map[string]func(o *options) (epsp.Policy, error){
	"bsp": func(*options) (epsp.Policy, error) { return epsp.NewBSP(), nil },
	"asp": func(*options) (epsp.Policy, error) { return epsp.NewASP(), nil },
	"ssp": func(o *options) (epsp.Policy, error) {
		if o.staleness < 0 {
			return nil, fmt.Errorf("%w: -staleness %d", errUsage, o.staleness)
		}
		return epsp.NewSSP(o.staleness), nil
	},
	"epsp-enforced": func(o *options) (epsp.Policy, error) { return newEPSP(o, 0) },
	"epsp-slack": func(o *options) (epsp.Policy, error) {
		if o.staleness < 1 {
			return nil, fmt.Errorf("%w: epsp-slack needs -staleness >= 1", errUsage)
		}
		return newEPSP(o, o.staleness)
	},
	"flexrr":   func(*options) (epsp.Policy, error) { return epsp.NewFlexRR(epsp.DefaultFlexRRConfig()) },
	"sync-opt": func(*options) (epsp.Policy, error) { return epsp.NewSyncOpt(epsp.DefaultSyncOptConfig()) },
	"consgd":   func(*options) (epsp.Policy, error) { return epsp.NewConSGD(epsp.DefaultConSGDConfig()) },
	"dynsgd":   func(*options) (epsp.Policy, error) { return epsp.NewDynSGD(epsp.DefaultDynSGDConfig()) },
	"lbbsp":    func(*options) (epsp.Policy, error) { return epsp.NewLBBSP(epsp.DefaultLBBSPConfig()) },
	"dssp":     func(*options) (epsp.Policy, error) { return epsp.NewDSSP(epsp.DefaultDSSPConfig()) },
}

func policyNames() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newPolicy(o *options) (epsp.Policy, error) {
	f, ok := policies[o.policy]
	if !ok {
		return nil, fmt.Errorf("%w: -policy %q (want one of %s)", errUsage, o.policy, strings.Join(policyNames(), ", "))
	}
	return f(o)
}

// newEPSP is Falcon's policy with elastic parallelism and task transfer on;
// every worker is taken to be on its own host with -cores cores (no
// Topology: the coordinator does not know the real machines).
func newEPSP(o *options, s int) (epsp.Policy, error) {
	c := epsp.DefaultEPSPConfig()
	c.Staleness = s
	c.Parallelism.PMax = o.cores
	return epsp.NewEPSP(c)
}

// parseSlow reads -slow: "worker-2=4,1=1.5" → factor per worker index.
func parseSlow(s string, workers int) ([]float64, error) {
	f := make([]float64, workers)
	for i := range f {
		f[i] = 1
	}
	if s == "" {
		return f, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		i, ierr := strconv.Atoi(strings.TrimPrefix(name, "worker-"))
		x, xerr := strconv.ParseFloat(val, 64)
		if !ok || ierr != nil || xerr != nil || i < 0 || i >= workers || !(x >= 1) || x > 1e4 {
			return nil, fmt.Errorf("%w: -slow entry %q (want worker-<i>=factor, 0 <= i < %d, factor >= 1)", errUsage, part, workers)
		}
		f[i] = x
	}
	return f, nil
}

// job is what every role derives from the flags alone, identically: the
// model, its parameter keys and initial values, and the data.
type job struct {
	m           model.Model
	keys        []uint64
	lens        []int
	init        vecInit
	partitioner layout.Partitioner
	train, test *model.Dataset
}

// newJob builds the model and its key layout; it loads the training set
// when needTrain and the test set when needTest.
func newJob(o *options, needTrain, needTest bool) (*job, error) {
	var train, test *model.Dataset
	var dim, classes int
	switch o.dataset {
	case "synthetic", "sparse":
		tr, te, err := model.Synthetic(model.SyntheticConfig{Train: o.trainRows, Test: o.testRows, Seed: o.seed})
		if err != nil {
			return nil, err
		}
		if o.dataset == "sparse" {
			if tr, err = padFeatures(tr, o.pad); err != nil {
				return nil, err
			}
			if te, err = padFeatures(te, o.pad); err != nil {
				return nil, err
			}
		}
		train, test, dim, classes = tr, te, tr.D, tr.Classes
	case "mnist":
		dir, err := mnist.Locate()
		if err != nil {
			return nil, err
		}
		tr, te, err := mnist.Load(dir)
		if err != nil {
			return nil, err
		}
		// Seeded samples: every process draws the same rows.
		train = tr.Sample(o.trainRows, rand.New(rand.NewPCG(o.seed, 0x7a1)))
		test = te.Sample(o.testRows, rand.New(rand.NewPCG(o.seed, 0x7e5)))
		dim, classes = tr.D, tr.Classes
	}
	if !needTrain {
		train = nil
	}
	if !needTest {
		test = nil
	}
	var m model.Model
	if o.modelName == "mlp" {
		m = model.NewMLP(dim, o.hidden, classes)
	} else {
		m = model.NewSoftmax(dim, classes)
	}
	n := m.NumParams()
	kl := o.keyLen
	if kl == 0 {
		kl = min(1024, max(1, (n+4*o.servers-1)/(4*o.servers)))
	}
	j := &job{m: m, train: train, test: test, init: vecInit{v: make([]float32, n), keyLen: kl}}
	for off, k := 0, uint64(0); off < n; off, k = off+kl, k+1 {
		j.keys = append(j.keys, k)
		j.lens = append(j.lens, min(kl, n-off))
	}
	m.Init(j.init.v, rand.New(rand.NewPCG(o.seed, 0x1417)))
	j.partitioner = layout.KeyRange{Servers: o.servers, KeySpace: uint64(len(j.keys))}
	return j, nil
}

// vecInit hands out a seeded parameter vector cut into keys of keyLen
// values: every process computes the same vector, so every Init agrees.
type vecInit struct {
	v      []float32
	keyLen int
}

func (v vecInit) Init(key uint64, off int, vals []float32) {
	copy(vals, v.v[int(key)*v.keyLen+off:])
}

// workerModel is ps.FromModel (model.Model's mean loss and gradient as
// ps.Model's sums, one model copy per computing goroutine) with the
// worker's slowdown injected on the wall clock: a call over n samples
// takes factor·(compute + n·sampleTime).
type workerModel struct {
	grad       ps.Model
	factor     float64
	sampleTime time.Duration
}

func newWorkerModel(m model.Model, train *model.Dataset, factor float64, sampleTime time.Duration) *workerModel {
	return &workerModel{grad: ps.FromModel(m, train), factor: factor, sampleTime: sampleTime}
}

func (wm *workerModel) Gradient(params []float32, samples []int, grad []float32) float64 {
	t0 := time.Now()
	loss := wm.grad.Gradient(params, samples, grad)
	cost := time.Since(t0) + time.Duration(len(samples))*wm.sampleTime
	if d := time.Duration(float64(cost)*wm.factor) - time.Since(t0); d > 0 {
		time.Sleep(d)
	}
	return loss
}

// padFeatures appends pad always-zero features to every row of d: a
// model's weights on them get an exactly-zero gradient in every push, the
// sparse updates of -dataset sparse.
func padFeatures(d *model.Dataset, pad int) (*model.Dataset, error) {
	nd := d.D + pad
	x := make([]float32, d.N*nd)
	for i := range d.N {
		copy(x[i*nd:], d.Row(i))
	}
	return model.NewDataset(x, d.Y, nd, d.Classes)
}
