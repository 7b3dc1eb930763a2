// Package readmecheck holds no code: its test extracts the Go program of
// the module's README.md (its first ```go block) and builds and vets it as
// a module of its own that requires this one through a replace directive,
// as a user's program would, so the README's snippet cannot drift from
// the API (an earlier one called a helper that existed only in a test).
package readmecheck
