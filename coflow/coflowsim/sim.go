package coflowsim

import (
	"math"
	"sort"

	"github.com/falconml/falcon/coflow"
)

const mib = 1048576.0

var debugf func(string, ...any)
var dumpHook func(*sim)

type variantT struct {
	mapperMajor   bool
	ignoreFull    bool
	bfPlain       bool // backfill in sortedJobs order
	skipFair      int  // 0 none, 1 equal split per port among skipped flows
	noReset       bool
	skipCheck     int
	alphaMode     int
	capMode       int
	flowRecompute int
	fairMode      int
	pfpKey        int
	epochAlways   bool
	bfMode        int
	darkMode      int
}

var variant = variantT{skipFair: 2, fairMode: 1, darkMode: 2}

type flow struct {
	src, dst int
	size     float64
	rem      float64
	rate     float64 // bits per simulated second
	job      *job
	red      int
	done     bool
}

type job struct {
	idx         int
	id          int
	arrival     int64
	numMappers  int
	numReducers int
	totalBytes  float64
	maxBytes    float64
	alpha       float64 // static bottleneck bytes
	deadline    int64   // ms
	start       int64
	finish      int64
	flows       []*flow
	mapPorts    []int
	redPorts    []int
	redActive   []int
	redFinish   []int64
	active      int
	sent        float64
	done        bool
}

type sim struct {
	cfg      Config
	ports    int
	jobs     []*job
	active   []*job
	sendFree []float64
	recvFree []float64
	sched    policy
	now      int64
	progress bool
	flowDone bool
	stalled  bool
}

type policy interface {
	// insert places a newly admitted job into s.active.
	insert(s *sim, j *job)
	// allocate sets the rate of every unfinished flow of every active job.
	allocate(s *sim)
}

func buildJobs(tr *coflow.Trace, cfg Config) []*job {
	rng := newJavaRand(cfg.Seed)
	portBytes := cfg.PortBps / 8
	jobs := make([]*job, len(tr.Coflows))
	for i, c := range tr.Coflows {
		j := &job{idx: i, id: c.ID, arrival: c.ArrivalMS, numMappers: len(c.Mappers), numReducers: len(c.Reducers)}
		send := map[int]float64{}
		recv := map[int]float64{}
		nm := float64(len(c.Mappers))
		j.redActive = make([]int, len(c.Reducers))
		j.redFinish = make([]int64, len(c.Reducers))
		j.mapPorts = c.Mappers
		for _, r := range c.Reducers {
			j.redPorts = append(j.redPorts, r.Port)
		}
		pers := make([]float64, len(c.Reducers))
		for ri, r := range c.Reducers {
			perFlowMB := math.Ceil(r.MB / nm)
			if perFlowMB < 1 {
				perFlowMB = 1
			}
			bytes := perFlowMB * nm * mib
			j.totalBytes += bytes
			j.maxBytes = math.Max(j.maxBytes, bytes)
			pers[ri] = bytes / nm
		}
		add := func(ri, m int) {
			r := c.Reducers[ri]
			per := pers[ri]
			f := &flow{src: m, dst: r.Port, size: per, rem: per, job: j, red: ri}
			j.flows = append(j.flows, f)
			send[m] += per
			recv[r.Port] += per
			j.redActive[ri]++
		}
		if variant.mapperMajor {
			for _, m := range c.Mappers {
				for ri := range c.Reducers {
					add(ri, m)
				}
			}
		} else {
			for ri := range c.Reducers {
				for _, m := range c.Mappers {
					add(ri, m)
				}
			}
		}
		for _, v := range send {
			j.alpha = math.Max(j.alpha, v)
		}
		for _, v := range recv {
			j.alpha = math.Max(j.alpha, v)
		}
		j.active = len(j.flows)
		u := rng.nextDouble()
		j.deadline = int64(math.Round(j.alpha / portBytes * 1000 * (1 + u)))
		jobs[i] = j
	}
	return jobs
}

