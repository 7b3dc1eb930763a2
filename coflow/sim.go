package coflow

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Config configures Sim. The zero value is usable (sequential stages, no
// chunking, fabric codec speeds, default tolerance); DefaultConfig turns
// pipelining on.
type Config struct {
	// Pipelining selects pipelined stages for compressed flows (chunked
	// compress → transmit → decompress, disposal rate min of the three
	// stage rates) instead of sequential stages (the three stage times add).
	Pipelining bool
	// ChunkBytes is the raw size of one pipeline chunk. When a compressed
	// flow starts (or changes codec) in pipelined mode it first spends the
	// fill/drain time of one chunk, min(ChunkBytes, remaining) = b:
	//
	//	L = b/(k_s·s) + ρ·b/r + b/(k_r·u) − b/D
	//
	// so a flow of V raw bytes alone takes V/D + L, the closed form "max
	// stage time plus one chunk through the other stages". When the rates
	// change before the fill ends, the unfinished fraction of it is redone
	// at the new rates' L; a paused flow that resumes with the same codec
	// keeps its filled (or partly filled) pipeline; a new codec, or raw
	// transfer in between, starts a new fill. Zero means an ideal fluid
	// pipeline (L = 0). Ignored in sequential mode.
	ChunkBytes float64
	// CodecSpeed, if not nil, gives the true per-core compression and
	// decompression speed (raw bytes/s) of codec k ≥ 1 at a port at a time,
	// replacing Fabric.CompressSpeed/DecompressSpeed (SpeedFactor is not
	// applied on top). With Fabric.Classes it is the reference codec's
	// speed, scaled for a flow's class by Fabric.ClassFactors. The scheduler still sees only the Fabric's profiles,
	// so prediction error shows in the results. Speeds are sampled when an
	// allocation takes effect and held until the flow's next allocation;
	// a scheduler that wants them resampled asks for a Timer.
	CodecSpeed func(port, codec int, now time.Duration) (compress, decompress float64)
	// Check, if not nil, is called after every scheduling decision has been
	// validated (by the rules of Config.CheckAllocation), with the state the
	// scheduler saw and its allocation. A non-nil error stops the run and is
	// returned (wrapped). Tests use it to assert invariants (see
	// coflowtest.CheckAllocation and coflowtest.Checker, which have this
	// shape).
	Check CheckFunc
	// Tolerance is the relative slack when checking port capacities and
	// cores (sum ≤ capacity·(1+Tolerance)). Zero means DefaultTolerance
	// (1e-9).
	Tolerance float64
	// MaxCalls bounds the number of Schedule calls. Zero means no bound.
	MaxCalls int
	// RecordFlows makes Run fill CoflowResult.FlowFinish with every flow's
	// completion time (one time.Duration per flow).
	RecordFlows bool
	// CoalesceFlowEvents coalesces the calls a scheduler that is not
	// EventDriven gets on flow completions: a flow completion calls it at
	// once only if at least this long has passed since its last call;
	// otherwise one call at last call + CoalesceFlowEvents covers every flow
	// completion in between (their freed capacity idles until then).
	// Coflow arrivals and completions and timers still call at once. Zero
	// means no coalescing (a call at every flow completion).
	CoalesceFlowEvents time.Duration
	// WireEfficiency is the fraction of its allocated rate that a flow's
	// payload achieves on a real link: a flow allocated rate r moves
	// r·WireEfficiency wire bytes/s (raw flows r·e raw bytes/s; compressed
	// flows' transmit stage r·e/ρ raw bytes/s). A runtime that paces
	// payload at the allocated rate over a link rate-limited by packets
	// loses the TCP/IP headers (1448 payload bytes of a 1514-byte frame:
	// 0.956) and pacing error. Measured on the bed (internal/testbed,
	// cmd/falcon-coflow/CALIBRATION.md). Zero means 1 (the fluid model).
	// Must be in [0, 1].
	WireEfficiency float64
	// CompletionDelay is added to every coflow's finish time (and so its
	// CCT) after the run: the time a runtime takes to learn that a coflow's
	// last byte arrived (coflow/live: the sender's done report reaching
	// the coordinator). It does not change scheduling. Measured on the bed.
	// Zero means none. Must not be negative.
	CompletionDelay time.Duration
	// FlowWindowBytes and ChunkRoundTrip cap every flow's disposal rate
	// (raw bytes/s) at FlowWindowBytes/ChunkRoundTrip: a runtime that keeps
	// at most FlowWindowBytes raw bytes of a flow in flight (coflow/live:
	// PipelineDepth × ChunkBytes = 4 × 64 KiB) and waits ChunkRoundTrip for
	// a chunk's acknowledgement (send, the receiver's decompression, the
	// answer; under a small CFS quota mostly waiting for quota) cannot
	// dispose faster, whatever its allocation. Fitted on the bed. Both zero
	// means no cap; both must be set or neither, and not be negative.
	FlowWindowBytes float64
	ChunkRoundTrip  time.Duration
	// CodecCoreEfficiency is the fraction of the cores a scheduler grants a
	// compressed flow that its codec work gets: the compress and
	// decompress stages run at k_s·s·η and k_r·u·η. A runtime whose codec
	// pool shares a port's CPU quota with its own networking (coflow/live
	// on the bed: about 15 ms of CPU per wire MB at each end, the TCP
	// stack, the transport and Go's runtime) and with the quota's
	// throttling leaves the codecs less than they were granted. Fitted on
	// the bed. Zero means 1 (the model's overhead-free cores). Must be in
	// [0, 1].
	CodecCoreEfficiency float64
}

// DefaultChunkBytes is DefaultConfig's pipeline chunk, 64 KiB (our choice:
// the block size of common lz4/snappy framings).
const DefaultChunkBytes = 64 << 10

// DefaultConfig returns pipelined stages with 64 KiB chunks.
func DefaultConfig() Config {
	return Config{Pipelining: true, ChunkBytes: DefaultChunkBytes}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if !(c.ChunkBytes >= 0) || math.IsInf(c.ChunkBytes, 0) {
		return fmt.Errorf("%w: chunk bytes %v must be finite and non-negative", ErrInvalidConfig, c.ChunkBytes)
	}
	if !(c.Tolerance >= 0) || c.Tolerance >= 1 {
		return fmt.Errorf("%w: tolerance %v must be in [0, 1)", ErrInvalidConfig, c.Tolerance)
	}
	if c.MaxCalls < 0 {
		return fmt.Errorf("%w: negative MaxCalls", ErrInvalidConfig)
	}
	if c.CoalesceFlowEvents < 0 {
		return fmt.Errorf("%w: negative CoalesceFlowEvents", ErrInvalidConfig)
	}
	if !(c.WireEfficiency >= 0 && c.WireEfficiency <= 1) {
		return fmt.Errorf("%w: wire efficiency %v must be in [0, 1]", ErrInvalidConfig, c.WireEfficiency)
	}
	if c.CompletionDelay < 0 {
		return fmt.Errorf("%w: negative CompletionDelay", ErrInvalidConfig)
	}
	if !(c.CodecCoreEfficiency >= 0 && c.CodecCoreEfficiency <= 1) {
		return fmt.Errorf("%w: codec core efficiency %v must be in [0, 1]", ErrInvalidConfig, c.CodecCoreEfficiency)
	}
	if !(c.FlowWindowBytes >= 0) || math.IsInf(c.FlowWindowBytes, 0) || c.ChunkRoundTrip < 0 ||
		(c.FlowWindowBytes == 0) != (c.ChunkRoundTrip == 0) {
		return fmt.Errorf("%w: FlowWindowBytes %v and ChunkRoundTrip %v: both positive or both zero", ErrInvalidConfig, c.FlowWindowBytes, c.ChunkRoundTrip)
	}
	return nil
}

// Result is what a simulation run produced.
type Result struct {
	// Scheduler is the scheduler's Name.
	Scheduler string
	// Coflows holds one entry per input coflow, in input order.
	Coflows []CoflowResult
	// RawBytes is the total raw volume delivered; WireBytes the bytes put on
	// the wire (ρ·raw for compressed flows).
	RawBytes, WireBytes float64
	// CPUSeconds is the core-time spent compressing and decompressing
	// (raw bytes processed / per-core speed, summed over both ends).
	CPUSeconds float64
	// ReservedCoreSeconds is the core-time reserved by allocations
	// (cores × duration), ≥ CPUSeconds.
	ReservedCoreSeconds float64
	// Makespan is the last coflow's finish time.
	Makespan time.Duration
	// Calls counts Schedule calls; Events counts distinct event times.
	Calls, Events int
}

// CoflowResult is the outcome for one coflow.
type CoflowResult struct {
	Index, ID int
	Arrival   time.Duration
	// Start is when the first of its flows first got a positive rate.
	Start time.Duration
	// Finish is when its last flow completed; CCT = Finish - Arrival.
	Finish, CCT time.Duration
	// Width is the number of flows; Bytes the raw total; MaxFlowBytes the
	// largest flow; WireBytes the bytes it put on the wire.
	Width                          int
	Bytes, MaxFlowBytes, WireBytes float64
	// FlowFinish holds each flow's completion time, in Coflow.Flows order,
	// when Config.RecordFlows is set; nil otherwise.
	FlowFinish []time.Duration
}

// Sim is the exact event-driven fluid simulator. Rates are constant between
// events; events are coflow arrivals, flow completions and scheduler timers.
// A coflow with a Parent (a later stage of a multi-stage job) arrives when
// released by its parent's completion (see Coflow.Parent).
// The scheduler is called at every event time that has an arrival, a coflow
// completion or its timer; on every flow completion too unless it is
// EventDriven; and, for an EventDriven scheduler, when its last running
// flow ends while coflows are still active. Everything is computed in float64 seconds internally and
// reported rounded to nanoseconds.
//
// Sim is not safe for concurrent use; it runs no goroutines and reads no
// clock, so a run is deterministic.
//
// A Sim may be Run any number of times, one run at a time, on the same or
// other coflows: each Run starts from nothing but the configuration, the
// fabric and the scheduler, returns a new Result and leaves earlier Results
// untouched, also after a run that stopped with an error. The scheduler is
// reused as it is: the built-in ones keep only scratch space between
// Schedule calls, so a second run equals a run on a fresh Sim with a fresh
// scheduler. A scheduler that carries state from one call to the next
// (estimates, incremental structures keyed by FlowRef) gives that
// guarantee only if it resets itself; otherwise build a new Sim and
// scheduler per run.
//
// Cost: with A active coflows, R running flows and P ports, one scheduling
// step costs O(A + R + P + len(allocation)) in the simulator (settling the
// running flows, building the State from persistent per-coflow slices,
// validating and applying the allocation) plus the scheduler's own work.
// For a scheduler that is not EventDriven each flow completion is a heap
// event, O(log R); the heap never holds more than 2·R + 1024 entries
// (stale ones are dropped by a rebuild when they would outnumber the live); an EventDriven run keeps no per-flow events at all and
// completes finished flows lazily at the next scheduling point. Compacting
// a coflow's flow list after some of its flows finished costs O(its flows
// from the first finished one on). A step whose allocation equals the one
// applied last, with no flow finished since, skips validating and applying
// it (O(len(allocation)) to compare; see step): the run is the same.
type Sim struct {
	cfg    Config
	fabric *Fabric
	sched  Scheduler
	tol    float64

	fl      []flowRec   // per flow, global index
	cf      []coflowRec // per coflow
	flowOff []int
	running []int32 // flows with a positive rate
	runPos  []int32 // position in running, -1 if not running
	active  []int32 // active coflows in arrival order
	events  eventHeap
	comp    []compRec
	now     float64
	origin  time.Duration // trace time of internal time 0: the earliest arrival
	ed      bool          // scheduler is EventDriven: no per-flow events
	edNext  float64       // next coflow completion or all-idle time (ed mode)

	// scratch
	st      State
	csBuf   []CoflowState
	seen    []uint32
	seenGen uint32
	portIn  []float64
	portOut []float64
	portCPU []float64
	changed []int32
	sIdx    []int32 // port -> index in the coflow being activated
	rIdx    []int32

	res *Result

	coflows   []Coflow  // the input of the current Run
	released  eventHeap // later stages released, not yet arrived (g = coflow index)
	childHead []int32   // per coflow: first later stage waiting on it, -1 none
	childNext []int32

	// heapPeakExcess is the largest len(events) − 2·len(running) seen after
	// a scheduling step (tests check it stays ≤ heapSlack).
	heapPeakExcess int

	// The allocation applied last (a copy), and the number of flow
	// completions when it was: an equal allocation with no completion
	// since is valid again and changes nothing (see step).
	applied     []Allocation
	appliedOK   bool
	appliedDone int
	nDone       int // flow completions in this run
	sameSkips   int // steps that reused the applied allocation (tests)
	noSameSkip  bool
	skipped     bool    // the last step was skipped
	edSaved     float64 // edNext as computed after the last applied step
}

// heapSlack is the constant in the event-heap bound: after every step the
// heap holds at most 2·running + heapSlack entries, stale ones included.
const heapSlack = 1024

type flowRec struct {
	src, dst   int32
	ci         int32 // coflow index
	slot       int32 // index in cf[ci].fs
	sIdx, rIdx int32 // index in cf[ci].send / recv
	codec      int32
	class      int32 // data class (Flow.Class)
	comp       int32 // 1 + index in Sim.comp once the flow was compressed; 0 = never
	ver        uint32
	done       bool
	bytes      float64
	rem        float64 // raw remaining at t0
	t0         float64 // settle time
	disp       float64 // raw disposal rate
	rate       float64 // wire rate
	tEnd       float64 // completion time under the current allocation
}

// compRec holds the compression state of a flow that was compressed at
// least once (kept apart so raw flows stay small).
//
// The pipeline fill is tracked as a fraction of one chunk's fill lag L
// (Config.ChunkBytes): a fill started at t with lag L ends at lagEnd = t+L;
// if the allocation changes at t' < lagEnd, the fraction (lagEnd−t')/L is
// still to do and ends at t' + fraction·L' under the new rates' lag L'. A
// paused flow keeps its fraction (fill) and the codec its pipeline holds
// (pipe), so resuming with that codec does not refill; a new codec, or a
// raw interval in between, starts a fresh fill.
type compRec struct {
	ks, kr  float64 // reserved cores
	cs, ds  float64 // true per-core speeds in use
	ratio   float64 // wire bytes per raw byte
	lagEnd  float64 // disposal starts at max(t0, lagEnd)
	lagFull float64 // fill lag L at the rates in force
	fill    float64 // fraction of the fill left when paused
	pipe    int32   // codec whose pipeline is (being) filled; Raw = none
}

// fillLeft returns the fraction of cr's fill still to do at t while the
// flow runs.
func (cr *compRec) fillLeft(t float64) float64 {
	if cr.lagFull <= 0 || cr.lagEnd <= t {
		return 0
	}
	return min(1, (cr.lagEnd-t)/cr.lagFull)
}

type coflowRec struct {
	arrival    float64       // internal time; +Inf for an unreleased later stage
	arrAbs     time.Duration // arrival (release) as a trace time
	weight     float64
	bytes      float64
	maxFlow    float64
	sent, wire float64 // raw disposed and wire bytes, as of the last settle
	fs         []FlowState
	send, recv []PortLoad
	dirty      bool
	hole       int32 // lowest slot of a flow finished since the last compaction
	left       int
	started    bool
	activated  bool
	start      float64
	finish     float64
	lastEnd    float64 // latest completion time of its flows
	runCnt     int     // scratch for computeEDNext
	runMax     float64
}

type event struct {
	t   float64
	g   int32
	ver uint32
}

// eventHeap is a binary min-heap on (t, g).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].g < h[j].g
}

