package main

import (
	"errors"
	"io"

	"github.com/falconml/falcon/coflow"
)

// runCompat replays in coflowsim-compatible mode. Not wired yet: package
// coflow/coflowsim is being written separately.
func runCompat(tr *coflow.Trace, name string, o options, w, csvOut io.Writer) (summary, error) {
	return summary{}, errors.New("mode coflowsim is not available: package github.com/falconml/falcon/coflow/coflowsim is not in this build")
}
