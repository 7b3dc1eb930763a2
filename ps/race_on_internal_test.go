//go:build race

package ps

// raceEnabled: the race detector is on; sync.Pool then drops Puts at
// random, so allocation counts are not the program's.
const raceEnabled = true
