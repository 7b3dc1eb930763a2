//go:build race

package fvdf

// raceEnabled: the race detector slows the planner about tenfold; the
// whole-trace replays that only compare results skip under it (the run
// without -race covers them).
const raceEnabled = true