func (s *sim) run() {
	E, Q := s.cfg.EpochMs, s.cfg.QuantumMs
	next := 0
	for epoch := int64(0); next < len(s.jobs) || len(s.active) > 0; epoch += E {
		added := 0
		for next < len(s.jobs) && s.jobs[next].arrival < epoch+E {
			j := s.jobs[next]
			j.start = epoch
			s.sched.insert(s, j)
			next++
			added++
		}
		s.now = epoch
		if added > 0 || (variant.epochAlways && len(s.active) > 0) {
			s.sched.allocate(s)
			if dumpHook != nil {
				dumpHook(s)
			}
		}
		s.progress = false
		for q := int64(0); q < E; q += Q {
			if s.step(epoch+q) || (variant.flowRecompute == 1 && s.flowDone) || variant.flowRecompute == 2 {
				s.now = epoch + q + Q
				s.sched.allocate(s)
				if dumpHook != nil {
					dumpHook(s)
				}
			}
		}
		if !s.progress && added == 0 && next >= len(s.jobs) && len(s.active) > 0 && !variant.epochAlways {
			s.stalled = true
			return
		}
	}
}

// step advances every flow by one quantum starting at t and reports
// whether a job departed.
func (s *sim) step(t int64) bool {
	Q := s.cfg.QuantumMs
	frac := float64(Q) / float64(s.cfg.SecondMs)
	departed := false
	s.flowDone = false
	for _, j := range s.active {
		for _, f := range j.flows {
			if f.done {
				continue
			}
			b := f.rate / 8 * frac
			if b > f.rem {
				b = f.rem
			}
			f.rem -= b
			j.sent += b
			if b > 0 {
				s.progress = true
			}
			if f.rem <= s.cfg.zero {
				f.done = true
				s.flowDone = true
				j.active--
				j.redActive[f.red]--
				if j.redActive[f.red] == 0 {
					j.redFinish[f.red] = t + Q
				}
			}
		}
		if j.active == 0 {
			j.done = true
			j.finish = t + Q
			departed = true
			if debugf != nil {
				debugf("t=%d job %d done\n", t+Q, j.id)
			}
		}
	}
	if departed {
		k := 0
		for _, j := range s.active {
			if !j.done {
				s.active[k] = j
				k++
			}
		}
		s.active = s.active[:k]
	}
	return departed
}

func (s *sim) resetFree() {
	for i := range s.sendFree {
		s.sendFree[i] = s.cfg.PortBps
		s.recvFree[i] = s.cfg.PortBps
	}
}

// ---- ordering-based schedulers (FIFO, SCF, NCF, LCF, SEBF) ----

type ordered struct {
	key func(j *job) float64 // nil = FIFO
}

func (o *ordered) insert(s *sim, j *job) {
	if o.key == nil {
		s.active = append(s.active, j)
		return
	}
	k := o.key(j)
	pos := sort.Search(len(s.active), func(i int) bool { return o.key(s.active[i]) > k })
	s.active = append(s.active, nil)
	copy(s.active[pos+1:], s.active[pos:])
	s.active[pos] = j
}

