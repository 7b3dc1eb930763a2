package coflow

import (
	"fmt"
	"math"
	"time"
)

// Flow is one point-to-point transfer of a coflow through the big switch.
type Flow struct {
	// ID labels the flow inside its coflow (trace conversion numbers flows
	// 0, 1, ... in reducer-major order).
	ID int
	// Src and Dst are port indices in [0, Fabric.NumPorts()). Src may equal
	// Dst (a mapper and a reducer on the same rack in a trace); such a flow
	// still uses the port's ingress and egress, as in coflowsim.
	Src, Dst int
	// Bytes is the raw (uncompressed) volume, > 0.
	Bytes float64
	// Class is the flow's data class, an index into Fabric.Classes: how well
	// and how fast its bytes compress (Fabric.Profile). Zero is the default
	// class; with no Fabric.Classes every flow must be of class 0 and uses
	// Fabric.Codecs. AssignClasses sets it per coflow from a distribution.
	Class int
}

// Coflow is a set of flows that completes when its last flow completes.
// Its completion time (CCT) is the last flow's finish time minus Arrival.
type Coflow struct {
	ID int
	// Arrival is the release time, measured from the start of the trace.
	Arrival time.Duration
	Flows   []Flow
	// Weight is the importance used by weighted schedulers (Sincronia).
	// Zero means 1.
	Weight float64
	// Mappers and Reducers are the port lists the coflow came from when it
	// was read from a trace (nil otherwise); reducer r's MiB is in
	// ReducerMB[r]. They are informational: the flows are authoritative.
	Mappers   []int
	Reducers  []int
	ReducerMB []float64
	// Parent, if > 0, makes the coflow a later stage of a multi-stage job:
	// it is released when the coflow at index Parent-1 of the slice given
	// to Sim.Run completes (the parent must come earlier in the slice),
	// after
	//
	//	ReleaseDelay + ReleasePerWireByte · (the parent's wire bytes)
	//
	// (the stage between the two shuffles: compute, plus reading the
	// parent's shuffle output as it was written). Arrival is then ignored on
	// input and the result reports the release time as the arrival.
	Parent int
	// ReleaseDelay is the fixed part of the gap after the parent (≥ 0).
	ReleaseDelay time.Duration
	// ReleasePerWireByte is the gap's seconds per byte the parent put on
	// the wire (≥ 0).
	ReleasePerWireByte float64
}

// EffectiveWeight returns Weight, or 1 when Weight is zero.
func (c *Coflow) EffectiveWeight() float64 {
	if c.Weight == 0 {
		return 1
	}
	return c.Weight
}

// TotalBytes returns the sum of the flows' raw bytes.
func (c *Coflow) TotalBytes() float64 {
	var s float64
	for _, f := range c.Flows {
		s += f.Bytes
	}
	return s
}

// MaxFlowBytes returns the largest flow's raw bytes (Varys' "length").
func (c *Coflow) MaxFlowBytes() float64 {
	var m float64
	for _, f := range c.Flows {
		m = math.Max(m, f.Bytes)
	}
	return m
}

// Width returns the number of flows.
func (c *Coflow) Width() int { return len(c.Flows) }

// Validate checks the coflow against a fabric of n ports: at least one flow,
// ports in range, positive finite bytes, non-negative arrival and weight.
func (c *Coflow) Validate(n int) error {
	if len(c.Flows) == 0 {
		return fmt.Errorf("%w: coflow %d has no flows", ErrInvalidCoflow, c.ID)
	}
	if c.Arrival < 0 {
		return fmt.Errorf("%w: coflow %d: negative arrival %v", ErrInvalidCoflow, c.ID, c.Arrival)
	}
	if c.Parent < 0 || c.ReleaseDelay < 0 || !(c.ReleasePerWireByte >= 0) || math.IsInf(c.ReleasePerWireByte, 0) {
		return fmt.Errorf("%w: coflow %d: parent %d, release delay %v and per-byte gap %v must be non-negative and finite", ErrInvalidCoflow, c.ID, c.Parent, c.ReleaseDelay, c.ReleasePerWireByte)
	}
	if !(c.Weight >= 0) || math.IsInf(c.Weight, 0) {
		return fmt.Errorf("%w: coflow %d: weight %v must be non-negative and finite", ErrInvalidCoflow, c.ID, c.Weight)
	}
	for i, f := range c.Flows {
		if f.Src < 0 || f.Src >= n || f.Dst < 0 || f.Dst >= n {
			return fmt.Errorf("%w: coflow %d flow %d: ports %d->%d outside [0,%d)", ErrInvalidCoflow, c.ID, i, f.Src, f.Dst, n)
		}
		if !(f.Bytes > 0) || math.IsInf(f.Bytes, 0) {
			return fmt.Errorf("%w: coflow %d flow %d: bytes %v must be positive and finite", ErrInvalidCoflow, c.ID, i, f.Bytes)
		}
		if f.Class < 0 {
			return fmt.Errorf("%w: coflow %d flow %d: negative class %d", ErrInvalidCoflow, c.ID, i, f.Class)
		}
	}
	return nil
}

// Job is a MapReduce-style job around a coflow: a map stage that ends when
// the coflow arrives, the shuffle (the coflow) and a reduce stage that starts
// when the coflow completes. Its completion time is
//
//	JCT = MapDuration + CCT + ReduceDuration
//
// This stage model is ours (Swallow reports JCT but its job model is not
// public); it makes JCT a monotone function of CCT with fixed compute stages.
type Job struct {
	Coflow         Coflow
	MapDuration    time.Duration
	ReduceDuration time.Duration
}
