package coflowsim

// A second research harness, for the per-flow and queue schedulers (PFP,
// DARK), skipped unless its environment variable is set. It replays the
// fixtures with the event engine under switchable policies and reports the
// match count, the first mismatch in trace order and the earliest one in
// time:
//
//	FALCON_LAB2=recv,rkeysize-po  PFP variants (pfpLab; "po": a coflow's
//	                              flows in port order; "rkeysize": per
//	                              receiver by original size)
//	FALCON_LAB3=persistsize       PFP with per-receiver lists kept across
//	                              allocations (pfpPersist)
//	FALCON_LAB4=DARK|DARK:fixu    a scheduler as built (or a darkLab
//	                              variant), with LAB2_DUMP=j15,s9,r11
//	                              LAB2_UNTIL=<ms> LAB2_T=<trace> dumping
//	                              the listed jobs' / ports' flows at every
//	                              allocation, LAB2_JOB=<id> printing one
//	                              coflow's reducer finishes, LAB2_ALL=1
//	                              listing every mismatch
//	FALCON_LAB5=fixu,casc-fixu    DARK variants (darkLab; see RESEARCH.md for
//	                              what they scored; sched.go's rules are
//	                              mv-gt-movqdesc-fixu: bytes sent from
//	                              flow.moved, strict limits, movers from
//	                              the last queue first). LAB5_EQ=1 prints
//	                              the coflows whose bytes sent equal a
//	                              limit at a re-evaluation.

import (
	"fmt"
	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowtest"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// labNewSim prepares a replay of a fixture trace under pol (the lab's
// side tables filled) and returns it with the trace and the reference
// output of refSched.
func labNewSim(t *testing.T, trace, refSched string, pol policy, withRandom bool) (*sim, *coflow.Trace, map[int]refLine) {
	dir := coflowtest.SharedDir(t, "coflowsim-fixtures")
	tr := coflowtest.ReadTraceFile(t, filepath.Join(dir, trace+".txt"))
	ref := readRef(t, filepath.Join(dir, trace+"."+refSched+".out"))
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, ports: tr.Ports, policy: pol, sendFree: make([]float64, tr.Ports), recvFree: make([]float64, tr.Ports)}
	s.jobs = labBuildJobs(tr, cfg, withRandom)
	s.moved = refSched == "DARK"
	return s, tr, ref
}

// labPolicyRun replays trace under pol with the event engine and compares
// with the reference of refSched.
func labPolicyRun(t *testing.T, trace, refSched string, pol policy, withRandom bool) (match, total int, first string) {
	s, _, ref := labNewSim(t, trace, refSched, pol, withRandom)
	s.run()
	if s.stalled {
		first = "STALLED "
	}
	bestT := math.Inf(1)
	bestS := ""
	defer func() {
		if bestS != "" {
			first += " | earliest: " + bestS
		}
	}()
	for _, j := range s.jobs {
		total++
		r := ref[j.id]
		if r.start != float64(j.start) || r.finish != float64(j.finish) {
			if m := math.Min(r.finish, float64(j.finish)); m < bestT {
				bestT = m
				bestS = fmt.Sprintf("JOB-%d finish %d ref %v", j.id, j.finish, r.finish)
			}
		}
		if labGetenv("LAB2_JOB") == strconv.Itoa(j.id) {
			var sum int64
			for _, f := range j.redFinish {
				sum += f - j.start
			}
			t.Logf("  %s JOB-%d finish %d ref %v sums %d ref %v reducers %v", trace, j.id, j.finish, r.finish, sum, r.sums, j.redFinish)
		}
		if labGetenv("LAB2_SUMS") != "" && r.start == float64(j.start) && r.finish == float64(j.finish) {
			var sum int64
			for _, f := range j.redFinish {
				sum += f - j.start
			}
			if float64(sum) != r.sums {
				t.Logf("  %s JOB-%d times match (finish %d), sums %d ref %v reducers %v", trace, j.id, j.finish, sum, r.sums, j.redFinish)
			}
		}
		if labGetenv("LAB2_ALL") != "" && (r.start != float64(j.start) || r.finish != float64(j.finish)) {
			t.Logf("  %s JOB-%d finish %d ref %v (dur %d vs %v)", trace, j.id, j.finish, r.finish, j.finish-j.start, r.finish-r.start)
		}
		if r.start == float64(j.start) && r.finish == float64(j.finish) {
			match++
		} else if first == "" {
			var sum int64
			for _, f := range j.redFinish {
				sum += f - j.start
			}
			first = fmt.Sprintf("JOB-%d start %d finish %d (ref %v %v) sums %d (ref %v)", j.id, j.start, j.finish, r.start, r.finish, sum, r.sums)
		}
	}
	return
}

