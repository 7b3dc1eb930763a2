package coflowtr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/live"
	"github.com/falconml/falcon/transport"
)

// RegistryConfig describes one training job to its Registry. Zero fields
// take the defaults of DefaultRegistryConfig where a field says so.
type RegistryConfig struct {
	// Job names the job in errors. Required.
	Job string
	// Workers and Servers are the job's ps nodes in the order the flows
	// of a coflow are listed (worker-major). Required.
	Workers, Servers []transport.NodeID
	// Ports maps every worker and server to the fabric port of its
	// machine (its live.Agent's position in live.Config.Agents); two
	// jobs' nodes on one machine share a port. Required for every node.
	Ports map[transport.NodeID]int
	// Class is the data class of every flow (coflow.Flow.Class).
	Class int
	// Weight is every coflow's weight (live.Agent.Register); zero means 1.
	Weight float64
	// Keep is how many clocks a coflow outlives: when clock c's coflow of
	// a phase is registered, those of clocks below c − Keep are
	// unregistered even if a flow never came (a push the policy dropped).
	// Zero means 2.
	Keep int
	// Timeout bounds one registration or unregistration at the
	// coordinator. Zero means 5 s.
	Timeout time.Duration
	// MaxFlowBytes bounds a flow (a message carried as a flow). Zero means
	// 1 GiB, live.Config's default.
	MaxFlowBytes int64
}

// DefaultRegistryConfig returns the defaults (Job, Workers, Servers and
// Ports still need setting).
func DefaultRegistryConfig() RegistryConfig {
	return RegistryConfig{Weight: 1, Keep: 2, Timeout: 5 * time.Second, MaxFlowBytes: 1 << 30}
}

func (c RegistryConfig) withDefaults() RegistryConfig {
	d := DefaultRegistryConfig()
	if c.Weight == 0 {
		c.Weight = d.Weight
	}
	if c.Keep == 0 {
		c.Keep = d.Keep
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.MaxFlowBytes == 0 {
		c.MaxFlowBytes = d.MaxFlowBytes
	}
	return c
}

// Validate checks the configuration (zeros mean defaults).
func (c *RegistryConfig) Validate() error {
	x := c.withDefaults()
	if x.Job == "" || len(x.Workers) == 0 || len(x.Servers) == 0 {
		return fmt.Errorf("%w: job %q with %d workers and %d servers", ErrInvalidConfig, x.Job, len(x.Workers), len(x.Servers))
	}
	for _, n := range append(slices.Clone(x.Workers), x.Servers...) {
		if p, ok := x.Ports[n]; !ok || p < 0 {
			return fmt.Errorf("%w: job %s: no port for %s", ErrInvalidConfig, x.Job, n)
		}
	}
	if x.Class < 0 || x.Weight < 0 || x.Keep < 0 || x.Timeout < 0 || x.MaxFlowBytes < 0 {
		return fmt.Errorf("%w: job %s: negative field", ErrInvalidConfig, x.Job)
	}
	return nil
}

type ckey struct {
	clock int64
	phase Phase
}

type pair struct{ worker, server transport.NodeID }

type skey struct {
	phase  Phase
	server transport.NodeID
}

// entry is one coflow (job, clock, phase).
type entry struct {
	key     ckey
	ready   chan struct{} // closed once registered (or failed)
	err     error
	id      live.CoflowID
	agent   *live.Agent // the agent it was registered through
	index   map[pair]int
	pairs   []pair
	sizes   []int64
	claimed []bool
	done    []bool
	left    int
	started time.Time
}

// Registry turns a job's clocks into coflows: the first message of clock
// c of a phase registers coflow (job, c, phase) at the live coordinator,
// through the agent of the node that sent it, with one flow per (worker,
// server) pair whose size it knows, and unregisters it once every flow has
// been received (or Keep clocks later). Every wrapped node of the job
// shares one Registry; it is in-process (see the package doc for what a
// multi-process job needs). Safe for concurrent use.
type Registry struct {
	cfg RegistryConfig

	mu      sync.Mutex
	closed  bool
	sizes   map[skey]int64
	entries map[ckey]*entry
	byID    map[live.CoflowID]*entry
	floor   map[Phase]int64 // clocks below are gone: their messages go direct
	stats   Stats
	wg      sync.WaitGroup
}

// Stats counts what a Registry and its wrappers did.
type Stats struct {
	// Coflows registered, and unregistered so far.
	Registered, Unregistered int
	// FlowMsgs and FlowBytes count the ps messages carried as flows;
	// DirectMsgs and DirectBytes the pushes and pulls that went on the
	// inner transport (too small, a size the coflow did not declare, a
	// clock already gone).
	FlowMsgs, DirectMsgs   int
	FlowBytes, DirectBytes int64
	// UnregisterErrors counts unregistrations that failed (the coflow
	// then stays at the coordinator until it dies or is closed).
	UnregisterErrors int
	// CCTs holds each completed coflow's time from registration to its
	// last flow's receipt, in completion order.
	CCTs []time.Duration
}

// NewRegistry validates cfg and returns a registry.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Workers, cfg.Servers = slices.Clone(cfg.Workers), slices.Clone(cfg.Servers)
	return &Registry{cfg: cfg, sizes: map[skey]int64{}, entries: map[ckey]*entry{}, byID: map[live.CoflowID]*entry{},
		floor: map[Phase]int64{Push: -1 << 62, Pull: -1 << 62}}, nil
}