func (h eventHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *eventHeap) pop() {
	a := *h
	n := len(a) - 1
	a[0] = a[n]
	*h = a[:n]
	(*h).down(0)
}

func (h eventHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// NewSim validates cfg and fabric and returns a simulator for sched.
func NewSim(cfg Config, fabric *Fabric, sched Scheduler) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fabric.Validate(); err != nil {
		return nil, err
	}
	if sched == nil {
		return nil, fmt.Errorf("%w: nil scheduler", ErrInvalidConfig)
	}
	tol := cfg.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	return &Sim{cfg: cfg, fabric: fabric, sched: sched, tol: tol}, nil
}

// timeEps is the window within which event times are merged: 1 ns, the
// resolution of reported times.
const timeEps = 1e-9

func dur(t float64) time.Duration { return time.Duration(math.Round(t * 1e9)) }

// abs converts an internal time (seconds since the origin) to a trace time.
//
// The simulator keeps times internally as float64 seconds since its origin,
// the earliest arrival, so that rounding does not depend on where the trace
// sits on the clock: shifting every arrival (and a scheduler's timer phase)
// by the same whole number of nanoseconds gives bit-identical runs.
// Without it, at t ≈ 10^4 s the float64 spacing (~2e-12 s) perturbs
// remaining bytes by ~1e-4 B per settle, enough to flip ties between
// coflows with equal keys and move CCTs by ~0.5 % (measured on a synthetic
// trace under SEBF, Sincronia and PFP).
func (s *Sim) abs(t float64) time.Duration { return s.origin + dur(t) }

