package fvdf_test

import (
	"fmt"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

// Two coflows share a receiver on a 1 Gbit/s fabric whose machines have 2
// cores and an lz4-like codec (ratio 0.36). FVDF compresses and finishes
// both sooner than SEBF, with fewer bytes on the wire. (Its first 200 ms
// are the starvation guard's fair slice, when flows go raw.)
func Example() {
	fab := coflow.NewFabric(3, coflow.GigabitBytesPerSec).SetCores(2)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}}
	cfs := []coflow.Coflow{
		{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 2, Bytes: 500e6}}},
		{ID: 2, Flows: []coflow.Flow{{Src: 1, Dst: 2, Bytes: 250e6}}},
	}
	sebf, _ := coflow.NewSEBF(coflow.DefaultOrderedConfig())
	fv, _ := fvdf.New(fvdf.DefaultConfig(), nil)
	for _, s := range []coflow.Scheduler{sebf, fv} {
		sim, _ := coflow.NewSim(coflow.Config{Pipelining: true}, fab, s)
		res, _ := sim.Run(cfs)
		fmt.Printf("%s: CCT %v and %v, wire %.0f MB\n", s.Name(), res.Coflows[0].CCT, res.Coflows[1].CCT, res.WireBytes/1e6)
	}
	// Output:
	// sebf: CCT 6s and 2s, wire 750 MB
	// fvdf: CCT 2.288s and 884ms, wire 286 MB
}

// The live policy compresses text on a 1 Gbit/s link but not random bytes,
// and never on a 100 Gbit/s link where one core cannot keep up.
func ExamplePolicy() {
	msg := make([]byte, 1<<20)
	for _, tc := range []struct {
		bw  float64
		mix codecprof.Mix
	}{
		{125e6, codecprof.Only(codecprof.Text)},
		{125e6, codecprof.Only(codecprof.Random)},
		{12.5e9, codecprof.Only(codecprof.Text)},
	} {
		p, _ := fvdf.NewPolicy(fvdf.PolicyConfig{Bandwidth: tc.bw, Mix: tc.mix})
		fmt.Println(tc.mix, tc.bw/125e6, "Gbit/s:", p.Choose("server-0", msg))
	}
	_ = transport.CodecNone
	// Output:
	// text=1 1 Gbit/s: snappy
	// random=1 1 Gbit/s: none
	// text=1 100 Gbit/s: none
}