// Job returns the job's name.
func (r *Registry) Job() string { return r.cfg.Job }

// Stats returns a copy of the counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.CCTs = slices.Clone(s.CCTs)
	return s
}

func (r *Registry) isServer(n transport.NodeID) bool { return slices.Contains(r.cfg.Servers, n) }

func (r *Registry) count(flow bool, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if flow {
		r.stats.FlowMsgs++
		r.stats.FlowBytes += int64(n)
	} else {
		r.stats.DirectMsgs++
		r.stats.DirectBytes += int64(n)
	}
}

// flow returns the coflow and flow index that carry (worker, server)'s
// message of size bytes in clock's phase, registering the coflow through
// agent if it is the clock's first message. ok is false when the message
// is to go direct. The wait for another caller's registration is bounded
// by ctx and Timeout.
func (r *Registry) flow(ctx context.Context, agent *live.Agent, agentName transport.NodeID, clock int64, ph Phase, worker, server transport.NodeID, size int64) (live.CoflowID, int, bool, error) {
	if size > r.cfg.MaxFlowBytes {
		return 0, 0, false, nil
	}
	k := ckey{clock, ph}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, 0, false, fmt.Errorf("%w: job %s registry", ErrClosed, r.cfg.Job)
	}
	if clock < r.floor[ph] {
		r.mu.Unlock()
		return 0, 0, false, nil
	}
	e := r.entries[k]
	if sk := (skey{ph, server}); e == nil || r.sizes[sk] == 0 {
		r.sizes[sk] = size // the clock's first message sets its server's size
	}
	if e == nil {
		e = r.newEntry(k)
		r.entries[k] = e
		r.gcLocked(k)
		r.mu.Unlock()
		flows := make([]coflow.Flow, len(e.pairs))
		for j, p := range e.pairs {
			src, dst := r.cfg.Ports[p.worker], r.cfg.Ports[p.server]
			if ph == Pull {
				src, dst = dst, src
			}
			flows[j] = coflow.Flow{ID: j, Src: src, Dst: dst, Bytes: float64(e.sizes[j]), Class: r.cfg.Class}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
		id, err := agent.Register(rctx, flows, r.cfg.Weight)
		cancel()
		r.mu.Lock()
		e.id, e.agent, e.started = id, agent, time.Now()
		if err != nil {
			e.err = fmt.Errorf("coflowtr: job %s clock %d %s: register through agent %s: %w", r.cfg.Job, clock, ph, agentName, err)
		} else {
			r.byID[id] = e
			r.stats.Registered++
			if r.entries[k] != e || r.closed { // collected or closed meanwhile
				r.unregisterLocked(e)
			}
		}
		close(e.ready)
		r.mu.Unlock()
	} else {
		r.mu.Unlock()
	}
	t := time.NewTimer(r.cfg.Timeout)
	defer t.Stop()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return 0, 0, false, ctx.Err()
	case <-t.C:
		return 0, 0, false, fmt.Errorf("%w: job %s clock %d %s: registration not done within %v", ErrTimeout, r.cfg.Job, clock, ph, r.cfg.Timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.err != nil {
		return 0, 0, false, e.err
	}
	j, ok := e.index[pair{worker, server}]
	if !ok || e.sizes[j] != size || e.claimed[j] || r.byID[e.id] != e {
		return 0, 0, false, nil
	}
	e.claimed[j] = true
	return e.id, j, true, nil
}

// newEntry lays out coflow k's flows from the sizes known; r.mu held.
func (r *Registry) newEntry(k ckey) *entry {
	e := &entry{key: k, ready: make(chan struct{}), index: map[pair]int{}}
	for _, w := range r.cfg.Workers {
		for _, s := range r.cfg.Servers {
			n := r.sizes[skey{k.phase, s}]
			if n <= 0 {
				continue
			}
			e.index[pair{w, s}] = len(e.pairs)
			e.pairs = append(e.pairs, pair{w, s})
			e.sizes = append(e.sizes, n)
		}
	}
	e.claimed, e.done, e.left = make([]bool, len(e.pairs)), make([]bool, len(e.pairs)), len(e.pairs)
	return e
}

// gcLocked unregisters the coflows of k's phase older than k.clock − Keep.
func (r *Registry) gcLocked(k ckey) {
	if f := k.clock - int64(r.cfg.Keep); f > r.floor[k.phase] {
		r.floor[k.phase] = f
	}
	for ok, e := range r.entries {
		if ok.phase == k.phase && ok.clock < r.floor[k.phase] {
			delete(r.entries, ok)
			r.unregisterLocked(e)
		}
	}
}

// unregisterLocked unregisters e in the background if it was registered;
// r.mu held.
func (r *Registry) unregisterLocked(e *entry) {
	if r.byID[e.id] != e || e.agent == nil {
		return // not (yet) registered: the registering caller will see it is gone
	}
	delete(r.byID, e.id)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		defer cancel()
		err := e.agent.Unregister(ctx, e.id)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.stats.UnregisterErrors++
		} else {
			r.stats.Unregistered++
		}
	}()
}

