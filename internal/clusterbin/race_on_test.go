//go:build race

package clusterbin

// raceEnabled reports that the tests run under the race detector: the
// cluster binary they start is then built with -race too.
const raceEnabled = true
