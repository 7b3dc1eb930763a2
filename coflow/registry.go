package coflow

import (
	"fmt"
	"strings"
)

// SchedulerNames lists the names NewScheduler accepts.
func SchedulerNames() []string {
	return []string{"fifo", "scf", "ncf", "lcf", "sebf", "fair", "pfp", "dclas", "sincronia"}
}

// NewScheduler returns a built-in scheduler with its default configuration,
// by name (case-insensitive): fifo, scf, ncf, lcf, sebf, fair, pfp, dclas,
// sincronia.
func NewScheduler(name string) (Scheduler, error) {
	switch strings.ToLower(name) {
	case "fifo":
		return NewFIFO(DefaultOrderedConfig())
	case "scf":
		return NewSCF(DefaultOrderedConfig())
	case "ncf":
		return NewNCF(DefaultOrderedConfig())
	case "lcf":
		return NewLCF(DefaultOrderedConfig())
	case "sebf", "varys":
		return NewSEBF(DefaultOrderedConfig())
	case "fair":
		return NewFair(), nil
	case "pfp":
		return NewPFP(), nil
	case "dclas", "aalo", "dark":
		return NewDCLAS(DefaultDCLASConfig())
	case "sincronia", "bssi":
		return NewSincronia(DefaultSincroniaConfig())
	}
	return nil, fmt.Errorf("%w: unknown scheduler %q (want one of %s)", ErrInvalidConfig, name, strings.Join(SchedulerNames(), ", "))
}