// lookup returns the coflow of id if it is this job's and flow j's pair is
// (worker, server) in phase ph.
func (r *Registry) lookup(id live.CoflowID, j int, ph Phase, worker, server transport.NodeID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byID[id]
	if e == nil || e.key.phase != ph || j < 0 || j >= len(e.pairs) || e.pairs[j] != (pair{worker, server}) {
		return fmt.Errorf("%w: job %s: coflow %d flow %d is not %s's %s with %s", ErrForeignFlow, r.cfg.Job, id, j, worker, ph, server)
	}
	return nil
}

// received marks flow j of coflow id received; the coflow is
// unregistered once all its flows are.
func (r *Registry) received(id live.CoflowID, j int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byID[id]
	if e == nil || j < 0 || j >= len(e.done) || e.done[j] {
		return
	}
	e.done[j] = true
	e.left--
	if e.left == 0 {
		r.stats.CCTs = append(r.stats.CCTs, time.Since(e.started))
		if r.entries[e.key] == e {
			delete(r.entries, e.key)
		}
		r.unregisterLocked(e)
	}
}

// Close unregisters every coflow still registered and waits for the
// unregistrations (each bounded by Timeout). Later messages fail with
// ErrClosed.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	for k, e := range r.entries {
		delete(r.entries, k)
		r.unregisterLocked(e)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// Sentinel errors, checked with errors.Is.
var (
	// ErrInvalidConfig marks a Config or RegistryConfig that fails Validate.
	ErrInvalidConfig = errors.New("coflowtr: invalid config")
	// ErrMalformed marks an envelope that does not decode.
	ErrMalformed = errors.New("coflowtr: malformed envelope")
	// ErrForeignFlow marks an envelope naming a flow that is not the
	// sender's to this server in this job (refused before any data is
	// taken from the agent).
	ErrForeignFlow = errors.New("coflowtr: not the sender's flow")
	// ErrTimeout marks a wait that passed its configured bound.
	ErrTimeout = errors.New("coflowtr: timed out")
	// ErrClosed marks a call on a closed Registry.
	ErrClosed = errors.New("coflowtr: closed")
)
