package coflow

import (
	"fmt"
	"math"
)

// Port capacities used by the presets, in bytes per second.
const (
	// GigabitBytesPerSec is 1 Gbit/s (10^9 bit/s) in bytes per second.
	GigabitBytesPerSec = 125e6
	// CoflowsimBytesPerSec is coflowsim's per-port rate, 1024·1048576 bit/s
	// (its RACK_BITS_PER_SEC), i.e. 128 MiB/s. Varys' default
	// nicMbps = 1024 gives the same figure.
	CoflowsimBytesPerSec = 1024 * 1048576 / 8.0
)

// MiB is 2^20 bytes, the unit of the coflow-benchmark trace's "MB".
const MiB = 1 << 20

// CodecProfile describes one compression codec as the simulator models it.
// Speeds are per core; a flow that reserves k cores for a codec runs it at k
// times the speed.
type CodecProfile struct {
	// Name is a label, e.g. "lz4".
	Name string
	// CompressSpeed is the raw bytes per second one core compresses.
	CompressSpeed float64
	// DecompressSpeed is the raw bytes per second one core restores.
	DecompressSpeed float64
	// Ratio is compressed size / raw size, 0 < Ratio ≤ 1.
	Ratio float64
}

// Validate checks that speeds are positive and finite and 0 < Ratio ≤ 1.
func (c CodecProfile) Validate() error {
	if !(c.CompressSpeed > 0) || math.IsInf(c.CompressSpeed, 0) {
		return fmt.Errorf("%w: codec %q: compress speed %v must be positive and finite", ErrInvalidFabric, c.Name, c.CompressSpeed)
	}
	if !(c.DecompressSpeed > 0) || math.IsInf(c.DecompressSpeed, 0) {
		return fmt.Errorf("%w: codec %q: decompress speed %v must be positive and finite", ErrInvalidFabric, c.Name, c.DecompressSpeed)
	}
	if !(c.Ratio > 0 && c.Ratio <= 1) {
		return fmt.Errorf("%w: codec %q: ratio %v must be in (0, 1]", ErrInvalidFabric, c.Name, c.Ratio)
	}
	return nil
}

// Port is one machine (or rack) on the big switch.
//
// Direction follows Varys: Ingress is the link from the machine into the
// switch, used by flows whose Src is this port (Varys' P^in); Egress is the
// link from the switch to the machine, used by flows whose Dst is this port
// (Varys' P^out).
type Port struct {
	// Ingress is the send capacity in bytes/s (flows with Src == this port).
	Ingress float64
	// Egress is the receive capacity in bytes/s (flows with Dst == this port).
	Egress float64
	// Cores is the number of CPU cores usable for compression and
	// decompression on this machine. Zero means no CPU for codecs: flows
	// from or to this port can only be sent raw.
	Cores float64
	// Background is the number of cores busy with other work; schedulers may
	// use at most Cores - Background. Zero means an idle machine.
	Background float64
	// SpeedFactor scales every codec's per-core speeds on this machine
	// (heterogeneous CPUs). Zero means 1.
	SpeedFactor float64
}

// FreeCores returns Cores - Background, at least 0.
func (p Port) FreeCores() float64 { return math.Max(0, p.Cores-p.Background) }

func (p Port) speedFactor() float64 {
	if p.SpeedFactor == 0 {
		return 1
	}
	return p.SpeedFactor
}

// DataClass is one kind of payload (text, serialized rows, float32
// tensors, ...) with its own profile for every fabric codec: Codecs[k-1] is
// how codec k compresses this class (ratio, per-core speeds).
type DataClass struct {
	Name   string
	Codecs []CodecProfile
}

// Fabric is a non-blocking big switch: congestion happens only at the ports'
// ingress and egress links (the Varys/Aalo/Sincronia model). All ports share
// one list of codecs; a port's SpeedFactor scales their speeds there.
type Fabric struct {
	Ports []Port
	// Codecs lists the codecs a flow may use. Allocation.Codec k ≥ 1 selects
	// Codecs[k-1]; 0 means raw. Nil means compression is not modelled.
	// Without Classes these are the profiles of every flow; with Classes
	// they are the reference profiles (names, and the base that time-varying
	// codec speeds, such as Config.CodecSpeed, are relative to).
	Codecs []CodecProfile
	// Classes, if not empty, gives per-class codec profiles: a flow of
	// class c compressed with codec k behaves as Classes[c].Codecs[k-1]
	// (see Profile). Each class lists exactly len(Codecs) profiles. Empty
	// means one class (0) whose profiles are Codecs.
	Classes []DataClass
}

// NumClasses returns max(1, len(f.Classes)).
func (f *Fabric) NumClasses() int { return max(1, len(f.Classes)) }