type pfpLab struct {
	v string
}

func (p pfpLab) perFlow() bool {
	return !strings.Contains(p.v, "coflowev")
}

var labSize = map[*flow]float64{}
var labDump *strings.Builder
var labDumpUntil int64
var labDumpJobs = map[int]bool{}
var labDumpPorts = map[int]bool{}
var labJob = map[*flow]*job{}

func (pfpLab) insert(s *sim, j *job) {
	s.active = append(s.active, j)
	for _, f := range j.flows {
		labSize[f] = f.rem
		labJob[f] = j
	}
}
func (p pfpLab) allocate(s *sim) {
	s.resetFree()
	var fl []*flow
	for _, j := range s.active {
		src := j.flows
		if strings.Contains(p.v, "po") {
			src = j.byPort()
		}
		for _, f := range src {
			if !f.done {
				fl = append(fl, f)
			}
		}
	}
	tkey := func(f *flow) float64 {
		if f.rate <= 0 {
			return math.Inf(1)
		}
		return f.rem / f.rate
	}
	switch {
	case strings.Contains(p.v, "rkey"):
		var key func(f *flow) float64
		switch {
		case strings.Contains(p.v, "rawsz"):
			key = func(f *flow) float64 { j := labJob[f]; return lab(j).rawRed[f.red] / float64(j.numMappers) }
		case strings.Contains(p.v, "size"):
			key = func(f *flow) float64 { return labSize[f] }
		case strings.Contains(p.v, "jobrem"):
			key = func(f *flow) float64 { return labJob[f].remaining() }
		case strings.Contains(p.v, "jobtot"):
			key = func(f *flow) float64 { return labJob[f].totalBytes }
		case strings.Contains(p.v, "sent"):
			key = func(f *flow) float64 { return labSize[f] - f.rem }
		}
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return fl[a].dst < fl[b].dst
			}
			if strings.Contains(p.v, "tsrc") && key(fl[a]) == key(fl[b]) {
				return fl[a].src < fl[b].src
			}
			if strings.Contains(p.v, "trem") && key(fl[a]) == key(fl[b]) {
				return fl[a].rem < fl[b].rem
			}
			if strings.Contains(p.v, "tmore") && key(fl[a]) == key(fl[b]) {
				return fl[a].rem > fl[b].rem
			}
			if strings.Contains(p.v, "tjdesc") && key(fl[a]) == key(fl[b]) {
				return labJob[fl[a]].id > labJob[fl[b]].id
			}
			return key(fl[a]) < key(fl[b])
		})
	case strings.Contains(p.v, "rfirst"):
		// receivers in order of first appearance (coflow order, then the
		// coflow's flow order), each receiver's flows by original size
		pos := map[int]int{}
		for _, f := range fl {
			if _, ok := pos[f.dst]; !ok {
				pos[f.dst] = len(pos)
			}
		}
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return pos[fl[a].dst] < pos[fl[b].dst]
			}
			return labSize[fl[a]] < labSize[fl[b]]
		})
	case strings.Contains(p.v, "jhash"):
		// receivers in java.util.HashMap<Integer, …> iteration order
		// (buckets by port & (capacity − 1), capacity 16 doubling past
		// 3/4 full, insertion order inside a bucket), each receiver's
		// flows by original size
		var dsts []int
		seen := map[int]bool{}
		for _, f := range fl {
			if !seen[f.dst] {
				seen[f.dst] = true
				dsts = append(dsts, f.dst)
			}
		}
		capa := 16
		for n := 1; n <= len(dsts); n++ {
			if float64(n) > 0.75*float64(capa) {
				capa *= 2
			}
		}
		pos := map[int]int{}
		slices.SortStableFunc(dsts, func(a, b int) int { return a&(capa-1) - b&(capa-1) })
		for i, d := range dsts {
			pos[d] = i
		}
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return pos[fl[a].dst] < pos[fl[b].dst]
			}
			return labSize[fl[a]] < labSize[fl[b]]
		})
	case strings.Contains(p.v, "gred"):
		// one global order by the reducer's original bytes (flow size ×
		// mappers), "gredrem": by the reducer's remaining bytes
		rb := func(f *flow) float64 {
			j := labJob[f]
			if strings.Contains(p.v, "gredrem") {
				r := 0.0
				for _, g := range j.flows {
					if g.red == f.red {
						r += g.rem
					}
				}
				return r
			}
			return labSize[f] * float64(j.numMappers)
		}
		sort.SliceStable(fl, func(a, b int) bool {
			if x, y := rb(fl[a]), rb(fl[b]); x != y {
				return x < y
			}
			if strings.Contains(p.v, "tdst") && fl[a].dst != fl[b].dst {
				return fl[a].dst < fl[b].dst
			}
			return false
		})
	case strings.Contains(p.v, "gsize"):
		sort.SliceStable(fl, func(a, b int) bool {
			if labSize[fl[a]] != labSize[fl[b]] {
				return labSize[fl[a]] < labSize[fl[b]]
			}
			if strings.Contains(p.v, "thend") {
				return fl[a].dst < fl[b].dst
			}
			return false
		})
	case strings.Contains(p.v, "sendg"):
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].src != fl[b].src {
				return fl[a].src < fl[b].src
			}
			return fl[a].rem < fl[b].rem
		})
	case strings.Contains(p.v, "recvdown"):
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return fl[a].dst > fl[b].dst
			}
			return fl[a].rem < fl[b].rem
		})
	case strings.Contains(p.v, "srtt"):
		sort.SliceStable(fl, func(a, b int) bool { return tkey(fl[a]) < tkey(fl[b]) })
	case strings.Contains(p.v, "rtrecv"):
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return fl[a].dst < fl[b].dst
			}
			return tkey(fl[a]) < tkey(fl[b])
		})
	case strings.Contains(p.v, "lifo"):
		// reverse job order, flows in order
		var r []*flow
		for i := len(s.active) - 1; i >= 0; i-- {
			for _, f := range s.active[i].flows {
				if !f.done {
					r = append(r, f)
				}
			}
		}
		fl = r
	case strings.Contains(p.v, "desc"):
		sort.SliceStable(fl, func(a, b int) bool { return fl[a].rem > fl[b].rem })
	case strings.Contains(p.v, "glob"):
		sort.SliceStable(fl, func(a, b int) bool { return fl[a].rem < fl[b].rem })
	case strings.Contains(p.v, "recv"):
		sort.SliceStable(fl, func(a, b int) bool {
			if fl[a].dst != fl[b].dst {
				return fl[a].dst < fl[b].dst
			}
			return fl[a].rem < fl[b].rem
		})
	}
	if strings.Contains(p.v, "sticky") {
		// flows that were being served keep going first (in the same
		// order), then the others
		slices.SortStableFunc(fl, func(a, b *flow) int {
			ra, rb := a.rate > 0, b.rate > 0
			switch {
			case ra && !rb:
				return -1
			case rb && !ra:
				return 1
			}
			return 0
		})
	}
	for _, f := range fl {
		f.rate = 0
	}
	for _, f := range fl {
		r := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
		if strings.Contains(p.v, "cap") {
			r = math.Min(r, f.rem*8*float64(s.cfg.SecondMs)/float64(s.cfg.QuantumMs))
		}
		f.rate = r
		s.sendFree[f.src] -= r
		s.recvFree[f.dst] -= r
	}
	if labDump != nil && s.now <= labDumpUntil {
		fmt.Fprintf(labDump, "t=%d", s.now)
		for _, f := range fl {
			if labDumpJobs[labJob[f].id] || labDumpPorts[f.src] || labDumpPorts[1000+f.dst] {
				fmt.Fprintf(labDump, " J%d:%d>%d:%.3g@%.3g", labJob[f].id, f.src, f.dst, f.rem/mib, f.rate/s.cfg.PortBps)
			}
		}
		fmt.Fprintln(labDump)
	}
}

