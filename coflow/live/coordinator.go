package live

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// CoflowID names a registered coflow. IDs are given in registration order
// from 0 and never reused by one coordinator; the scheduler sees the id as
// coflow.CoflowState.Index (and ID) and in every coflow.FlowRef.
type CoflowID uint64

// Result is a coflow's outcome as the coordinator saw it. Times are since
// the coordinator started.
type Result struct {
	ID CoflowID
	// Arrival is when the coordinator registered the coflow; Finish when it
	// learned that the last flow was delivered (or when it failed).
	Arrival, Finish time.Duration
	// CCT is Finish − Arrival.
	CCT time.Duration
	// Bytes is the coflow's raw size; WireBytes what its flows put on the
	// wire as the senders reported.
	Bytes, WireBytes float64
	// Err is nil for a completed coflow, otherwise why it failed (wrapping
	// ErrAgentDead with the agent's name, or ErrBadAllocation).
	Err error
}

type cflow struct {
	coflow.Flow
	acked, wire float64
	finished    bool
	alloc       coflow.Allocation
}

type cstate struct {
	id      CoflowID
	arrival time.Duration
	weight  float64
	bytes   float64
	flows   []cflow
	left    int
	done    bool
	finish  time.Duration
	err     error
}

type portState struct {
	name     transport.NodeID
	lastSeen time.Time
	dead     bool
	failed   []failure
	gone     []uint64
}

type predKey struct{ class, k int }

type pushJob struct {
	to  transport.NodeID
	msg []byte
}

// Coordinator runs a coflow.Scheduler on the live state the agents report
// and pushes its allocations to them. It is the transport.Handler of its
// node: create the transport with it, then call Start.
type Coordinator struct {
	cfg         Config
	fab         *coflow.Fabric
	base        *coflow.Fabric // starting profiles
	kinds       []byte         // fabric codec k → kind (index k-1)
	sched       coflow.Scheduler
	schedName   string
	eventDriven bool
	timer       coflow.Timer
	check       coflow.Config

	mu       sync.Mutex
	tr       transport.Transport
	start    time.Time
	started  bool
	closed   bool
	nextID   CoflowID
	coflows  map[CoflowID]*cstate
	active   []*cstate
	ports    []portState
	portOf   map[transport.NodeID]int
	preds    map[predKey]predictor.Predictor
	needNow  bool
	needAt   time.Duration
	hasNeed  bool
	timerAt  time.Duration
	hasTimer bool
	lastCall time.Duration
	epoch    uint64
	calls    int
	results  []Result
	state    coflow.State

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

// NewCoordinator validates cfg and returns a coordinator; it serves nothing
// until Start.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Coordinator{
		cfg:       cfg,
		fab:       copyFabric(cfg.Fabric),
		base:      copyFabric(cfg.Fabric),
		sched:     cfg.Scheduler,
		schedName: cfg.Scheduler.Name(),
		coflows:   make(map[CoflowID]*cstate),
		portOf:    make(map[transport.NodeID]int, len(cfg.Agents)),
		preds:     make(map[predKey]predictor.Predictor),
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	for _, p := range cfg.Fabric.Codecs {
		c.kinds = append(c.kinds, codecKind(p.Name))
	}
	if ed, ok := c.sched.(coflow.EventDriven); ok {
		c.eventDriven = ed.OnlyOnArrivalsAndCompletions()
	}
	c.timer, _ = c.sched.(coflow.Timer)
	for p, a := range cfg.Agents {
		c.ports = append(c.ports, portState{name: a})
		c.portOf[a] = p
	}
	return c, nil
}

func copyFabric(f *coflow.Fabric) *coflow.Fabric {
	g := &coflow.Fabric{Ports: slices.Clone(f.Ports), Codecs: slices.Clone(f.Codecs)}
	for _, dc := range f.Classes {
		g.Classes = append(g.Classes, coflow.DataClass{Name: dc.Name, Codecs: slices.Clone(dc.Codecs)})
	}
	return g
}

// Start starts the coordinator on tr (the transport whose handler it is).
// Agents not heard from within Config.AgentTimeout of Start are dead.
func (c *Coordinator) Start(tr transport.Transport) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.started {
		return fmt.Errorf("%w: coordinator already started or closed", ErrClosed)
	}
	c.tr, c.started, c.start = tr, true, time.Now()
	for p := range c.ports {
		c.ports[p].lastSeen = c.start
	}
	go c.loop()
	return nil
}