// Profile returns the profile of codec k (k ≥ 1) on data of class c: the
// class's own entry, or Codecs[k-1] when the fabric has no classes.
func (f *Fabric) Profile(c, k int) CodecProfile {
	if len(f.Classes) == 0 {
		return f.Codecs[k-1]
	}
	return f.Classes[c].Codecs[k-1]
}

// ClassFactors returns how class c's codec k differs from the reference
// Codecs[k-1]: the ratios Profile(c,k)/Codecs[k-1] of compression speed,
// decompression speed and compression ratio. They are exactly 1 when the
// fabric has no classes or the class's profile equals the reference, so a
// time-varying reference speed v becomes v·factor for the class, bit for
// bit v when the class is the reference.
func (f *Fabric) ClassFactors(c, k int) (compress, decompress, ratio float64) {
	if len(f.Classes) == 0 {
		return 1, 1, 1
	}
	r, p := f.Codecs[k-1], f.Classes[c].Codecs[k-1]
	return p.CompressSpeed / r.CompressSpeed, p.DecompressSpeed / r.DecompressSpeed, p.Ratio / r.Ratio
}

// NewFabric returns n identical ports of capacity bytesPerSec each way, with
// no cores and no codecs.
func NewFabric(n int, bytesPerSec float64) *Fabric {
	f := &Fabric{Ports: make([]Port, n)}
	for i := range f.Ports {
		f.Ports[i] = Port{Ingress: bytesPerSec, Egress: bytesPerSec}
	}
	return f
}

// SetCores sets Cores on every port and returns f.
func (f *Fabric) SetCores(cores float64) *Fabric {
	for i := range f.Ports {
		f.Ports[i].Cores = cores
	}
	return f
}

// NumPorts returns len(f.Ports).
func (f *Fabric) NumPorts() int { return len(f.Ports) }

// Codec returns the profile for allocation codec k (k ≥ 1).
func (f *Fabric) Codec(k int) CodecProfile { return f.Codecs[k-1] }

// CompressSpeed returns the per-core compression speed of reference codec k
// (k ≥ 1, Codecs[k-1]) at port p, including the port's SpeedFactor.
func (f *Fabric) CompressSpeed(p, k int) float64 {
	return f.Codecs[k-1].CompressSpeed * f.Ports[p].speedFactor()
}

// DecompressSpeed returns the per-core decompression speed of reference
// codec k (k ≥ 1) at port p, including the port's SpeedFactor.
func (f *Fabric) DecompressSpeed(p, k int) float64 {
	return f.Codecs[k-1].DecompressSpeed * f.Ports[p].speedFactor()
}

// ClassSpeeds returns the per-core compression speed at port src and
// decompression speed at port dst of codec k on data of class c, with the
// ports' SpeedFactors.
func (f *Fabric) ClassSpeeds(src, dst, c, k int) (compress, decompress float64) {
	p := f.Profile(c, k)
	return p.CompressSpeed * f.Ports[src].speedFactor(), p.DecompressSpeed * f.Ports[dst].speedFactor()
}

// Validate checks that there is at least one port, capacities are positive
// and finite, cores and background are non-negative and codecs are valid.
func (f *Fabric) Validate() error {
	if f == nil || len(f.Ports) == 0 {
		return fmt.Errorf("%w: no ports", ErrInvalidFabric)
	}
	for i, p := range f.Ports {
		if !(p.Ingress > 0) || math.IsInf(p.Ingress, 0) || !(p.Egress > 0) || math.IsInf(p.Egress, 0) {
			return fmt.Errorf("%w: port %d: capacities ingress=%v egress=%v must be positive and finite", ErrInvalidFabric, i, p.Ingress, p.Egress)
		}
		if !(p.Cores >= 0) || math.IsInf(p.Cores, 0) || !(p.Background >= 0) || math.IsInf(p.Background, 0) {
			return fmt.Errorf("%w: port %d: cores=%v background=%v must be non-negative and finite", ErrInvalidFabric, i, p.Cores, p.Background)
		}
		if !(p.SpeedFactor >= 0) || math.IsInf(p.SpeedFactor, 0) {
			return fmt.Errorf("%w: port %d: speed factor %v must be non-negative and finite", ErrInvalidFabric, i, p.SpeedFactor)
		}
	}
	for _, c := range f.Codecs {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	for i, dc := range f.Classes {
		if len(dc.Codecs) != len(f.Codecs) {
			return fmt.Errorf("%w: class %d (%q) has %d codec profiles, fabric has %d codecs", ErrInvalidFabric, i, dc.Name, len(dc.Codecs), len(f.Codecs))
		}
		for _, c := range dc.Codecs {
			if err := c.Validate(); err != nil {
				return fmt.Errorf("class %d (%q): %w", i, dc.Name, err)
			}
		}
	}
	return nil
}