// startLabDump turns the dump on for the comma-separated LAB2_DUMP list
// d: jN a coflow, sN a sender port, rN a receiver port; until LAB2_UNTIL.
func startLabDump(d string) {
	labDump = &strings.Builder{}
	labDumpUntil, _ = strconv.ParseInt(labGetenv("LAB2_UNTIL"), 10, 64)
	for _, x := range strings.Split(d, ",") {
		n, _ := strconv.Atoi(x[1:])
		switch x[0] {
		case 'j':
			labDumpJobs[n] = true
		case 's':
			labDumpPorts[n] = true
		case 'r':
			labDumpPorts[1000+n] = true
		}
	}
}

func TestLab2(t *testing.T) {
	if labGetenv("FALCON_LAB2") == "" {
		t.Skip("set FALCON_LAB2=1")
	}
	if d := labGetenv("LAB2_DUMP"); d != "" {
		startLabDump(d)
	}
	for _, v := range strings.Split(labGetenv("FALCON_LAB2"), ",") {
		for _, tr := range []string{"synth-a", "synth-b"} {
			m, n, first := labPolicyRun(t, tr, "PFP", pfpLab{v}, true)
			t.Logf("%-12s %s: %d/%d first: %s", v, tr, m, n, first)
			if labDump != nil && tr == labGetenv("LAB2_T") {
				t.Log(labDump.String())
			}
			if labDump != nil {
				labDump.Reset()
			}
		}
	}
}

