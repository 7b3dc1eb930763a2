package fvdf

import "github.com/falconml/falcon/coflow"

// newSEBF returns the SEBF baseline. Until package coflow ships its own
// (Varys) SEBF, FVDF with compression disabled stands in.
func newSEBF() coflow.Scheduler {
	s, _ := New(Config{DisableCompression: true, StarvationPeriod: -1}, nil)
	return s
}
