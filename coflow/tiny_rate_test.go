package coflow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// tinyCompressed gives its one flow a valid but vanishing compressed
// allocation (rate and cores far below any real value, still positive).
type tinyCompressed struct{ every bool }

func (tinyCompressed) Name() string                         { return "tiny" }
func (t tinyCompressed) OnlyOnArrivalsAndCompletions() bool { return !t.every }
func (tinyCompressed) Schedule(_ time.Duration, s *coflow.State) []coflow.Allocation {
	var out []coflow.Allocation
	for _, c := range s.Coflows {
		for _, f := range c.Flows {
			out = append(out, coflow.Allocation{Flow: f.Ref, Rate: 3e-306, Codec: 1, SendCores: 1e-314, RecvCores: 2e-315})
		}
	}
	return out
}

// TestSim_VanishingCompressedRate: a compressed flow whose stage rates
// underflow (its pipeline fill would take forever) ends the run with
// ErrStalled, under either calling rule; it used to make the event time
// NaN and the run loop spin forever.
func TestSim_VanishingCompressedRate(t *testing.T) {
	fab := coflow.NewFabric(2, 1e9).SetCores(4)
	fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 6e8, DecompressSpeed: 4e9, Ratio: 0.4}}
	cfs := []coflow.Coflow{{ID: 1, Flows: []coflow.Flow{{Src: 0, Dst: 1, Bytes: 1e7}}}}
	for _, every := range []bool{false, true} {
		sim, err := coflow.NewSim(coflow.DefaultConfig(), fab, tinyCompressed{every})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Run(cfs); !errors.Is(err, coflow.ErrStalled) {
			t.Fatalf("every %v: Run = %v, want ErrStalled", every, err)
		}
	}
}