// rel converts a trace time to internal seconds since the origin.
func (s *Sim) rel(d time.Duration) float64 { return (d - s.origin).Seconds() }

// Run simulates the coflows (in any arrival order) to completion and
// returns per-coflow results in input order. Coflows are validated against
// the fabric first. A scheduler decision that breaks a port's capacity or
// core budget stops the run with an error wrapping ErrBadAllocation.
func (s *Sim) Run(coflows []Coflow) (*Result, error) {
	n := s.fabric.NumPorts()
	total := 0
	for i := range coflows {
		if err := coflows[i].Validate(n); err != nil {
			return nil, fmt.Errorf("coflow index %d: %w", i, err)
		}
		total += len(coflows[i].Flows)
		if p := coflows[i].Parent; p > i {
			return nil, fmt.Errorf("%w: coflow index %d: parent index %d does not come before it", ErrInvalidCoflow, i, p-1)
		}
		for j := range coflows[i].Flows {
			if c := coflows[i].Flows[j].Class; c >= s.fabric.NumClasses() {
				return nil, fmt.Errorf("%w: coflow index %d flow %d: class %d but the fabric has %d", ErrInvalidCoflow, i, j, c, s.fabric.NumClasses())
			}
		}
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d flows exceed the simulator's limit", ErrInvalidCoflow, total)
	}
	s.reset(coflows, total)
	s.coflows = coflows
	defer func() { s.coflows = nil }()
	order := make([]int32, 0, len(coflows)) // coflows with a fixed arrival
	for i := range coflows {
		if coflows[i].Parent == 0 {
			order = append(order, int32(i))
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return coflows[order[a]].Arrival < coflows[order[b]].Arrival })
	s.released = s.released[:0]

	s.ed = false
	if ed, ok := s.sched.(EventDriven); ok {
		s.ed = ed.OnlyOnArrivalsAndCompletions()
	}
	s.edNext = math.Inf(1)
	timer, hasTimer := s.sched.(Timer)
	nextTimer := math.Inf(1)
	nextArr := 0
	finished := 0
	coalesce := s.cfg.CoalesceFlowEvents.Seconds()
	lastCall, pendingFlowCall := math.Inf(-1), math.Inf(1)
	for finished < len(coflows) {
		// Next event time.
		t := math.Inf(1)
		if nextArr < len(order) {
			t = s.cf[order[nextArr]].arrival
		}
		if len(s.released) > 0 {
			t = min(t, s.released[0].t)
		}
		if s.ed {
			t = min(t, s.edNext)
		} else {
			for len(s.events) > 0 {
				e := s.events[0]
				if e.ver != s.fl[e.g].ver || s.fl[e.g].done {
					s.events.pop()
					continue
				}
				t = min(t, e.t)
				break
			}
		}
		t = min(t, nextTimer, pendingFlowCall)
		idle := false
		if math.IsInf(t, 1) {
			// Nothing pending: give the scheduler a chance at the current
			// time.
			if len(s.running) > 0 {
				return nil, fmt.Errorf("%w: running flows without completion events", ErrStalled)
			}
			t, idle = s.now, true
		}
		if t < s.now {
			t = s.now
		}
		s.now = t
		s.res.Events++
		call := idle
		flowCall := false
		if s.ed {
			// Every event-driven event is a scheduling point; flows that
			// finished since the last one are completed here (lazily).
			call = true
			s.edNext = math.Inf(1)
			for i := 0; i < len(s.running); {
				g := s.running[i]
				if s.fl[g].tEnd > t+timeEps {
					i++
					continue
				}
				if ci := s.complete(g, s.fl[g].tEnd); s.cf[ci].left == 0 {
					s.finishCoflow(ci)
					finished++
				}
			}
		} else {
			for len(s.events) > 0 {
				e := s.events[0]
				if e.ver != s.fl[e.g].ver || s.fl[e.g].done {
					s.events.pop()
					continue
				}
				if e.t > t+timeEps {
					break
				}
				s.events.pop()
				flowCall = true
				if ci := s.complete(e.g, e.t); s.cf[ci].left == 0 {
					s.finishCoflow(ci)
					finished++
					call = true
				}
			}
			if pendingFlowCall <= t+timeEps {
				call, pendingFlowCall = true, math.Inf(1)
			} else if flowCall && !call {
				if t >= lastCall+coalesce-timeEps {
					call = true
				} else {
					pendingFlowCall = min(pendingFlowCall, lastCall+coalesce)
				}
			}
		}
		for {
			// Arrivals at t: fixed ones and released later stages, in
			// arrival order (ties: fixed first, then by index).
			ci := int32(-1)
			if nextArr < len(order) && s.cf[order[nextArr]].arrival <= t+timeEps {
				ci = order[nextArr]
				if len(s.released) > 0 && s.released[0].t < s.cf[ci].arrival {
					ci = -1
				} else {
					nextArr++
				}
			}
			if ci < 0 && len(s.released) > 0 && s.released[0].t <= t+timeEps {
				ci = s.released[0].g
				s.released.pop()
			}
			if ci < 0 {
				break
			}
			s.activate(ci, &coflows[ci])
			call = true
		}
		if nextTimer <= t+timeEps {
			nextTimer = math.Inf(1)
			call = true
		}
		if !call || len(s.active) == 0 {
			continue
		}
		if s.cfg.MaxCalls > 0 && s.res.Calls >= s.cfg.MaxCalls {
			return nil, fmt.Errorf("%w: MaxCalls %d reached at %v", ErrStalled, s.cfg.MaxCalls, s.abs(t))
		}
		if err := s.step(coflows); err != nil {
			return nil, err
		}
		lastCall, pendingFlowCall = t, math.Inf(1)
		if s.ed {
			if s.skipped {
				// Nothing ran differently since the last computation: no
				// flow finished, the running flows and their ends are as
				// they were, and a coflow that arrived since runs nothing.
				s.edNext = s.edSaved
			} else {
				s.computeEDNext()
				s.edSaved = s.edNext
			}
		}
		if hasTimer {
			if at, ok := timer.NextWakeup(s.abs(t)); ok {
				if at2 := s.rel(at); at2 > t+timeEps/2 {
					nextTimer = at2
				}
			}
		}
		if idle && len(s.running) == 0 && math.IsInf(nextTimer, 1) && nextArr == len(order) && len(s.released) == 0 {
			return nil, fmt.Errorf("%w at %v: %d active coflows, scheduler %q allocated nothing", ErrStalled, s.abs(t), len(s.active), s.sched.Name())
		}
	}
	return s.finishResult(coflows), nil
}

