// Package cputime reads the CPU time the process has used, for benchmarks
// and example programs that report CPU time beside wall time (on a shared
// machine the wall time includes time the process was not running).
package cputime
