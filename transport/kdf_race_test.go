//go:build race

package transport

// The race detector makes scrypt about six times slower and this
// package's tests derive a few dozen distinct secrets; a race build
// checks concurrency, not cost, so its tests stretch with N = 2^10. The
// plain test run (and every other package's tests) use the real N.
func init() { scryptN = 1 << 10 }