func (s *Sim) reset(coflows []Coflow, total int) {
	n := s.fabric.NumPorts()
	s.fl = make([]flowRec, total)
	s.cf = make([]coflowRec, len(coflows))
	s.flowOff = make([]int, len(coflows)+1)
	s.running = s.running[:0]
	s.runPos = make([]int32, total)
	s.active = s.active[:0]
	s.events = s.events[:0]
	s.comp = s.comp[:0]
	s.now = 0
	s.seen = make([]uint32, total)
	s.seenGen = 0
	s.portIn = make([]float64, n)
	s.portOut = make([]float64, n)
	s.portCPU = make([]float64, n)
	s.sIdx = make([]int32, n)
	s.rIdx = make([]int32, n)
	for p := range n {
		s.sIdx[p], s.rIdx[p] = -1, -1
	}
	s.res = &Result{Scheduler: s.sched.Name(), Coflows: make([]CoflowResult, len(coflows))}
	s.applied, s.appliedOK, s.appliedDone, s.nDone = s.applied[:0], false, 0, 0
	s.origin = 0
	first := true
	for i := range coflows {
		if coflows[i].Parent == 0 && (first || coflows[i].Arrival < s.origin) {
			s.origin, first = coflows[i].Arrival, false
		}
	}
	s.childHead = make([]int32, len(coflows))
	s.childNext = make([]int32, len(coflows))
	for i := range coflows {
		s.childHead[i], s.childNext[i] = -1, -1
	}
	g := 0
	for i := range coflows {
		s.flowOff[i] = g
		s.cf[i].arrAbs = coflows[i].Arrival
		s.cf[i].arrival = s.rel(coflows[i].Arrival)
		if p := coflows[i].Parent; p > 0 {
			s.cf[i].arrival = math.Inf(1) // until its parent completes
			// Prepend; children are released in index order below.
			s.childNext[i] = s.childHead[p-1]
			s.childHead[p-1] = int32(i)
		}
		g += len(coflows[i].Flows)
	}
	s.flowOff[len(coflows)] = g
}

