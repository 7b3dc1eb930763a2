//go:build !race

package fvdf

const raceEnabled = false
