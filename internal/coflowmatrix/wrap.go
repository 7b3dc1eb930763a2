package main

import (
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
)

// orderProbe runs FVDF and, on the same state, FVDF with compression off
// (SEBF's order), and counts how often their orders differ.
type orderProbe struct {
	*fvdf.Scheduler
	raw                       *fvdf.Scheduler
	calls, differ, headDiffer int
	pairs, discordant         float64
	rank                      []int
}

func (o *orderProbe) Schedule(now time.Duration, s *coflow.State) []coflow.Allocation {
	al := o.Scheduler.Schedule(now, s)
	a := append([]int(nil), o.Scheduler.Order()...)
	if len(a) < 2 {
		return al
	}
	o.raw.Schedule(now, s)
	b := o.raw.Order()
	if len(b) != len(a) {
		return al
	}
	o.calls++
	if len(o.rank) < len(s.Coflows) {
		o.rank = make([]int, len(s.Coflows))
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			same = false
		}
		o.rank[b[i]] = i
	}
	if !same {
		o.differ++
	}
	if a[0] != b[0] {
		o.headDiffer++
	}
	// Kendall distance between the two orders (O(n²), n is small per call;
	// capped at the first 200 coflows of FVDF's order).
	n := min(len(a), 200)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			o.pairs++
			if o.rank[a[i]] > o.rank[a[j]] {
				o.discordant++
			}
		}
	}
	return al
}
