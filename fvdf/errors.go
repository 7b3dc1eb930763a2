package fvdf

import "errors"

// Errors returned by this package. Check them with errors.Is.
var (
	// ErrConfig reports an invalid configuration field.
	ErrConfig = errors.New("fvdf: invalid config")
	// ErrUnknownPredictor reports a predictor name that is not known.
	ErrUnknownPredictor = errors.New("fvdf: unknown predictor")
	// ErrBadInput reports invalid trace or replay input.
	ErrBadInput = errors.New("fvdf: bad input")
)