// Close stops the coordinator's goroutine and waits for it; agents then see
// their reports unanswered and fail their coflows with ErrCoordinatorDead.
// It does not close the transport.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	started := c.started
	c.mu.Unlock()
	close(c.quit)
	if started {
		<-c.done
	}
	return nil
}

// Results returns the results of the registered coflows that have
// completed or failed, by id.
func (c *Coordinator) Results() []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Result
	for _, cs := range c.coflows {
		if cs.done {
			out = append(out, cs.result())
		}
	}
	slices.SortFunc(out, func(a, b Result) int { return cmpID(a.ID, b.ID) })
	return out
}

// Calls returns how many times the scheduler has been called.
func (c *Coordinator) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// Profile returns the codec profile schedulers currently see for codec k
// (k ≥ 1) on data class class: the predictor's estimate from the agents'
// measurements, or the starting profile before any.
func (c *Coordinator) Profile(class, k int) coflow.CodecProfile {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updateProfiles()
	return c.fab.Profile(class, k)
}

func cmpID(a, b CoflowID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (cs *cstate) result() Result {
	r := Result{ID: cs.id, Arrival: cs.arrival, Finish: cs.finish, CCT: cs.finish - cs.arrival, Bytes: cs.bytes, Err: cs.err}
	for i := range cs.flows {
		r.WireBytes += cs.flows[i].wire
	}
	return r
}

func (c *Coordinator) now() time.Duration { return time.Since(c.start) }

func (c *Coordinator) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// HandleMessage ignores one-way messages: every coordinator message is a
// request.
func (c *Coordinator) HandleMessage(transport.NodeID, []byte) {}

// HandleRequest serves hello, register, unregister and report requests.
func (c *Coordinator) HandleRequest(_ context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.started {
		return nil, fmt.Errorf("%w: coordinator", ErrClosed)
	}
	p, ok := c.portOf[from]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an agent of this coordinator", ErrInvalidConfig, from)
	}
	switch msgType(req) {
	case tHello:
		if err := decodeEmpty(req, tHello); err != nil {
			return nil, err
		}
		c.ports[p].lastSeen, c.ports[p].dead = time.Now(), false
		m := welcomeMsg{Port: uint32(p), Names: c.cfg.Agents}
		return encodeWelcome(m), nil
	case tRegister:
		m, err := decodeRegister(req)
		if err != nil {
			return nil, err
		}
		c.ports[p].lastSeen = time.Now()
		id, err := c.register(m)
		if err != nil {
			return nil, err
		}
		return encodeID(tRegistered, uint64(id)), nil
	case tUnregister:
		id, err := decodeID(req, tUnregister)
		if err != nil {
			return nil, err
		}
		c.ports[p].lastSeen = time.Now()
		if err := c.unregister(CoflowID(id)); err != nil {
			return nil, err
		}
		return encodeEmpty(tOK), nil
	case tReport:
		m, err := decodeReport(req)
		if err != nil {
			return nil, err
		}
		if c.ports[p].dead {
			return nil, fmt.Errorf("%w: %s (declared dead; hello again)", ErrAgentDead, from)
		}
		c.ports[p].lastSeen = time.Now()
		c.report(p, m)
		return encodeEmpty(tOK), nil
	}
	return nil, fmt.Errorf("%w: unexpected message type %d", ErrMalformed, msgType(req))
}

func (c *Coordinator) register(m registerMsg) (CoflowID, error) {
	n := len(c.ports)
	if len(m.Flows) == 0 {
		return 0, fmt.Errorf("%w: no flows", ErrInvalidCoflow)
	}
	if !(m.Weight >= 0) || math.IsInf(m.Weight, 0) {
		return 0, fmt.Errorf("%w: weight %v", ErrInvalidCoflow, m.Weight)
	}
	if len(c.coflows) >= c.cfg.MaxCoflows {
		return 0, fmt.Errorf("%w: %d coflows registered (MaxCoflows)", ErrTooLarge, len(c.coflows))
	}
	cs := &cstate{id: c.nextID, arrival: c.now(), weight: m.Weight, flows: make([]cflow, len(m.Flows)), left: len(m.Flows)}
	if cs.weight == 0 {
		cs.weight = 1
	}
	for j, f := range m.Flows {
		switch {
		case int64(f.Src) >= int64(n) || int64(f.Dst) >= int64(n):
			return 0, fmt.Errorf("%w: flow %d: ports %d→%d of %d", ErrInvalidCoflow, j, f.Src, f.Dst, n)
		case f.Bytes == 0 || f.Bytes > uint64(c.cfg.MaxFlowBytes):
			return 0, fmt.Errorf("%w: flow %d: %d bytes (want 1..%d)", ErrInvalidCoflow, j, f.Bytes, c.cfg.MaxFlowBytes)
		case int64(f.Class) >= int64(c.fab.NumClasses()):
			return 0, fmt.Errorf("%w: flow %d: class %d of %d", ErrInvalidCoflow, j, f.Class, c.fab.NumClasses())
		}
		for _, q := range []uint32{f.Src, f.Dst} {
			if c.ports[q].dead {
				return 0, fmt.Errorf("%w: %s", ErrAgentDead, c.ports[q].name)
			}
		}
		cs.flows[j] = cflow{Flow: coflow.Flow{ID: j, Src: int(f.Src), Dst: int(f.Dst), Bytes: float64(f.Bytes), Class: int(f.Class)}}
		cs.bytes += float64(f.Bytes)
	}
	c.nextID++
	c.coflows[cs.id] = cs
	c.active = append(c.active, cs)
	c.needNow = true
	c.kick()
	return cs.id, nil
}