func (o *ordered) allocate(s *sim) {
	s.resetFree()
	send := make([]float64, s.ports)
	recv := make([]float64, s.ports)
	var skipped []*job
	for _, j := range s.active {
		for i := range send {
			send[i], recv[i] = 0, 0
		}
		for _, f := range j.flows {
			if !variant.noReset {
				f.rate = 0
			}
			if f.done {
				continue
			}
			send[f.src] += f.rem
			recv[f.dst] += f.rem
		}
		alpha := 0.0
		unknown := false
		switch variant.skipCheck {
		case 0:
			for i := range send {
				if (send[i] > 0 && s.sendFree[i] <= s.cfg.zero) || (recv[i] > 0 && s.recvFree[i] <= s.cfg.zero) {
					unknown = true
				}
			}
		case 1, 2:
			for _, p := range j.redPorts {
				if s.recvFree[p] <= s.cfg.zero {
					unknown = true
				}
			}
			if variant.skipCheck == 2 {
				for _, p := range j.mapPorts {
					if s.sendFree[p] <= s.cfg.zero {
						unknown = true
					}
				}
			}
		case 3: // reducer ports with bytes only
			for i := range recv {
				if recv[i] > 0 && s.recvFree[i] <= s.cfg.zero {
					unknown = true
				}
			}
		}
		if unknown {
			skipped = append(skipped, j)
			if variant.skipFair == 6 || variant.skipFair == 8 {
				ns := make([]int, s.ports)
				nr := make([]int, s.ports)
				for _, f := range j.flows {
					if !f.done {
						ns[f.src]++
						nr[f.dst]++
					}
				}
				ss := append([]float64(nil), s.sendFree...)
				rr := append([]float64(nil), s.recvFree...)
				for _, f := range j.flows {
					if f.done {
						continue
					}
					var r float64
					if variant.skipFair == 6 {
						r = math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
					} else {
						r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
						ns[f.src]--
						nr[f.dst]--
					}
					f.rate = r
					s.sendFree[f.src] -= r
					s.recvFree[f.dst] -= r
				}
			}
			if variant.skipFair == 7 {
				var fl []*flow
				for _, f := range j.flows {
					if !f.done {
						fl = append(fl, f)
					}
				}
				maxMin(fl, s.sendFree, s.recvFree)
			}
			continue
		}
		for i := range send {
			if recv[i] > 0 {
				alpha = math.Max(alpha, recv[i]*8/s.recvFree[i])
			}
			if send[i] > 0 {
				switch variant.alphaMode {
				case 0:
					alpha = math.Max(alpha, send[i]*8/s.sendFree[i])
				case 1:
				case 2:
					alpha = math.Max(alpha, send[i]*8/s.cfg.PortBps)
				case 3:
					if s.sendFree[i] > s.cfg.zero {
						alpha = math.Max(alpha, send[i]*8/s.sendFree[i])
					}
				}
			}
		}
		if debugf != nil {
			debugf("now=%d job %d alpha=%v\n", s.now, j.id, alpha)
		}
		for _, f := range j.flows {
			if f.done {
				continue
			}
			r := f.rem * 8 / alpha
			if variant.capMode == 0 {
				r = math.Min(r, math.Min(s.sendFree[f.src], s.recvFree[f.dst]))
			}
			f.rate = r
			s.sendFree[f.src] -= r
			s.recvFree[f.dst] -= r
		}
	}
	if variant.skipFair == 1 && len(skipped) > 0 {
		ns := make([]int, s.ports)
		nr := make([]int, s.ports)
		for _, j := range skipped {
			for _, f := range j.flows {
				if !f.done {
					ns[f.src]++
					nr[f.dst]++
				}
			}
		}
		ss := append([]float64(nil), s.sendFree...)
		rr := append([]float64(nil), s.recvFree...)
		for _, j := range skipped {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				r := math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
	}
	if (variant.skipFair == 3 || variant.skipFair == 5) && len(skipped) > 0 {
		ns := make([]int, s.ports)
		nr := make([]int, s.ports)
		for _, j := range s.active {
			for _, f := range j.flows {
				if !f.done {
					ns[f.src]++
					nr[f.dst]++
				}
			}
		}
		ss := append([]float64(nil), s.sendFree...)
		rr := append([]float64(nil), s.recvFree...)
		if variant.skipFair == 5 {
			for i := range ss {
				ss[i], rr[i] = s.cfg.PortBps, s.cfg.PortBps
			}
		}
		for _, j := range skipped {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				r := math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
				r = math.Min(r, math.Min(s.sendFree[f.src], s.recvFree[f.dst]))
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
	}
	if variant.skipFair == 4 {
		for _, j := range skipped {
			ns := make([]int, s.ports)
			nr := make([]int, s.ports)
			for _, f := range j.flows {
				if !f.done {
					ns[f.src]++
					nr[f.dst]++
				}
			}
			ss := append([]float64(nil), s.sendFree...)
			rr := append([]float64(nil), s.recvFree...)
			for _, f := range j.flows {
				if f.done {
					continue
				}
				r := math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
	}
	isSkipped := map[*job]bool{}
	for _, j := range skipped {
		isSkipped[j] = true
	}
	maxMinSkipped := func() {
		var fl []*flow
		for _, j := range skipped {
			for _, f := range j.flows {
				if !f.done {
					if variant.skipFair == 2 {
						f.rate = 0
					}
					fl = append(fl, f)
				}
			}
		}
		maxMin(fl, s.sendFree, s.recvFree)
	}
	if variant.skipFair == 9 || variant.skipFair == 10 {
		ns := make([]int, s.ports)
		nr := make([]int, s.ports)
		for _, j := range skipped {
			for _, f := range j.flows {
				if !f.done {
					ns[f.src]++
					nr[f.dst]++
				}
			}
		}
		for _, j := range skipped {
			for _, f := range j.flows {
				if f.done {
					continue
				}
				r := math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
				if variant.skipFair == 10 {
					ns[f.src]--
					nr[f.dst]--
				}
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
	}
	switch variant.bfMode {
	case 0:
		if variant.skipFair == 2 {
			maxMinSkipped()
		}
		s.backfill(func(j *job) bool { return true })
	case 1:
		s.backfill(func(j *job) bool { return true })
		maxMinSkipped()
	case 2:
		s.backfill(func(j *job) bool { return !isSkipped[j] })
		maxMinSkipped()
		s.backfill(func(j *job) bool { return isSkipped[j] })
	case 3:
		s.backfill(func(j *job) bool { return !isSkipped[j] })
		maxMinSkipped()
	}
}

func (s *sim) backfill(use func(*job) bool) {
	bf := append([]*job(nil), s.active...)
	if !variant.bfPlain {
		sort.SliceStable(bf, func(a, b int) bool {
			return bf[a].start+bf[a].deadline-s.now < bf[b].start+bf[b].deadline-s.now
		})
	}
	for _, j := range bf {
		if !use(j) {
			continue
		}
		for _, f := range j.flows {
			if f.done {
				continue
			}
			m := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
			f.rate += m
			s.sendFree[f.src] -= m
			s.recvFree[f.dst] -= m
		}
	}
}

// maxMin raises the rates of fl by max-min fair (progressive) filling of
// the free capacities, and subtracts what it used. All unfrozen flows rise
// by the same increment, the smallest free/count over the ports they use;
// flows through a port that fills are frozen.
func maxMin(fl []*flow, sendFree, recvFree []float64) {
	n := len(sendFree)
	if len(fl) == 0 {
		return
	}
	ns := make([]int, n)
	nr := make([]int, n)
	bySrc := make([][]int32, n)
	byDst := make([][]int32, n)
	for i, f := range fl {
		ns[f.src]++
		nr[f.dst]++
		bySrc[f.src] = append(bySrc[f.src], int32(i))
		byDst[f.dst] = append(byDst[f.dst], int32(i))
	}
	base := make([]float64, len(fl))
	for i, f := range fl {
		base[i] = f.rate
	}
	frozen := make([]bool, len(fl))
	left := len(fl)
	level := 0.0
	freeze := func(i int32) {
		if frozen[i] {
			return
		}
		frozen[i] = true
		left--
		f := fl[i]
		f.rate = base[i] + level
		ns[f.src]--
		nr[f.dst]--
	}
	for left > 0 {
		inc := math.Inf(1)
		for p := 0; p < n; p++ {
			if ns[p] > 0 {
				inc = math.Min(inc, sendFree[p]/float64(ns[p]))
			}
			if nr[p] > 0 {
				inc = math.Min(inc, recvFree[p]/float64(nr[p]))
			}
		}
		if inc < 0 {
			inc = 0
		}
		level += inc
		for p := 0; p < n; p++ {
			if ns[p] > 0 {
				sendFree[p] -= inc * float64(ns[p])
			}
			if nr[p] > 0 {
				recvFree[p] -= inc * float64(nr[p])
			}
		}
		for p := 0; p < n; p++ {
			if ns[p] > 0 && (sendFree[p] <= 1e-6 || sendFree[p]/float64(ns[p]) <= inc*1e-12) {
				for _, i := range bySrc[p] {
					freeze(i)
				}
			}
			if nr[p] > 0 && (recvFree[p] <= 1e-6 || recvFree[p]/float64(nr[p]) <= inc*1e-12) {
				for _, i := range byDst[p] {
					freeze(i)
				}
			}
		}
	}
}

// ---- per-flow schedulers ----

type fair struct{}

func (fair) insert(s *sim, j *job) { s.active = append(s.active, j) }

func (fair) allocate(s *sim) {
	s.resetFree()
	var fl []*flow
	for _, j := range s.active {
		for _, f := range j.flows {
			f.rate = 0
			if !f.done {
				fl = append(fl, f)
			}
		}
	}
	if variant.fairMode == 1 {
		ns := make([]int, s.ports)
		nr := make([]int, s.ports)
		for _, f := range fl {
			ns[f.src]++
			nr[f.dst]++
		}
		for _, f := range fl {
			f.rate = math.Min(s.cfg.PortBps/float64(ns[f.src]), s.cfg.PortBps/float64(nr[f.dst]))
		}
		return
	}
	maxMin(fl, s.sendFree, s.recvFree)
}

type pfp struct{}

func (pfp) insert(s *sim, j *job) { s.active = append(s.active, j) }

func (pfp) allocate(s *sim) {
	s.resetFree()
	var fl []*flow
	for _, j := range s.active {
		for _, f := range j.flows {
			f.rate = 0
			if !f.done {
				fl = append(fl, f)
			}
		}
	}
	key := func(f *flow) float64 {
		switch variant.pfpKey {
		case 1:
			return f.size
		case 2:
			return f.job.totalBytes - f.job.sent
		case 3:
			return -f.rem
		}
		return f.rem
	}
	sort.SliceStable(fl, func(a, b int) bool { return key(fl[a]) < key(fl[b]) })
	for _, f := range fl {
		r := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
		f.rate = r
		s.sendFree[f.src] -= r
		s.recvFree[f.dst] -= r
	}
}

type dark struct{}

func (dark) insert(s *sim, j *job) { s.active = append(s.active, j) }

func darkQueue(sent float64) int {
	limit := 10 * mib
	for q := 0; q < 9; q++ {
		if sent < limit {
			return q
		}
		limit *= 10
	}
	return 9
}

func (dark) allocate(s *sim) {
	s.resetFree()
	order := append([]*job(nil), s.active...)
	sort.SliceStable(order, func(a, b int) bool { return darkQueue(order[a].sent) < darkQueue(order[b].sent) })
	ns := make([]int, s.ports)
	nr := make([]int, s.ports)
	if variant.darkMode >= 3 {
		for k := 0; k < len(order); {
			q := darkQueue(order[k].sent)
			e := k
			for e < len(order) && darkQueue(order[e].sent) == q {
				e++
			}
			for i := range ns {
				ns[i], nr[i] = 0, 0
			}
			for _, j := range order[k:e] {
				for _, f := range j.flows {
					f.rate = 0
					if !f.done {
						ns[f.src]++
						nr[f.dst]++
					}
				}
			}
			ss := append([]float64(nil), s.sendFree...)
			rr := append([]float64(nil), s.recvFree...)
			for _, j := range order[k:e] {
				for _, f := range j.flows {
					if f.done {
						continue
					}
					var r float64
					switch variant.darkMode {
					case 3:
						r = math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
					case 4:
						r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
					case 5:
						r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
						ns[f.src]--
						nr[f.dst]--
					}
					f.rate = r
					s.sendFree[f.src] -= r
					s.recvFree[f.dst] -= r
				}
			}
			k = e
		}
		return
	}
	for _, j := range order {
		for i := range ns {
			ns[i], nr[i] = 0, 0
		}
		for _, f := range j.flows {
			f.rate = 0
			if !f.done {
				ns[f.src]++
				nr[f.dst]++
			}
		}
		ss := append([]float64(nil), s.sendFree...)
		rr := append([]float64(nil), s.recvFree...)
		for _, f := range j.flows {
			if f.done {
				continue
			}
			var r float64
			switch variant.darkMode {
			case 0:
				r = math.Min(ss[f.src]/float64(ns[f.src]), rr[f.dst]/float64(nr[f.dst]))
			case 1:
				r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
			case 2:
				r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
				ns[f.src]--
				nr[f.dst]--
			}
			f.rate = r
			s.sendFree[f.src] -= r
			s.recvFree[f.dst] -= r
		}
	}
}

func (fair) perFlow() bool { return true }
func (pfp) perFlow() bool  { return true }
