package fvdf

import "github.com/falconml/falcon/coflow"

// newSEBF returns package coflow's Varys SEBF with its defaults
// (event-driven, MADD, backfilling, no starvation guard).
func newSEBF() (coflow.Scheduler, error) {
	return coflow.NewSEBF(coflow.DefaultOrderedConfig())
}