func (c *Coordinator) unregister(id CoflowID) error {
	cs, ok := c.coflows[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownCoflow, id)
	}
	delete(c.coflows, id)
	if !cs.done {
		c.removeActive(cs)
	}
	for _, p := range cs.ports() {
		c.ports[p].gone = append(c.ports[p].gone, uint64(id))
	}
	c.needNow = true
	c.kick()
	return nil
}

func (cs *cstate) ports() []int {
	var ps []int
	for i := range cs.flows {
		ps = append(ps, cs.flows[i].Src, cs.flows[i].Dst)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

func (c *Coordinator) removeActive(cs *cstate) {
	if i := slices.Index(c.active, cs); i >= 0 {
		c.active = slices.Delete(c.active, i, i+1)
	}
}

func (c *Coordinator) report(p int, m reportMsg) {
	now := c.now()
	flowDone := false
	for _, g := range m.Progress {
		cs := c.coflows[CoflowID(g.Coflow)]
		if cs == nil || cs.done || uint64(g.Flow) >= uint64(len(cs.flows)) {
			continue
		}
		f := &cs.flows[g.Flow]
		if f.Src != p || f.finished {
			continue
		}
		f.acked = math.Max(f.acked, math.Min(float64(g.Acked), f.Bytes))
		f.wire = math.Max(f.wire, float64(g.Wire))
		if f.acked >= f.Bytes {
			f.finished = true
			cs.left--
			flowDone = true
			if cs.left == 0 {
				c.finishCoflow(cs, now, nil)
			}
		}
	}
	for _, x := range m.Meas {
		c.observe(x, now)
	}
	if !flowDone || c.needNow {
		return
	}
	if c.eventDriven {
		// Varys' rule: only when the last running flow has ended.
		for _, cs := range c.active {
			for i := range cs.flows {
				if !cs.flows[i].finished && cs.flows[i].alloc.Rate > 0 {
					return
				}
			}
		}
		c.needNow = true
	} else if d := c.cfg.CoalesceFlowEvents; d == 0 || now-c.lastCall >= d {
		c.needNow = true
	} else if at := c.lastCall + d; !c.hasNeed || at < c.needAt {
		c.needAt, c.hasNeed = at, true
	}
	c.kick()
}

// finishCoflow ends cs, completed (err nil) or failed.
func (c *Coordinator) finishCoflow(cs *cstate, now time.Duration, err error) {
	cs.done, cs.finish, cs.err = true, now, err
	c.removeActive(cs)
	c.results = append(c.results, cs.result())
	c.needNow = true
	c.kick()
}

func (c *Coordinator) failCoflow(cs *cstate, now time.Duration, reason byte, node transport.NodeID, err error) {
	c.finishCoflow(cs, now, err)
	for _, p := range cs.ports() {
		c.ports[p].failed = append(c.ports[p].failed, failure{Coflow: uint64(cs.id), Reason: reason, Node: node})
	}
}

// observe feeds one aggregated codec measurement to the (class, codec)
// predictor. Speeds are per core: raw bytes over the codec's wall time.
func (c *Coordinator) observe(x measurement, now time.Duration) {
	k := slices.Index(c.kinds, x.Kind) + 1
	if k == 0 || int64(x.Class) >= int64(c.fab.NumClasses()) {
		return
	}
	key := predKey{int(x.Class), k}
	pr := c.preds[key]
	if pr == nil {
		start := c.base.Profile(key.class, k)
		pc := c.cfg.PredictorConfig
		pc.Default = predictor.Estimate{CompressSpeed: start.CompressSpeed, DecompressSpeed: start.DecompressSpeed, Ratio: start.Ratio}
		var err error
		if pr, err = predictor.New(c.cfg.Predictor, pc); err != nil {
			return // validated in NewCoordinator
		}
		c.preds[key] = pr
	}
	m := predictor.Measurement{At: now} // one predictor per class: no class feature
	if x.RawC > 0 && x.NsC > 0 {
		m.CompressSpeed = float64(x.RawC) / (float64(x.NsC) / 1e9)
		m.Ratio = float64(x.OutC) / float64(x.RawC)
	}
	if x.RawD > 0 && x.NsD > 0 {
		m.DecompressSpeed = float64(x.RawD) / (float64(x.NsD) / 1e9)
	}
	pr.Observe(m)
}

// updateProfiles writes every predictor's estimate into the fabric the
// scheduler sees (ratios capped at 1: a codec that does not shrink a class
// is one no scheduler should choose).
func (c *Coordinator) updateProfiles() {
	for key, pr := range c.preds {
		e := pr.Predict()
		p := c.fab.Profile(key.class, key.k)
		if v := e.CompressSpeed; v > 0 && !math.IsInf(v, 0) {
			p.CompressSpeed = v
		}
		if v := e.DecompressSpeed; v > 0 && !math.IsInf(v, 0) {
			p.DecompressSpeed = v
		}
		if v := e.Ratio; v > 0 && !math.IsInf(v, 0) {
			p.Ratio = math.Min(v, 1)
		}
		if len(c.fab.Classes) == 0 {
			c.fab.Codecs[key.k-1] = p
		} else {
			c.fab.Classes[key.class].Codecs[key.k-1] = p
		}
	}
}

func (c *Coordinator) loop() {
	defer close(c.done)
	var pushes []pushJob
	var results []Result
	tick := c.cfg.AgentTimeout / 4
	for {
		c.mu.Lock()
		now := c.now()
		c.checkAgents(now)
		if c.needNow || (c.hasNeed && now >= c.needAt) || (c.hasTimer && now >= c.timerAt) {
			pushes = c.schedule(now, pushes[:0])
		}
		results = append(results[:0], c.results...)
		c.results = c.results[:0]
		next := now + tick
		if c.hasNeed && c.needAt < next {
			next = c.needAt
		}
		if c.hasTimer && c.timerAt < next {
			next = c.timerAt
		}
		c.mu.Unlock()
		for _, r := range results {
			c.onComplete(r)
		}
		c.send(pushes)
		pushes = pushes[:0]
		t := time.NewTimer(max(next-c.now(), 0))
		select {
		case <-c.wake:
			t.Stop()
		case <-t.C:
		case <-c.quit:
			t.Stop()
			return
		}
	}
}

// onComplete calls Config.OnComplete, ignoring a panic in it.
func (c *Coordinator) onComplete(r Result) {
	if c.cfg.OnComplete == nil {
		return
	}
	defer func() { _ = recover() }()
	c.cfg.OnComplete(r)
}

// send delivers one push per agent concurrently, each bounded by
// PushTimeout (or the coordinator's Close), and waits for all.
func (c *Coordinator) send(pushes []pushJob) {
	if len(pushes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PushTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, p := range pushes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.tr.Request(ctx, p.to, p.msg) // liveness is judged by reports
		}()
	}
	wg.Wait()
}

// checkAgents declares dead the agents silent for AgentTimeout and fails
// their coflows.
func (c *Coordinator) checkAgents(now time.Duration) {
	wall := time.Now()
	for p := range c.ports {
		ps := &c.ports[p]
		if ps.dead || wall.Sub(ps.lastSeen) <= c.cfg.AgentTimeout {
			continue
		}
		ps.dead = true
		for _, cs := range slices.Clone(c.active) {
			if slices.Contains(cs.ports(), p) {
				c.failCoflow(cs, now, reasonAgentDead, ps.name, fmt.Errorf("%w: %s", ErrAgentDead, ps.name))
			}
		}
	}
}

// schedule calls the scheduler on the live state, applies its allocation
// and returns the pushes that carry it to the agents.
func (c *Coordinator) schedule(now time.Duration, pushes []pushJob) []pushJob {
	c.needNow, c.hasNeed, c.hasTimer = false, false, false
	c.updateProfiles()
	st := c.buildState(now)
	var allocs []coflow.Allocation
	if len(st.Coflows) > 0 {
		var err error
		allocs, err = c.callScheduler(now, st)
		c.calls++
		c.lastCall = now
		if err == nil {
			err = c.check.CheckAllocation(now, st, allocs)
		}
		if err != nil {
			for _, cs := range slices.Clone(c.active) {
				c.failCoflow(cs, now, reasonBadAlloc, "", fmt.Errorf("%w: %s: %w", ErrBadAllocation, c.schedName, err))
			}
			allocs = nil
		}
		if at, ok := c.nextWakeup(now); ok && at > now {
			c.timerAt, c.hasTimer = at, true
		}
	}
	for _, cs := range c.active {
		for i := range cs.flows {
			cs.flows[i].alloc = coflow.Allocation{}
		}
	}
	for _, a := range allocs {
		if cs := c.coflows[CoflowID(a.Flow.Coflow)]; cs != nil && !cs.done {
			cs.flows[a.Flow.Flow].alloc = a // CheckAllocation named only unfinished flows
		}
	}
	c.epoch++
	per := make([][]pushFlow, len(c.ports))
	for _, cs := range c.active {
		for j := range cs.flows {
			f := &cs.flows[j]
			if f.finished {
				continue
			}
			pf := pushFlow{Coflow: uint64(cs.id), Flow: uint32(j), Src: uint32(f.Src), Dst: uint32(f.Dst),
				Bytes: uint64(f.Bytes), Class: uint32(f.Class), Rate: f.alloc.Rate,
				SendCores: f.alloc.SendCores, RecvCores: f.alloc.RecvCores}
			if f.alloc.Codec > 0 {
				pf.Kind = c.kinds[f.alloc.Codec-1]
			}
			per[f.Src] = append(per[f.Src], pf)
			if f.Dst != f.Src {
				per[f.Dst] = append(per[f.Dst], pf)
			}
		}
	}
	for p := range c.ports {
		ps := &c.ports[p]
		if ps.dead {
			ps.failed, ps.gone = ps.failed[:0], ps.gone[:0]
			continue
		}
		msg := encodePush(pushMsg{Epoch: c.epoch, Flows: per[p], Failed: ps.failed, Gone: ps.gone})
		ps.failed, ps.gone = nil, nil
		pushes = append(pushes, pushJob{to: ps.name, msg: msg})
	}
	return pushes
}

// callScheduler calls the scheduler, turning a panic into an error (a
// user's scheduler must not take the coordinator down).
func (c *Coordinator) callScheduler(now time.Duration, st *coflow.State) (allocs []coflow.Allocation, err error) {
	defer func() {
		if p := recover(); p != nil {
			allocs, err = nil, fmt.Errorf("scheduler panicked: %v", p)
		}
	}()
	return c.sched.Schedule(now, st), nil
}

// nextWakeup asks the scheduler's Timer, if any, for its next call (a
// panic means no timer).
func (c *Coordinator) nextWakeup(now time.Duration) (at time.Duration, ok bool) {
	if c.timer == nil {
		return 0, false
	}
	defer func() {
		if recover() != nil {
			at, ok = 0, false
		}
	}()
	return c.timer.NextWakeup(now)
}

// buildState fills the scheduler's view from the active coflows.
func (c *Coordinator) buildState(now time.Duration) *coflow.State {
	st := &c.state
	st.Now, st.Fabric = now, c.fab
	st.Coflows = st.Coflows[:0]
	for _, cs := range c.active {
		x := coflow.CoflowState{Index: int(cs.id), ID: int(cs.id), Arrival: cs.arrival, Weight: cs.weight,
			Width: len(cs.flows), Bytes: cs.bytes}
		for j := range cs.flows {
			f := &cs.flows[j]
			x.Sent += f.acked
			x.WireSent += f.wire
			if f.finished {
				continue
			}
			x.Flows = append(x.Flows, coflow.FlowState{Ref: coflow.FlowRef{Coflow: int(cs.id), Flow: j}, Src: f.Src, Dst: f.Dst,
				Bytes: f.Bytes, Remaining: f.Bytes - f.acked, Class: f.Class, Rate: f.alloc.Rate, Codec: f.alloc.Codec})
		}
		x.ComputePortLoads()
		st.Coflows = append(st.Coflows, x)
	}
	return st
}

var _ transport.Handler = (*Coordinator)(nil)