// activate sets up coflow ci's per-flow state when it arrives.
func (s *Sim) activate(ci int32, c *Coflow) {
	r := &s.cf[ci]
	r.activated = true
	r.weight = c.EffectiveWeight()
	r.left = len(c.Flows)
	r.fs = make([]FlowState, len(c.Flows))
	if s.cfg.RecordFlows {
		s.res.Coflows[ci].FlowFinish = make([]time.Duration, len(c.Flows))
	}
	off := s.flowOff[ci]
	for j, f := range c.Flows {
		if s.sIdx[f.Src] < 0 {
			s.sIdx[f.Src] = int32(len(r.send))
			r.send = append(r.send, PortLoad{Port: f.Src})
		}
		if s.rIdx[f.Dst] < 0 {
			s.rIdx[f.Dst] = int32(len(r.recv))
			r.recv = append(r.recv, PortLoad{Port: f.Dst})
		}
		si, ri := s.sIdx[f.Src], s.rIdx[f.Dst]
		r.send[si].Bytes += f.Bytes
		r.send[si].Flows++
		r.recv[ri].Bytes += f.Bytes
		r.recv[ri].Flows++
		r.bytes += f.Bytes
		r.maxFlow = max(r.maxFlow, f.Bytes)
		r.fs[j] = FlowState{Ref: FlowRef{Coflow: int(ci), Flow: j}, Src: f.Src, Dst: f.Dst, Bytes: f.Bytes, Remaining: f.Bytes, Class: f.Class}
		s.fl[off+j] = flowRec{src: int32(f.Src), dst: int32(f.Dst), ci: ci, slot: int32(j), sIdx: si, rIdx: ri,
			class: int32(f.Class), bytes: f.Bytes, rem: f.Bytes}
		s.runPos[off+j] = -1
	}
	for _, pl := range r.send {
		s.sIdx[pl.Port] = -1
	}
	for _, pl := range r.recv {
		s.rIdx[pl.Port] = -1
	}
	s.active = append(s.active, ci)
}

// from returns when flow f starts disposing of bytes under its current
// allocation (after a pipeline fill for compressed flows).
func (s *Sim) from(f *flowRec) float64 {
	if f.codec == Raw {
		return f.t0
	}
	return max(f.t0, s.comp[f.comp-1].lagEnd)
}

// remAt returns the flow's raw remaining at time t.
func (s *Sim) remAt(f *flowRec, t float64) float64 {
	if f.disp == 0 {
		return f.rem
	}
	from := s.from(f)
	if t <= from {
		return f.rem
	}
	return max(0, f.rem-f.disp*(t-from))
}

// settle brings flow g's counters to time t, accounting what it disposed
// since its last settle; its completion time does not change.
func (s *Sim) settle(g int32, t float64) {
	f := &s.fl[g]
	if t <= f.t0 {
		return
	}
	r := s.remAt(f, t)
	s.dispose(f, f.rem-r, t-f.t0)
	f.rem = r
	s.cf[f.ci].fs[f.slot].Remaining = r
	f.t0 = t
}

// dispose accounts x raw bytes disposed by f over dt seconds.
func (s *Sim) dispose(f *flowRec, x, dt float64) {
	c := &s.cf[f.ci]
	w := x
	if f.codec != Raw {
		cr := &s.comp[f.comp-1]
		w = x * cr.ratio
		s.res.CPUSeconds += x/cr.cs + x/cr.ds
		s.res.ReservedCoreSeconds += (cr.ks + cr.kr) * dt
	}
	s.res.WireBytes += w
	c.wire += w
	c.sent += x
	c.send[f.sIdx].Bytes = max(0, c.send[f.sIdx].Bytes-x)
	c.recv[f.rIdx].Bytes = max(0, c.recv[f.rIdx].Bytes-x)
}

