package coflowsim

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// labDeltas are single rule changes on top of sd-csu (the rules sched.go
// uses), for TestLabPairs.
var labDeltas = map[string]func(*hyp){
	"none":         func(*hyp) {},
	"rawAlphaR":    func(h *hyp) { h.rawAlphaR = "keep" },
	"rawAlphaRc":   func(h *hyp) { h.rawAlphaR = "clip" },
	"csSeqFree":    func(h *hyp) { h.csSeqFree = true },
	"inline":       func(h *hyp) { h.inline = true },
	"rawAlpha":     func(h *hyp) { h.rawAlpha = true },
	"rawDone":      func(h *hyp) { h.rawDone = true },
	"localFree":    func(h *hyp) { h.localFree = true },
	"lossEdge":     func(h *hyp) { h.lossAhead = "edge" },
	"edgeLoss":     func(h *hyp) { h.edgeLoss = true },
	"edgeLossOld":  func(h *hyp) { h.edgeLossOld = true },
	"remCum":       func(h *hyp) { h.remCum = true },
	"done0":        func(h *hyp) { h.doneThr = 1e-300 },
	"alphaQ":       func(h *hyp) { h.alphaRound = "q" },
	"alphaQF":      func(h *hyp) { h.alphaRound = "qf" },
	"csHalfS":      func(h *hyp) { h.csHalfS = true },
	"csHalfR":      func(h *hyp) { h.csHalfR = true },
	"csHalf":       func(h *hyp) { h.csHalf = true },
	"thr-7":        func(h *hyp) { h.fullThr = 1e-7 },
	"thr-6":        func(h *hyp) { h.fullThr = 1e-6 },
	"thr0":         func(h *hyp) { h.fullThr = -1 },
	"capQuantum":   func(h *hyp) { h.capQuantum = true },
	"csJob":        func(h *hyp) { h.csJob = true },
	"csWeightRem":  func(h *hyp) { h.csWeight = "rem" },
	"bfMadd":       func(h *hyp) { h.bfMode = "madd" },
	"csFullPrio":   func(h *hyp) { h.csFull = "prio" },
	"csOwnS":       func(h *hyp) { h.csOwn = "S" },
	"csOwnSR":      func(h *hyp) { h.csOwn = "SR" },
	"csCountAny":   func(h *hyp) { h.csCountAll = "any" },
	"csVisit":      func(h *hyp) { h.csVisit = true },
	"csThrSideS":   func(h *hyp) { h.csThrSide = "S" },
	"csThr0":       func(h *hyp) { h.csThr = -1 },
	"maddB":        func(h *hyp) { h.madd = "b" },
	"maddD":        func(h *hyp) { h.madd = "d" },
	"allPort":      func(h *hyp) { h.allPort = true },
	"noCap":        func(h *hyp) { h.noCap = true },
	"jobFree":      func(h *hyp) { h.jobFree = true },
	"csLocal2SR":   func(h *hyp) { h.csLocal2 = "SR" },
	"csStale":      func(h *hyp) { h.csStale = true },
	"csMaddDone":   func(h *hyp) { h.csMaddX = "done" },
	"csMaddBlk":    func(h *hyp) { h.csMaddX = "blk" },
	"csMaxN":       func(h *hyp) { h.csMaxN = true },
	"bfHashSD":     func(h *hyp) { h.bfFlowOrder = "hashsd" },
	"bfHashDS":     func(h *hyp) { h.bfFlowOrder = "hashds" },
	"bfHashS":      func(h *hyp) { h.bfFlowOrder = "hashS" },
	"bfHashR":      func(h *hyp) { h.bfFlowOrder = "hashR" },
	"keepAll":      func(h *hyp) { h.keepAhead = "all" },
	"keepRest":     func(h *hyp) { h.keepAhead = "rest" },
	"skipRecv":     func(h *hyp) { h.skipMode = "recv" },
	"skipSend":     func(h *hyp) { h.skipMode = "send" },
	"csCoflowFair": func(h *hyp) { h.csJob = true; h.csCoflowFair = true },
	"handOn":       func(h *hyp) { h.skip = "handOn" },
	"handOnT":      func(h *hyp) { h.skip = "handOn"; h.handOnTrace = true },
	"handOnE":      func(h *hyp) { h.skip = "handOn"; h.skipOrder = "edf" },
	"sendShare":    func(h *hyp) { h.skip = "sendShare" },
	"recvShare":    func(h *hyp) { h.skip = "recvShare" },
	"csRound2S":    func(h *hyp) { h.csRound2 = "S" },
	"csRound2R":    func(h *hyp) { h.csRound2 = "R" },
	"bfRate":       func(h *hyp) { h.bfFlowOrder = "rate" },
	"bfRateDesc":   func(h *hyp) { h.bfFlowOrder = "rateDesc" },
	"csThrSideR":   func(h *hyp) { h.csThrSide = "R" },
	"csHalfRDep":   func(h *hyp) { h.csHalfRDep = true },
	"bfJobSk":      func(h *hyp) { h.skip = "none"; h.bfMode = "jobSk" },
	"bfJobSkG":     func(h *hyp) { h.skip = "none"; h.bfMode = "jobSk"; h.bfTwice = true },
	"bfDstSrc":     func(h *hyp) { h.bfFlowOrder = "dstsrc" },
	"bfTrace":      func(h *hyp) { h.bfFlowOrder = "" },
	"bfRev":        func(h *hyp) { h.bfFlowOrder = "rev" },
	"bfSmall":      func(h *hyp) { h.bfFlowOrder = "small" },
	"bfFirst":      func(h *hyp) { h.order = "bfFirst" },
	"bfSkipOnly":   func(h *hyp) { h.order = "bfSkippedOnly" },
	"redAtEvent":   func(h *hyp) { h.redAtEvent = true },
	"bfDone":       func(h *hyp) { h.bfDone = true },
	"bfPrio":       func(h *hyp) { h.bfOrder = true },
	"alphaDone":    func(h *hyp) { h.alphaDone = true },
	"csSendJob":    func(h *hyp) { h.csSendJob = true },
	"csThenMM":     func(h *hyp) { h.csThenMaxMin = true },
	"tieFirst":     func(h *hyp) { h.tieFirst = true },
	"epochAlloc":   func(h *hyp) { h.epochAlloc = true },
	"resortAdmit":  func(h *hyp) { h.resort = "admit" },
	"insBack":      func(h *hyp) { h.insBack = true },
	"edfExact":     func(h *hyp) { h.edfRaw = "exact" },
	"midQPrio":     func(h *hyp) { h.midQuantum = "prio" },
	"redEvent":     func(h *hyp) { h.redEvent = true },
	"flowEvent":    func(h *hyp) { h.flowEvent = true },
	"skipTasks":    func(h *hyp) { h.skipMode = "tasks" },
	"noReset":      func(h *hyp) { h.noReset = true },
	"skipMaxMin":   func(h *hyp) { h.skip = "maxmin" },
	"skipFus":      func(h *hyp) { h.skip = "fixuSeq" },
	"skipFusEdf":   func(h *hyp) { h.skip = "fixuSeq"; h.skipOrder = "edf" },
	"skipMaddOpen": func(h *hyp) { h.skip = "maddOpen" },
	"skipNone":     func(h *hyp) { h.skip = "none" },
	"csRecvRed":    func(h *hyp) { h.csRecv = "red" },
	"csAllFlows":   func(h *hyp) { h.csUnblocked = false },
}

