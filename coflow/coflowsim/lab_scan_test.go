package coflowsim

import (
	"fmt"
	"github.com/falconml/falcon/coflow/coflowtest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file is a research harness (skipped unless its variables are set):
// it replays the fixtures with the production schedulers and lists where
// they diverge from the reference.
//
//	FALCON_LAB_SCAN=FIFO,SEBF  the six earliest finish mismatches per trace,
//	                           with how many coflows were active then
//	FALCON_LAB_SUMS=FIFO,SEBF  the coflows whose times match but whose
//	                           reducer sums do not (the earliest divergences)

// TestLabScan lists, per scheduler and trace, the earliest finish mismatches.
func TestLabScan(t *testing.T) {
	if labGetenv("FALCON_LAB_SCAN") == "" {
		t.Skip("set FALCON_LAB_SCAN=<schedulers>")
	}
	replayFixtures(t, labGetenv("FALCON_LAB_SCAN"), func(sc, tr string, res *Result, ref map[int]refLine) {
		type mm struct {
			id        int
			st, f, rf int64
			key       int64
		}
		var ms []mm
		for _, r := range res.Records {
			rr := ref[r.ID]
			if float64(r.FinishMs) != rr.finish {
				ms = append(ms, mm{r.ID, r.StartMs, r.FinishMs, int64(rr.finish), min(r.FinishMs, int64(rr.finish))})
			}
		}
		sort.Slice(ms, func(a, b int) bool { return ms[a].key < ms[b].key })
		s := ""
		for i, m := range ms {
			if i >= 6 {
				break
			}
			// count coflows active at m.key in the reference
			act := 0
			for _, r := range res.Records {
				rr := ref[r.ID]
				if rr.start <= float64(m.key) && rr.finish > float64(m.key) {
					act++
				}
			}
			s += fmt.Sprintf(" J%d(st %d us %d ref %d act %d)", m.id, m.st, m.f, m.rf, act)
		}
		t.Logf("%s %s %d mism:%s", sc, tr, len(ms), s)
	})
}

// TestLabSums lists the coflows whose start and finish match the reference
// but whose reducer sums do not.
func TestLabSums(t *testing.T) {
	if labGetenv("FALCON_LAB_SUMS") == "" {
		t.Skip("set FALCON_LAB_SUMS=<schedulers>")
	}
	replayFixtures(t, labGetenv("FALCON_LAB_SUMS"), func(sc, tr string, res *Result, ref map[int]refLine) {
		s := ""
		n := 0
		for _, r := range res.Records {
			rr := ref[r.ID]
			if float64(r.FinishMs) == rr.finish && float64(r.IndividualSumsMs) != rr.sums {
				n++
				if n <= 8 {
					s += fmt.Sprintf(" J%d(%d-%d m%d r%d sums %d ref %v)", r.ID, r.StartMs, r.FinishMs, r.NumMappers, r.NumReducers, r.IndividualSumsMs, rr.sums)
				}
			}
		}
		t.Logf("%s %s %d:%s", sc, tr, n, s)
	})
}

// replayFixtures replays both fixture traces under each scheduler of the
// comma list schedulers and hands the result and the reference to f.
func replayFixtures(t *testing.T, schedulers string, f func(sc, tr string, res *Result, ref map[int]refLine)) {
	dir := coflowtest.SharedDir(t, "coflowsim-fixtures")
	for _, sc := range strings.Split(schedulers, ",") {
		for _, tr := range []string{"synth-a", "synth-b"} {
			trc := coflowtest.ReadTraceFile(t, filepath.Join(dir, tr+".txt"))
			ref := readRef(t, filepath.Join(dir, tr+"."+sc+".out"))
			res, err := Run(trc, sc, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			f(sc, tr, res, ref)
		}
	}
}

// TestLabWindow lists, for FALCON_LAB_WIN=<sched>:<trace>:<from>:<to>, the
// coflows whose finish (ours or the reference's) falls in [from, to] ms.
func TestLabWindow(t *testing.T) {
	w := strings.Split(labGetenv("FALCON_LAB_WIN"), ":")
	if len(w) != 4 {
		t.Skip("set FALCON_LAB_WIN=<sched>:<trace>:<from>:<to>")
	}
	from, _ := strconv.ParseInt(w[2], 10, 64)
	to, _ := strconv.ParseInt(w[3], 10, 64)
	replayFixtures(t, w[0], func(sc, tr string, res *Result, ref map[int]refLine) {
		if tr != w[1] {
			return
		}
		for _, r := range res.Records {
			rr := ref[r.ID]
			if (r.FinishMs >= from && r.FinishMs <= to) || (rr.finish >= float64(from) && rr.finish <= float64(to)) {
				t.Logf("JOB-%d start %d finish %d (ref %v) sums %d (ref %v)", r.ID, r.StartMs, r.FinishMs, rr.finish, r.IndividualSumsMs, rr.sums)
			}
		}
	})
}
