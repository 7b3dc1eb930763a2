package fvdf

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
)

// BenchmarkReplay replays synthetic FB-like traces under FVDF and SEBF.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{50, 200} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, 50
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(1, 0)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"fvdf", "sebf"} {
			b.Run(fmt.Sprintf("coflows=%d/%s", n, name), func(b *testing.B) {
				for range b.N {
					if _, err := Run(name, cfs, tr.Ports, ReplayConfig{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSchedule measures one FVDF decision on a state with all coflows
// of a synthetic trace active at once.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		cfg := coflow.DefaultSynthConfig()
		cfg.Coflows, cfg.Ports = n, 150
		tr, err := coflow.Synthetic(cfg, rand.New(rand.NewPCG(2, 0)))
		if err != nil {
			b.Fatal(err)
		}
		cfs, err := tr.ToCoflows()
		if err != nil {
			b.Fatal(err)
		}
		fab := tr.Fabric(coflow.GigabitBytesPerSec).SetCores(4)
		fab.Codecs = []coflow.CodecProfile{{Name: "lz4", CompressSpeed: 600e6, DecompressSpeed: 4.9e9, Ratio: 0.36}}
		st := &coflow.State{Fabric: fab}
		flows := 0
		for i, c := range cfs {
			cs := coflow.CoflowState{Index: i, ID: c.ID, Arrival: c.Arrival, Weight: 1, Width: len(c.Flows), Bytes: c.TotalBytes()}
			for j, f := range c.Flows {
				cs.Flows = append(cs.Flows, coflow.FlowState{Ref: coflow.FlowRef{Coflow: i, Flow: j}, Src: f.Src, Dst: f.Dst, Bytes: f.Bytes, Remaining: f.Bytes})
			}
			flows += len(c.Flows)
			st.Coflows = append(st.Coflows, cs)
		}
		s, err := New(Config{StarvationPeriod: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("coflows=%d/flows=%d", n, flows), func(b *testing.B) {
			for range b.N {
				s.Schedule(time.Second, st)
			}
		})
	}
}