// pfpPersist keeps per-receiver flow lists across allocations.
type pfpPersist struct {
	admitOnly bool // sort only when flows were added
	bySrc     bool
	key       string
	lists     [][]*flow
	dirty     bool
}

func (p *pfpPersist) perFlow() bool { return true }
func (p *pfpPersist) insert(s *sim, j *job) {
	s.active = append(s.active, j)
	if p.lists == nil {
		p.lists = make([][]*flow, s.ports)
	}
	for _, f := range j.byPort() {
		labSize[f] = f.rem
		labJob[f] = j
		port := f.dst
		if p.bySrc {
			port = f.src
		}
		p.lists[port] = append(p.lists[port], f)
	}
	p.dirty = true
}
func (p *pfpPersist) allocate(s *sim) {
	s.resetFree()
	key := func(f *flow) float64 { return f.rem }
	if p.key == "size" {
		key = func(f *flow) float64 { return labSize[f] }
	}
	for i, l := range p.lists {
		k := l[:0]
		for _, f := range l {
			if !f.done {
				k = append(k, f)
			}
		}
		p.lists[i] = k
		if !p.admitOnly || p.dirty {
			sort.SliceStable(k, func(a, b int) bool { return key(k[a]) < key(k[b]) })
		}
	}
	p.dirty = false
	for _, l := range p.lists {
		for _, f := range l {
			f.rate = 0
		}
	}
	for _, l := range p.lists {
		for _, f := range l {
			r := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
			f.rate = r
			s.sendFree[f.src] -= r
			s.recvFree[f.dst] -= r
		}
	}
}