// complete finishes flow g, whose last byte was disposed of at tEnd.
func (s *Sim) complete(g int32, tEnd float64) int32 {
	f := &s.fl[g]
	s.dispose(f, f.rem, max(0, tEnd-f.t0))
	c := &s.cf[f.ci]
	c.lastEnd = max(c.lastEnd, tEnd)
	if s.cfg.RecordFlows {
		s.res.Coflows[f.ci].FlowFinish[int(g)-s.flowOff[f.ci]] = s.abs(tEnd)
	}
	sp, rp := &c.send[f.sIdx], &c.recv[f.rIdx]
	sp.Flows--
	rp.Flows--
	if sp.Flows == 0 {
		sp.Bytes = 0
	}
	if rp.Flows == 0 {
		rp.Bytes = 0
	}
	f.rem = 0
	f.t0 = s.now
	f.done = true
	s.nDone++
	f.ver++
	s.res.RawBytes += f.bytes
	s.stopRunning(g)
	c.left--
	if !c.dirty || f.slot < c.hole {
		c.hole = f.slot
	}
	c.dirty = true
	c.fs[f.slot].Src = -1 // finished: dropped by the next compaction
	return f.ci
}

func (s *Sim) stopRunning(g int32) {
	p := s.runPos[g]
	if p < 0 {
		return
	}
	last := s.running[len(s.running)-1]
	s.running[p] = last
	s.runPos[last] = p
	s.running = s.running[:len(s.running)-1]
	s.runPos[g] = -1
}

