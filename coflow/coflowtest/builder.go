package coflowtest

import (
	"time"

	"github.com/falconml/falcon/coflow"
)

// FlowSpec describes one flow for Builder: Remaining zero means Bytes
// (nothing sent yet).
type FlowSpec struct {
	Src, Dst         int
	Bytes, Remaining float64
}

// F is shorthand for a fresh flow of bytes from src to dst.
func F(src, dst int, bytes float64) FlowSpec { return FlowSpec{Src: src, Dst: dst, Bytes: bytes} }

// Builder assembles a coflow.State by hand, for unit tests of schedulers.
// Coflows get indices 0, 1, ... in the order they are added.
type Builder struct {
	st coflow.State
}

// NewState starts a state on fabric at time 0.
func NewState(fabric *coflow.Fabric) *Builder {
	return &Builder{st: coflow.State{Fabric: fabric}}
}

// At sets the state's current time.
func (b *Builder) At(now time.Duration) *Builder {
	b.st.Now = now
	return b
}

// Coflow adds an active coflow with weight 1.
func (b *Builder) Coflow(id int, arrival time.Duration, flows ...FlowSpec) *Builder {
	return b.WeightedCoflow(id, arrival, 1, flows...)
}

// WeightedCoflow adds an active coflow with the given weight.
func (b *Builder) WeightedCoflow(id int, arrival time.Duration, weight float64, flows ...FlowSpec) *Builder {
	idx := len(b.st.Coflows)
	c := coflow.CoflowState{Index: idx, ID: id, Arrival: arrival, Weight: weight, Width: len(flows)}
	for j, f := range flows {
		rem := f.Remaining
		if rem == 0 {
			rem = f.Bytes
		}
		c.Bytes += f.Bytes
		c.Sent += f.Bytes - rem
		c.Flows = append(c.Flows, coflow.FlowState{
			Ref: coflow.FlowRef{Coflow: idx, Flow: j}, Src: f.Src, Dst: f.Dst, Bytes: f.Bytes, Remaining: rem,
		})
	}
	c.WireSent = c.Sent
	b.st.Coflows = append(b.st.Coflows, c)
	return b
}

// State returns the assembled state with per-port loads computed. Each
// call returns an independent deep copy.
func (b *Builder) State() *coflow.State {
	st := b.st
	st.Coflows = append([]coflow.CoflowState(nil), b.st.Coflows...)
	for i := range st.Coflows {
		st.Coflows[i].Flows = append([]coflow.FlowState(nil), st.Coflows[i].Flows...)
		st.Coflows[i].Send, st.Coflows[i].Recv = nil, nil
	}
	st.ComputePortLoads()
	return &st
}