func TestLab3(t *testing.T) {
	if labGetenv("FALCON_LAB3") == "" {
		t.Skip("set FALCON_LAB3=1")
	}
	for _, v := range strings.Split(labGetenv("FALCON_LAB3"), ",") {
		for _, tr := range []string{"synth-a", "synth-b"} {
			p := &pfpPersist{admitOnly: strings.Contains(v, "admit"), bySrc: strings.Contains(v, "src")}
			if strings.Contains(v, "size") {
				p.key = "size"
			}
			m, n, first := labPolicyRun(t, tr, "PFP", p, true)
			t.Logf("%-12s %s: %d/%d first: %s", v, tr, m, n, first)
		}
	}
}

// dumpPol wraps a policy and dumps selected flows after every allocation.
type dumpPol struct{ inner policy }

func (d dumpPol) perFlow() bool { return d.inner.perFlow() }
func (d dumpPol) insert(s *sim, j *job) {
	d.inner.insert(s, j)
	for _, f := range j.flows {
		labJob[f] = j
		if _, ok := labSize[f]; !ok {
			labSize[f] = f.rem
		}
	}
}
func (d dumpPol) allocate(s *sim) {
	d.inner.allocate(s)
	if labDump == nil || s.now > labDumpUntil {
		return
	}
	fmt.Fprintf(labDump, "t=%d", s.now)
	for _, j := range s.active {
		fmt.Fprintf(labDump, " [J%d q%d sent=%.4g]", j.id, j.queue, j.sent/mib)
	}
	fmt.Fprintln(labDump)
	for _, j := range s.active {
		for _, f := range j.flows {
			if !f.done && (labDumpJobs[j.id] || labDumpPorts[f.src] || labDumpPorts[1000+f.dst]) {
				fmt.Fprintf(labDump, " J%d:%d>%d:%.4g@%.4g", j.id, f.src, f.dst, f.rem/mib, f.rate/s.cfg.PortBps)
			}
		}
	}
	fmt.Fprintln(labDump)
}

func TestLab4(t *testing.T) {
	sched := labGetenv("FALCON_LAB4")
	if sched == "" {
		t.Skip("set FALCON_LAB4=<sched>")
	}
	if d := labGetenv("LAB2_DUMP"); d != "" {
		startLabDump(d)
	}
	for _, tr := range []string{"synth-a", "synth-b"} {
		if lt := labGetenv("LAB2_T"); lt != "" && lt != tr {
			continue
		}
		pol, _ := newPolicy(sched)
		name := sched
		if v, ok := strings.CutPrefix(sched, "DARK:"); ok {
			pol, name = darkLab{v}, "DARK"
		}
		m, n, first := labPolicyRun(t, tr, name, dumpPol{pol}, name != "DARK")
		t.Logf("%s %s: %d/%d first: %s", sched, tr, m, n, first)
		if labDump != nil {
			t.Log(labDump.String())
			labDump.Reset()
		}
	}
}

// darkLab is dark with switches.
type darkLab struct {
	v string
}

func (d darkLab) perFlow() bool { return strings.Contains(d.v, "pf") }

var darkAdmitted bool