func (s *Sim) finishCoflow(ci int32) {
	c := &s.cf[ci]
	c.finish = c.lastEnd
	for k := s.childHead[ci]; k >= 0; k = s.childNext[k] {
		// Release a later stage, at a whole nanosecond like every arrival.
		cc := &s.coflows[k]
		gap := cc.ReleaseDelay + time.Duration(math.Round(cc.ReleasePerWireByte*c.wire*1e9))
		r := &s.cf[k]
		r.arrAbs = s.abs(c.finish) + gap
		r.arrival = s.rel(r.arrAbs)
		s.released.push(event{t: r.arrival, g: k})
	}
	c.fs, c.send, c.recv = nil, nil, nil
	for i, a := range s.active {
		if a == ci {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
}

// buildState settles the running flows and fills s.st. Cost O(A + R) plus
// compaction of coflows that lost flows since the last call.
func (s *Sim) buildState(coflows []Coflow) {
	t := s.now
	for _, g := range s.running {
		s.settle(g, t)
	}
	s.csBuf = s.csBuf[:0]
	for _, ci := range s.active {
		c := &s.cf[ci]
		if c.dirty {
			// Drop the finished flows (marked Src −1 by complete), keeping
			// the order; from the lowest finished slot on, every flow kept
			// moves down.
			k := int(c.hole)
			off := s.flowOff[ci]
			fs := c.fs
			for j := k; j < len(fs); j++ {
				if fs[j].Src < 0 {
					continue
				}
				fs[k] = fs[j]
				s.fl[off+fs[k].Ref.Flow].slot = int32(k)
				k++
			}
			clear(fs[k:])
			c.fs = fs[:k]
			c.dirty = false
		}
		s.csBuf = append(s.csBuf, CoflowState{
			Index: int(ci), ID: coflows[ci].ID, Arrival: c.arrAbs, Weight: c.weight,
			Width: len(coflows[ci].Flows), Bytes: c.bytes, Sent: c.sent, WireSent: c.wire,
			Flows: c.fs[:len(c.fs):len(c.fs)], Send: c.send[:len(c.send):len(c.send)], Recv: c.recv[:len(c.recv):len(c.recv)],
		})
	}
	s.st = State{Now: s.abs(t), Fabric: s.fabric, Coflows: s.csBuf}
}

// step calls the scheduler at s.now and applies its allocation.
//
// An allocation equal, field by field and float by float bit, to the one
// applied last, with no flow completed since, is neither validated nor
// applied again: every flow it names is still unfinished (so it is as
// valid as it was), the running flows are exactly those it gives a
// positive rate, at that rate, codec and cores, so applying it would change
// nothing. That is the common case of a timer that fires while nothing the
// scheduler looks at has changed (e.g. D-CLAS's threshold timer when
// compressed flows dispose slower than their wire rate suggests). Cost of
// the comparison O(len(allocs)); a changed allocation is copied once.
func (s *Sim) step(coflows []Coflow) error {
	s.buildState(coflows)
	s.res.Calls++
	allocs := s.sched.Schedule(s.st.Now, &s.st)
	same := s.appliedOK && !s.noSameSkip && s.appliedDone == s.nDone && SameAllocations(allocs, s.applied)
	if !same {
		if err := s.validate(allocs); err != nil {
			return fmt.Errorf("scheduler %q at %v: %w", s.sched.Name(), s.st.Now, err)
		}
	}
	if s.cfg.Check != nil {
		if err := s.cfg.Check(s.st.Now, &s.st, allocs); err != nil {
			return fmt.Errorf("check at %v: %w", s.st.Now, err)
		}
	}
	s.skipped = same
	if same {
		s.sameSkips++
		return nil
	}
	s.apply(allocs)
	s.applied, s.appliedOK, s.appliedDone = append(s.applied[:0], allocs...), true, s.nDone
	return nil
}

// SameAllocations reports whether a and b are equal element by element,
// every field equal and floats equal bit by bit (so +0 and −0 differ):
// the test for "this call changed nothing" that lets a caller reuse what
// it derived from an earlier allocation.
func SameAllocations(a, b []Allocation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Flow != y.Flow || x.Codec != y.Codec || math.Float64bits(x.Rate) != math.Float64bits(y.Rate) ||
			math.Float64bits(x.SendCores) != math.Float64bits(y.SendCores) || math.Float64bits(x.RecvCores) != math.Float64bits(y.RecvCores) {
			return false
		}
	}
	return true
}

func (s *Sim) validate(allocs []Allocation) error {
	s.seenGen++
	if s.seenGen == 0 {
		clear(s.seen)
		s.seenGen = 1
	}
	clear(s.portIn)
	clear(s.portOut)
	clear(s.portCPU)
	nc := len(s.fabric.Codecs)
	for i := range allocs {
		a := &allocs[i]
		ci, fi := a.Flow.Coflow, a.Flow.Flow
		if ci < 0 || ci >= len(s.cf) || !s.cf[ci].activated || s.cf[ci].left == 0 {
			return fmt.Errorf("%w: flow %v: coflow index not active", ErrBadAllocation, a.Flow)
		}
		if fi < 0 || fi >= s.flowOff[ci+1]-s.flowOff[ci] {
			return fmt.Errorf("%w: flow %v: no such flow", ErrBadAllocation, a.Flow)
		}
		g := s.flowOff[ci] + fi
		f := &s.fl[g]
		if f.done {
			return fmt.Errorf("%w: flow %v already finished", ErrBadAllocation, a.Flow)
		}
		if s.seen[g] == s.seenGen {
			return fmt.Errorf("%w: flow %v allocated twice", ErrBadAllocation, a.Flow)
		}
		s.seen[g] = s.seenGen
		if err := checkAllocationFields(a, nc); err != nil {
			return err
		}
		s.portIn[f.src] += a.Rate
		s.portOut[f.dst] += a.Rate
		s.portCPU[f.src] += a.SendCores
		s.portCPU[f.dst] += a.RecvCores
	}
	for p := range s.fabric.Ports {
		pt := &s.fabric.Ports[p]
		if s.portIn[p] > pt.Ingress*(1+s.tol) {
			return fmt.Errorf("%w: port %d ingress %.6g B/s over capacity %.6g B/s", ErrBadAllocation, p, s.portIn[p], pt.Ingress)
		}
		if s.portOut[p] > pt.Egress*(1+s.tol) {
			return fmt.Errorf("%w: port %d egress %.6g B/s over capacity %.6g B/s", ErrBadAllocation, p, s.portOut[p], pt.Egress)
		}
		if s.portCPU[p] > pt.FreeCores()*(1+s.tol)+1e-12 {
			return fmt.Errorf("%w: port %d uses %.6g cores, %.6g free", ErrBadAllocation, p, s.portCPU[p], pt.FreeCores())
		}
	}
	return nil
}

func (s *Sim) stopFlow(g int32) {
	f := &s.fl[g]
	if f.codec != Raw && s.runPos[g] >= 0 {
		// Paused: freeze the pipeline fill where it is.
		cr := &s.comp[f.comp-1]
		cr.fill = cr.fillLeft(s.now)
	}
	f.rate, f.disp, f.codec = 0, 0, Raw
	f.ver++
	fs := &s.cf[f.ci].fs[f.slot]
	fs.Rate, fs.Codec = 0, Raw
	s.stopRunning(g)
}

// apply installs a validated allocation at s.now. Running flows were
// settled to s.now by buildState. Cost O(R + len(allocs)), plus O(log R)
// per changed flow or one O(R) heap rebuild when most flows changed.
func (s *Sim) apply(allocs []Allocation) {
	t := s.now
	for i := 0; i < len(s.running); {
		g := s.running[i]
		if s.seen[g] == s.seenGen {
			i++
			continue
		}
		s.stopFlow(g) // moves another flow into slot i
	}
	s.changed = s.changed[:0]
	for i := range allocs {
		a := &allocs[i]
		g := int32(s.flowOff[a.Flow.Coflow] + a.Flow.Flow)
		f := &s.fl[g]
		wasRunning := s.runPos[g] >= 0
		if wasRunning && f.rate == a.Rate && int(f.codec) == a.Codec &&
			(a.Codec == Raw || s.comp[f.comp-1].ks == a.SendCores && s.comp[f.comp-1].kr == a.RecvCores) {
			continue // unchanged: its completion event stays valid
		}
		if a.Rate == 0 {
			if wasRunning {
				s.stopFlow(g)
			}
			continue
		}
		prevCodec := f.codec
		f.ver++
		f.t0 = t // paused flows hold their remaining since their last settle
		f.rate, f.codec = a.Rate, int32(a.Codec)
		if a.Codec == Raw {
			f.disp = s.windowCap(s.wireRate(a.Rate))
			if f.comp != 0 {
				s.comp[f.comp-1].pipe = Raw // sent raw: the pipeline drains
			}
		} else {
			s.setCompressed(f, a, t, wasRunning && prevCodec == f.codec)
		}
		fs := &s.cf[f.ci].fs[f.slot]
		fs.Rate, fs.Codec = a.Rate, a.Codec
		if !wasRunning {
			s.runPos[g] = int32(len(s.running))
			s.running = append(s.running, g)
		}
		if c := &s.cf[f.ci]; !c.started {
			c.started, c.start = true, t
		}
		f.tEnd = s.eventOf(g).t
		s.changed = append(s.changed, g)
	}
	if s.ed {
		return
	}
	// Every running flow has exactly one live event; the others are stale
	// (superseded by a later version, or of a flow that stopped). Push the
	// changed flows' events, unless most of the heap would be rewritten or
	// the stale entries would outnumber the live ones (beyond heapSlack):
	// then rebuild from the running flows, which drops every stale entry.
	// So len(events) ≤ 2·running + heapSlack after every step, and the
	// amortised cost stays O(log R) per changed flow.
	if len(s.changed)*2 > len(s.events) || len(s.events)+len(s.changed) > 2*len(s.running)+heapSlack {
		s.events = s.events[:0]
		for _, g := range s.running {
			s.events = append(s.events, s.eventOf(g))
		}
		s.events.init()
	} else {
		for _, g := range s.changed {
			s.events.push(s.eventOf(g))
		}
	}
	s.heapPeakExcess = max(s.heapPeakExcess, len(s.events)-2*len(s.running))
}

// computeEDNext sets edNext, the next event of an event-driven run: the
// earliest completion of a coflow whose unfinished flows are all running, or
// the time the last running flow ends (the fabric goes idle). Cost O(R + A).
func (s *Sim) computeEDNext() {
	s.edNext = math.Inf(1)
	if len(s.running) == 0 {
		return
	}
	allDone := 0.0
	for _, ci := range s.active {
		s.cf[ci].runCnt, s.cf[ci].runMax = 0, 0
	}
	for _, g := range s.running {
		f := &s.fl[g]
		c := &s.cf[f.ci]
		c.runCnt++
		c.runMax = max(c.runMax, f.tEnd)
		allDone = max(allDone, f.tEnd)
	}
	next := allDone
	for _, ci := range s.active {
		if c := &s.cf[ci]; c.runCnt == c.left {
			next = min(next, c.runMax)
		}
	}
	s.edNext = next
}

// wireRate is the wire rate a flow allocated r achieves
// (Config.WireEfficiency; exactly r when it is zero).
func (s *Sim) wireRate(r float64) float64 {
	if s.cfg.WireEfficiency == 0 {
		return r
	}
	return r * s.cfg.WireEfficiency
}

// windowCap caps a disposal rate at Config.FlowWindowBytes /
// Config.ChunkRoundTrip (d itself without a window).
func (s *Sim) windowCap(d float64) float64 {
	if s.cfg.FlowWindowBytes == 0 {
		return d
	}
	return min(d, s.cfg.FlowWindowBytes/s.cfg.ChunkRoundTrip.Seconds())
}

func (s *Sim) eventOf(g int32) event {
	f := &s.fl[g]
	return event{t: s.from(f) + f.rem/f.disp, g: g, ver: f.ver}
}

// setCompressed sets the disposal rate, ratio, speeds and pipeline lag of a
// compressed flow; running tells that it was running with the same codec
// until t (so its fill, if unfinished, continues at the new rates).
func (s *Sim) setCompressed(f *flowRec, a *Allocation, t float64, running bool) {
	if f.comp == 0 {
		s.comp = append(s.comp, compRec{})
		f.comp = int32(len(s.comp))
	}
	cr := &s.comp[f.comp-1]
	frac := 1.0 // a fresh fill
	switch {
	case running:
		frac = cr.fillLeft(t)
	case cr.pipe == int32(a.Codec):
		frac = cr.fill // resumed with the codec its pipeline holds
	}
	cr.pipe = int32(a.Codec)
	k := a.Codec
	prof := s.fabric.Profile(int(f.class), k)
	cs, ds := s.fabric.ClassSpeeds(int(f.src), int(f.dst), int(f.class), k)
	if s.cfg.CodecSpeed != nil {
		now := s.abs(t)
		cs, _ = s.cfg.CodecSpeed(int(f.src), k, now)
		_, ds = s.cfg.CodecSpeed(int(f.dst), k, now)
		// The hook gives the reference codec's speed; the class scales it
		// (factors exactly 1 without classes).
		fc, fd, _ := s.fabric.ClassFactors(int(f.class), k)
		cs, ds = cs*fc, ds*fd
		// A hook returning a non-positive speed would stall the flow;
		// clamp to a tiny positive speed so the run reports a huge CCT
		// instead of dividing by zero.
		cs, ds = max(cs, 1e-9), max(ds, 1e-9)
	}
	cr.ks, cr.kr = a.SendCores, a.RecvCores
	cr.cs, cr.ds, cr.ratio = cs, ds, prof.Ratio
	cRate, tRate, dRate := a.SendCores*cs, s.wireRate(a.Rate)/prof.Ratio, a.RecvCores*ds
	if eta := s.cfg.CodecCoreEfficiency; eta != 0 {
		cRate, dRate = cRate*eta, dRate*eta
	}
	cr.lagEnd, cr.lagFull, cr.fill = t, 0, 0
	if s.cfg.Pipelining {
		f.disp = s.windowCap(min(cRate, min(tRate, dRate)))
		if s.cfg.ChunkBytes > 0 && frac > 0 {
			b := min(s.cfg.ChunkBytes, f.rem)
			cr.lagFull = max(0, b/cRate+b/tRate+b/dRate-b/f.disp)
			if !(cr.lagFull < math.Inf(1)) {
				// Stage rates so small that a chunk's time overflows
				// (Inf − Inf is NaN): the fill never ends, so the flow
				// never finishes; a NaN would stall the event loop.
				cr.lagFull = math.Inf(1)
			}
			cr.lagEnd = t + frac*cr.lagFull
		}
	} else {
		f.disp = s.windowCap(1 / (1/cRate + 1/tRate + 1/dRate))
	}
}

func (s *Sim) finishResult(coflows []Coflow) *Result {
	var mk float64
	for i := range coflows {
		c := &s.cf[i]
		mk = max(mk, c.finish)
		ff := s.res.Coflows[i].FlowFinish
		s.res.Coflows[i] = CoflowResult{
			FlowFinish: ff,
			Index:      i, ID: coflows[i].ID, Arrival: c.arrAbs,
			Start: s.abs(c.start), Finish: s.abs(c.finish) + s.cfg.CompletionDelay, CCT: s.abs(c.finish) + s.cfg.CompletionDelay - c.arrAbs,
			Width: len(coflows[i].Flows), Bytes: c.bytes, MaxFlowBytes: c.maxFlow, WireBytes: c.wire,
		}
	}
	s.res.Makespan = s.abs(mk)
	return s.res
}
