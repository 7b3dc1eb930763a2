//go:build race

package live

// raceEnabled: the race detector slows lz4 by one to two orders of
// magnitude, so tests start the predictors from a codec speed the
// instrumented code reaches.
const raceEnabled = true
