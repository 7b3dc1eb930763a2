package coflowsim

import (
	"math"

	"github.com/falconml/falcon/coflow"
)

// labJobInfo is what the research harnesses know about a job beyond what
// the replay needs: the trace's reducer sizes before coflowsim's rounding
// and the deadline before rounding.
type labJobInfo struct {
	rawRed      []float64 // each reducer's bytes before rounding
	rawMax      float64   // largest reducer before rounding
	deadlineRaw float64   // ms, before rounding
}

// Side tables of the harnesses, filled by labBuildJobs (tests do not run in
// parallel).
var (
	labInfo   = map[*job]*labJobInfo{}
	labMapper = map[*flow]int{} // index of the flow's mapper within its job
)

func lab(j *job) *labJobInfo { return labInfo[j] }

// labBuildJobs is buildJobs that also records labInfo and labMapper. It
// recomputes them from the trace: buildJobs lays each job's flows out
// reducer-major with the mappers in trace order, and draws one deadline
// factor per coflow in trace order.
func labBuildJobs(tr *coflow.Trace, cfg Config, withRandom bool) []*job {
	jobs := buildJobs(tr, cfg, withRandom)
	rng := newJavaRand(cfg.Seed)
	for i, j := range jobs {
		c := &tr.Coflows[i]
		info := &labJobInfo{}
		for _, r := range c.Reducers {
			info.rawRed = append(info.rawRed, r.MB*mib)
			info.rawMax = math.Max(info.rawMax, r.MB*mib)
		}
		d := j.alpha / (cfg.PortBps / 8) * 1000
		if u := rng.nextDouble(); withRandom {
			d *= 1 + u
		}
		info.deadlineRaw = d
		labInfo[j] = info
		for k, f := range j.flows {
			labMapper[f] = k % len(c.Mappers)
		}
	}
	return jobs
}
