package coflowsim

import (
	"math"
	"sort"
)

const mib = 1048576.0

var debugf func(string, ...any)

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
}

type policy interface {
	// insert places a newly admitted job into s.active.
	insert(s *sim, j *job)
	// allocate sets the rate of every unfinished flow of every active job.
	allocate(s *sim)
}

func buildJobs(tr *Trace, cfg Config) []*job {
	rng := newJavaRand(cfg.Seed)
	portBytes := cfg.PortBps / 8
	jobs := make([]*job, len(tr.Coflows))
	for i, c := range tr.Coflows {
		j := &job{idx: i, id: c.ID, arrival: c.ArrivalMs, numMappers: len(c.Mappers), numReducers: len(c.Reducers)}
		send := map[int]float64{}
		recv := map[int]float64{}
		nm := float64(len(c.Mappers))
		j.redActive = make([]int, len(c.Reducers))
		j.redFinish = make([]int64, len(c.Reducers))
		for ri, r := range c.Reducers {
			perFlowMB := math.Ceil(r.MB / nm)
			if perFlowMB < 1 {
				perFlowMB = 1
			}
			bytes := perFlowMB * nm * mib
			j.totalBytes += bytes
			j.maxBytes = math.Max(j.maxBytes, bytes)
			per := bytes / nm
			for _, m := range c.Mappers {
				f := &flow{src: m, dst: r.Port, size: per, rem: per, job: j, red: ri}
				j.flows = append(j.flows, f)
				send[m] += per
				recv[r.Port] += per
				j.redActive[ri]++
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
		if added > 0 {
			s.sched.allocate(s)
		}
		for q := int64(0); q < E; q += Q {
			if s.step(epoch+q) {
				s.now = epoch + q + Q
				s.sched.allocate(s)
			}
		}
	}
}

// step advances every flow by one quantum starting at t and reports
// whether a job departed.
func (s *sim) step(t int64) bool {
	Q := s.cfg.QuantumMs
	frac := float64(Q) / float64(s.cfg.SecondMs)
	departed := false
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
			if f.rem <= s.cfg.zero {
				f.done = true
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
			f.rate = 0
			if f.done {
				continue
			}
			send[f.src] += f.rem
			recv[f.dst] += f.rem
		}
		alpha := 0.0
		unknown := false
		for i := range send {
			if send[i] > 0 {
				if s.sendFree[i] <= s.cfg.zero {
					unknown = true
					break
				}
				alpha = math.Max(alpha, send[i]*8/s.sendFree[i])
			}
			if recv[i] > 0 {
				if s.recvFree[i] <= s.cfg.zero {
					unknown = true
					break
				}
				alpha = math.Max(alpha, recv[i]*8/s.recvFree[i])
			}
		}
		if unknown {
			skipped = append(skipped, j)
			continue
		}
		if debugf != nil {
			debugf("now=%d job %d alpha=%v\n", s.now, j.id, alpha)
		}
		for _, f := range j.flows {
			if f.done {
				continue
			}
			r := f.rem * 8 / alpha
			r = math.Min(r, math.Min(s.sendFree[f.src], s.recvFree[f.dst]))
			f.rate = r
			s.sendFree[f.src] -= r
			s.recvFree[f.dst] -= r
		}
	}
	_ = skipped
	// backfill
	bf := append([]*job(nil), s.active...)
	sort.SliceStable(bf, func(a, b int) bool {
		return bf[a].start+bf[a].deadline-s.now < bf[b].start+bf[b].deadline-s.now
	})
	for _, j := range bf {
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