func (darkLab) insert(s *sim, j *job) {
	darkAdmitted = true
	s.seq++
	j.queue, j.queueSeq = 0, s.seq
	s.active = append(s.active, j)
}
func (d darkLab) allocate(s *sim) {
	s.resetFree()
	has := func(x string) bool { return strings.Contains(d.v, x) }
	if has("casc") {
		limit := darkFirstLimit
		for q := 0; q < darkQueues-1; q++ {
			slices.SortStableFunc(s.active, func(a, b *job) int { return cmpQueue(a, b) })
			for _, j := range s.active {
				if j.queue == q && j.sent >= limit {
					s.seq++
					j.queue, j.queueSeq = q+1, s.seq
				}
			}
			limit *= darkLimitMult
		}
		slices.SortStableFunc(s.active, func(a, b *job) int { return cmpQueue(a, b) })
	} else if has("arr") {
		for _, j := range s.active {
			j.queue = darkQueue(j.sent)
		}
		slices.SortStableFunc(s.active, func(a, b *job) int {
			if a.queue != b.queue {
				return a.queue - b.queue
			}
			return 0
		})
	} else {
		slices.SortStableFunc(s.active, func(a, b *job) int { return cmpQueue(a, b) })
		reeval := true
		if has("qadm") && !darkAdmitted {
			reeval = false
		}
		if has("qdep") && darkAdmitted {
			reeval = false
		}
		darkAdmitted = false
		movOrder := slices.Clone(s.active)
		if has("movid") {
			slices.SortStableFunc(movOrder, func(a, b *job) int { return a.id - b.id })
		}
		if has("movsent") {
			slices.SortStableFunc(movOrder, func(a, b *job) int {
				if a.sent < b.sent {
					return -1
				} else if a.sent > b.sent {
					return 1
				}
				return 0
			})
		}
		if has("movqid") { // by old queue, then id
			slices.SortStableFunc(movOrder, func(a, b *job) int {
				if a.queue != b.queue {
					return a.queue - b.queue
				}
				return a.id - b.id
			})
		}
		if has("movqdesc") { // old queue descending, then old order
			slices.SortStableFunc(movOrder, func(a, b *job) int { return b.queue - a.queue })
		}
		if has("movstart") { // by admission epoch, then old order
			slices.SortStableFunc(movOrder, func(a, b *job) int { return int(a.start - b.start) })
		}
		if has("movrev") {
			slices.Reverse(movOrder)
		}
		for _, j := range movOrder {
			if !reeval {
				break
			}
			sent := j.sent
			if has("sraw") {
				sent = labRawBytes(j) - (j.totalBytes - j.sent)
			}
			if has("mv") { // as sched.go: per-quantum sums (flow.moved)
				sent = movedBytes(j)
			}
			if has("srem") {
				sent = 0
				for _, f := range j.flows {
					sent += f.size - f.rem
				}
			}
			if has("sfin") {
				sent = 0
				for _, f := range j.flows {
					if f.done {
						sent += f.size
					}
				}
			}
			if has("sred") {
				sent = 0
				for _, f := range j.flows {
					if j.redActive[f.red] == 0 {
						sent += f.size
					}
				}
			}
			if labGetenv("LAB5_EQ") != "" {
				for lim := darkFirstLimit; lim < 1e15; lim *= darkLimitMult {
					if sent == lim {
						fmt.Printf("EQ t=%d JOB-%d sent=%g q%d\n", s.now, j.id, sent/mib, j.queue)
					}
				}
			}
			if q := d.queueOf(sent); q != j.queue {
				s.seq++
				j.queue, j.queueSeq = q, s.seq
			}
		}
		slices.SortStableFunc(s.active, func(a, b *job) int { return cmpQueue(a, b) })
	}
	defer func() {
		if !has("bf") {
			return
		}
		bf := slices.Clone(s.active)
		if has("bfedf") {
			sort.SliceStable(bf, func(a, b int) bool {
				return bf[a].start+bf[a].deadline < bf[b].start+bf[b].deadline
			})
		}
		for _, j := range bf {
			fl := j.flows
			if has("bfpo") {
				fl = j.byPort()
			}
			for _, f := range fl {
				if f.done {
					continue
				}
				m := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
				if m <= 0 {
					continue
				}
				f.rate += m
				s.sendFree[f.src] -= m
				s.recvFree[f.dst] -= m
			}
		}
	}()
	thr := zeroBytes
	if has("thr0") {
		thr = 0
	}
	if has("thr1") {
		thr = 1
	}
	if has("thrbig") {
		thr = 1e3
	}
	if has("thr5") {
		thr = 1e5
	}
	if has("thr6") {
		thr = 1e6
	}
	if has("thr7") {
		thr = 1e7
	}
	ns := make([]int, s.ports)
	nr := make([]int, s.ports)
	sf0 := make([]float64, s.ports)
	rf0 := make([]float64, s.ports)
	if has("jointq") {
		for i := 0; i < len(s.active); {
			k := i
			var fl []*flow
			for k < len(s.active) && s.active[k].queue == s.active[i].queue {
				for _, f := range s.active[k].flows {
					f.rate = 0
					if !f.done {
						fl = append(fl, f)
					}
				}
				k++
			}
			shareSkipped(fl, s.sendFree, s.recvFree)
			i = k
		}
		return
	}
	if has("greedy") {
		for _, j := range s.active {
			fl := j.flows
			if has("po") {
				fl = j.byPort()
			}
			for _, f := range fl {
				f.rate = 0
				if f.done {
					continue
				}
				r := math.Min(s.sendFree[f.src], s.recvFree[f.dst])
				if r <= thr {
					continue
				}
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
		return
	}
	if has("asym") {
		for _, j := range s.active {
			clear(ns)
			clear(nr)
			fl := j.flows
			if has("po") {
				fl = j.byPort()
			}
			open := func(f *flow) bool {
				return !f.done && s.sendFree[f.src] > thr && s.recvFree[f.dst] > thr
			}
			for _, f := range fl {
				f.rate = 0
				if open(f) {
					ns[f.src]++
					nr[f.dst]++
				}
			}
			copy(sf0, s.sendFree)
			copy(rf0, s.recvFree)
			for _, f := range fl {
				if f.done || ns[f.src] == 0 || nr[f.dst] == 0 || sf0[f.src] <= thr || rf0[f.dst] <= thr {
					continue
				}
				var r float64
				if has("asymr") { // receiver side sequential, sender fixed
					r = math.Min(sf0[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
					nr[f.dst]--
				} else { // sender side sequential, receiver fixed
					r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), rf0[f.dst]/float64(nr[f.dst]))
					ns[f.src]--
				}
				r = math.Max(0, math.Min(r, math.Min(s.sendFree[f.src], s.recvFree[f.dst])))
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
		return
	}
	if has("seqo") {
		for _, j := range s.active {
			clear(ns)
			clear(nr)
			fl := j.flows
			if has("po") {
				fl = j.byPort()
			}
			if has("pd") {
				fl = slices.Clone(j.flows)
				slices.SortStableFunc(fl, func(a, b *flow) int {
					if a.dst != b.dst {
						return a.dst - b.dst
					}
					return a.src - b.src
				})
			}
			open := func(f *flow) bool {
				return !f.done && s.sendFree[f.src] > thr && s.recvFree[f.dst] > thr
			}
			for _, f := range fl {
				f.rate = 0
				if open(f) {
					ns[f.src]++
					nr[f.dst]++
				}
			}
			for _, f := range fl {
				if f.done || ns[f.src] == 0 || nr[f.dst] == 0 {
					continue
				}
				if s.sendFree[f.src] <= thr || s.recvFree[f.dst] <= thr {
					if !has("stale") {
						continue
					}
				}
				r := math.Max(0, math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst])))
				ns[f.src]--
				nr[f.dst]--
				f.rate = r
				s.sendFree[f.src] -= r
				s.recvFree[f.dst] -= r
			}
		}
		return
	}
	if has("skip") {
		// a coflow with an unfinished flow through a full port is
		// skipped (no rate); "skipsh": the skipped coflows then share
		// the leftover (shareSkipped); "skipfs": each skipped coflow
		// takes fairShareJob of the leftover, in order
		var skipped []*job
		var sfl []*flow
		for _, j := range s.active {
			full := false
			for _, f := range j.flows {
				f.rate = 0
				if !f.done && (s.sendFree[f.src] <= thr || s.recvFree[f.dst] <= thr) {
					full = true
				}
			}
			if full {
				skipped = append(skipped, j)
				for _, f := range j.flows {
					if !f.done {
						sfl = append(sfl, f)
					}
				}
				continue
			}
			fairShareJob(j, s.sendFree, s.recvFree, ns, nr)
		}
		if has("skipsh") {
			shareSkipped(sfl, s.sendFree, s.recvFree)
		}
		if has("skipfs") {
			for _, j := range skipped {
				fairShareJob(j, s.sendFree, s.recvFree, ns, nr)
			}
		}
		return
	}
	if has("mm") {
		for _, j := range s.active {
			var fl []*flow
			for _, f := range j.flows {
				f.rate = 0
				if !f.done {
					fl = append(fl, f)
				}
			}
			maxMin(fl, s.sendFree, s.recvFree)
		}
		return
	}
	for _, j := range s.active {
		clear(ns)
		clear(nr)
		for _, f := range j.flows {
			f.rate = 0
			if !f.done || has("dcnt") {
				if has("fixu") && (s.sendFree[f.src] <= thr || s.recvFree[f.dst] <= thr) {
					continue
				}
				ns[f.src]++
				nr[f.dst]++
			}
		}
		copy(sf0, s.sendFree)
		copy(rf0, s.recvFree)
		var waste []float64
		for _, f := range j.flows {
			if f.done {
				if has("dcnt") && has("dwaste") && ns[f.src] > 0 && nr[f.dst] > 0 && sf0[f.src] > thr && rf0[f.dst] > thr {
					w := math.Min(sf0[f.src]/float64(ns[f.src]), rf0[f.dst]/float64(nr[f.dst]))
					waste = append(waste, w)
					s.sendFree[f.src] -= w
					s.recvFree[f.dst] -= w
				}
				continue
			}
			var r float64
			switch {
			case has("wrem"):
				if sf0[f.src] <= thr || rf0[f.dst] <= thr {
					continue
				}
				var bs, br float64
				for _, g := range j.flows {
					if g.done || sf0[g.src] <= thr || rf0[g.dst] <= thr {
						continue
					}
					if g.src == f.src {
						bs += g.rem
					}
					if g.dst == f.dst {
						br += g.rem
					}
				}
				r = math.Min(sf0[f.src]*f.rem/bs, rf0[f.dst]*f.rem/br)
			case has("fixu"):
				if ns[f.src] == 0 || nr[f.dst] == 0 || sf0[f.src] <= thr || rf0[f.dst] <= thr {
					continue
				}
				r = math.Min(sf0[f.src]/float64(ns[f.src]), rf0[f.dst]/float64(nr[f.dst]))
			case has("fixed"): // denominators and free fixed before the coflow
				r = math.Min(sf0[f.src]/float64(ns[f.src]), rf0[f.dst]/float64(nr[f.dst]))
				r = math.Min(r, math.Min(s.sendFree[f.src], s.recvFree[f.dst]))
			case has("fixn"): // denominators fixed, free current
				r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
			default:
				r = math.Min(s.sendFree[f.src]/float64(ns[f.src]), s.recvFree[f.dst]/float64(nr[f.dst]))
				ns[f.src]--
				nr[f.dst]--
			}
			if r < 0 {
				r = 0
			}
			f.rate = r
			s.sendFree[f.src] -= r
			s.recvFree[f.dst] -= r
		}
	}
}

func (d darkLab) queueOf(sent float64) int {
	limit := darkFirstLimit
	mult := float64(darkLimitMult)
	switch {
	case strings.Contains(d.v, "lmb"):
		limit = 10e6
	case strings.Contains(d.v, "lbit"):
		limit = 10 * mib / 8
	case strings.Contains(d.v, "lx8"):
		limit = 10 * mib * 8
	case strings.Contains(d.v, "l1"):
		limit = mib
	}
	if strings.Contains(d.v, "m2") {
		mult = 2
	}
	gt := strings.Contains(d.v, "gt")
	for q := 0; q < darkQueues-1; q++ {
		if sent < limit || (gt && sent == limit) {
			return q
		}
		limit *= mult
	}
	return darkQueues - 1
}

func TestLab5(t *testing.T) {
	if labGetenv("FALCON_LAB5") == "" {
		t.Skip("set FALCON_LAB5")
	}
	for _, v := range strings.Split(labGetenv("FALCON_LAB5"), ",") {
		for _, tr := range []string{"synth-a", "synth-b"} {
			m, n, first := labPolicyRun(t, tr, "DARK", darkLab{v}, false)
			t.Logf("%-12s %s: %d/%d first: %s", v, tr, m, n, first)
		}
	}
}