// TestLabPairs scores every single delta and every pair of deltas on top
// of sd-csu over the ten ordering-scheduler fixture runs (FIFO, SCF, NCF,
// LCF, SEBF on synth-a and synth-b), to look for rules that only work
// together, as DARK's three did (see RESEARCH.md). It is skipped unless
// FALCON_LAB_PAIRS=<shard>/<shards> is set (run shards as separate
// processes; about 5 s per combination). FALCON_LAB_ONLY=a,b,... limits
// the deltas, FALCON_LAB_SINGLES=1 skips the pairs, FALCON_LAB_TRIPLES=1
// scores every triple instead, FALCON_LAB_BASE=a,b
// applies deltas to every combination first. Each combination
// prints "PAIR <total> <delta1+delta2> <ten counts>":
//
//	FALCON_LAB_PAIRS=0/1 FALCON_LAB_SINGLES=1 \
//	    go test ./coflow/coflowsim/ -run TestLabPairs -v | grep PAIR
func TestLabPairs(t *testing.T) {
	spec := labGetenv("FALCON_LAB_PAIRS")
	if spec == "" {
		t.Skip("research harness; set FALCON_LAB_PAIRS=<shard>/<shards>")
	}
	parts := strings.Split(spec, "/")
	shard, _ := strconv.Atoi(parts[0])
	shards, _ := strconv.Atoi(parts[1])
	var names []string
	for n := range labDeltas {
		names = append(names, n)
	}
	sort.Strings(names)
	if only := labGetenv("FALCON_LAB_ONLY"); only != "" {
		names = strings.Split(only, ",")
	}
	var combos [][]string
	for i := range names {
		combos = append(combos, []string{names[i]})
	}
	if labGetenv("FALCON_LAB_TRIPLES") != "" {
		combos = nil
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				for k := j + 1; k < len(names); k++ {
					combos = append(combos, []string{names[i], names[j], names[k]})
				}
			}
		}
	} else if labGetenv("FALCON_LAB_SINGLES") == "" {
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				combos = append(combos, []string{names[i], names[j]})
			}
		}
	}
	for k, c := range combos {
		if k%shards != shard {
			continue
		}
		h := hyp{skip: "cs", csRecv: "port", csUnblocked: true, bfFlowOrder: "srcdst"}
		if base := labGetenv("FALCON_LAB_BASE"); base != "" {
			for _, n := range strings.Split(base, ",") {
				labDeltas[n](&h)
			}
		}
		for _, n := range c {
			labDeltas[n](&h)
		}
		total, prefix := 0, 0
		var counts []string
		for _, sc := range []string{"FIFO", "SCF", "NCF", "LCF", "SEBF"} {
			for _, tr := range []string{"synth-a", "synth-b"} {
				m, _, _, _, _ := labRun(t, tr, sc, h)
				total += m
				prefix += labPrefix
				if labGetenv("FALCON_LAB_BREAKS") != "" {
					counts = append(counts, fmt.Sprintf("[%d %s]", labPrefix, labPrefixBreak))
				}
				counts = append(counts, strconv.Itoa(m))
				if labWatch != "" {
					counts = append(counts, "("+labWatch+")")
					labWatch = ""
				}
			}
		}
		fmt.Fprintf(os.Stdout, "PAIR %d prefix %d %s %s\n", total, prefix, strings.Join(c, "+"), strings.Join(counts, " "))
	}
}
