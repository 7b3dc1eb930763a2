package coflow

import "time"

// Scheduler decides, from the current state of the fabric, the rate (and
// optionally the compression codec and cores) of every unfinished flow.
//
// Schedule is called by a driver (Sim, or a live system) from one goroutine
// at a time; it must not retain s or its slices after returning, and must
// not modify them. Flows of active coflows that get no Allocation are paused
// (rate 0). The returned slice is read before the next call, so a scheduler
// may reuse its backing array.
//
// An allocation must respect every port's Ingress/Egress capacity (sum of
// wire rates) and free cores (sum of SendCores at the source and RecvCores at
// the destination); the simulator rejects a decision that does not, with an
// error wrapping ErrBadAllocation.
type Scheduler interface {
	// Name is a short label for reports, e.g. "sebf".
	Name() string
	// Schedule returns the allocation that holds from now until the next
	// event (coflow arrival, flow completion, or a timer asked for through
	// Timer).
	Schedule(now time.Duration, s *State) []Allocation
}

// EventDriven is an optional capability. A scheduler that returns true is
// called only when a coflow arrives or completes, or its timer fires — not
// when a single flow completes (Varys' rule; flows that finish early leave
// their capacity idle until the next coflow event). Other schedulers are
// also called on every flow completion.
type EventDriven interface {
	OnlyOnArrivalsAndCompletions() bool
}

// Timer is an optional capability: after each Schedule call the driver asks
// for the next time the scheduler wants to be called even if nothing else
// happens (for example D-CLAS when a coflow will cross a queue threshold, or
// a starvation guard's period). ok = false means no timer. A time at or
// before now is ignored.
type Timer interface {
	NextWakeup(now time.Duration) (at time.Duration, ok bool)
}

// Raw is the Allocation.Codec value for an uncompressed flow.
const Raw = 0

// FlowRef names a flow: Coflow is the index of the coflow in the slice given
// to the driver (Sim.Run), not its ID; Flow is the index in Coflow.Flows.
type FlowRef struct {
	Coflow, Flow int
}

// Allocation is a scheduler's decision for one flow until the next event.
//
// For a raw flow (Codec == Raw) the flow disposes of Rate raw bytes/s and
// SendCores = RecvCores = 0. For a compressed flow with codec profile c
// (ratio ρ, per-core speeds s at the source and u at the destination),
// the raw disposal rate is, in pipelined mode,
//
//	D = min(SendCores·s, Rate/ρ, RecvCores·u)
//
// and in sequential mode D = 1 / (1/(SendCores·s) + ρ/Rate + 1/(RecvCores·u)).
// Rate is always on the wire and counts against port capacity.
type Allocation struct {
	Flow FlowRef
	// Rate is the wire rate in bytes/s, ≥ 0.
	Rate float64
	// Codec is Raw (0) or k ≥ 1 for Fabric.Codecs[k-1].
	Codec int
	// SendCores and RecvCores are the cores reserved for compression at the
	// source and decompression at the destination (0 for raw flows).
	SendCores, RecvCores float64
}

// State is the view a scheduler gets. All byte counts are raw bytes.
type State struct {
	// Now is the current time.
	Now time.Duration
	// Fabric is the network; schedulers must not modify it.
	Fabric *Fabric
	// Coflows are the active coflows (arrived, not finished) in arrival
	// order, ties broken by index.
	Coflows []CoflowState
}

// CoflowState is one active coflow.
type CoflowState struct {
	// Index is the coflow's index in the driver's input (FlowRef.Coflow).
	Index int
	// ID is Coflow.ID.
	ID      int
	Arrival time.Duration
	// Weight is the effective weight (never 0).
	Weight float64
	// Width is the number of flows of the coflow, finished or not.
	Width int
	// Bytes is the coflow's total raw bytes.
	Bytes float64
	// Sent is the raw bytes already disposed of (delivered or in the
	// compression pipeline); Bytes - Sent is what remains.
	Sent float64
	// WireSent is the bytes already put on the wire.
	WireSent float64
	// Flows are the unfinished flows, in Coflow.Flows order.
	Flows []FlowState
	// Send and Recv aggregate the remaining raw bytes of Flows per source
	// port (ingress side) and per destination port (egress side), in order
	// of first appearance. Entries whose Flows count is 0 are finished and
	// must be ignored. Drivers fill them; a hand-built State may leave both
	// nil and call (*State).ComputePortLoads.
	Send, Recv []PortLoad
}

// PortLoad is a coflow's remaining raw bytes at one port side.
type PortLoad struct {
	Port int
	// Bytes is the remaining raw bytes of the coflow's unfinished flows at
	// this port side; Flows counts those flows.
	Bytes float64
	Flows int
}

// ComputePortLoads recomputes Send and Recv from Flows.
func (c *CoflowState) ComputePortLoads() {
	c.Send, c.Recv = c.Send[:0], c.Recv[:0]
	idx := make(map[int]int)
	for i := range c.Flows {
		f := &c.Flows[i]
		k, ok := idx[f.Src]
		if !ok {
			k = len(c.Send)
			idx[f.Src] = k
			c.Send = append(c.Send, PortLoad{Port: f.Src})
		}
		c.Send[k].Bytes += f.Remaining
		c.Send[k].Flows++
	}
	clear(idx)
	for i := range c.Flows {
		f := &c.Flows[i]
		k, ok := idx[f.Dst]
		if !ok {
			k = len(c.Recv)
			idx[f.Dst] = k
			c.Recv = append(c.Recv, PortLoad{Port: f.Dst})
		}
		c.Recv[k].Bytes += f.Remaining
		c.Recv[k].Flows++
	}
}

// ComputePortLoads calls CoflowState.ComputePortLoads on every coflow.
func (s *State) ComputePortLoads() {
	for i := range s.Coflows {
		s.Coflows[i].ComputePortLoads()
	}
}

// Remaining returns Bytes - Sent.
func (c *CoflowState) Remaining() float64 { return c.Bytes - c.Sent }

// FlowState is one unfinished flow.
type FlowState struct {
	Ref      FlowRef
	Src, Dst int
	// Bytes is the raw size; Remaining the raw bytes not yet disposed of.
	Bytes, Remaining float64
	// Class is the flow's data class (Flow.Class; see Fabric.Profile).
	Class int
	// Rate and Codec are the wire rate and codec the flow is running with
	// (0 and Raw if paused). Its cores are in the allocation the scheduler
	// returned last.
	Rate  float64
	Codec int
}

// NumFlows returns the number of unfinished flows in s.
func (s *State) NumFlows() int {
	n := 0
	for i := range s.Coflows {
		n += len(s.Coflows[i].Flows)
	}
	return n
}
