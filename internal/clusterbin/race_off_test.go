//go:build !race

package clusterbin

const raceEnabled = false
