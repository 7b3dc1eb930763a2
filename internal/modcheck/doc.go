// Package modcheck holds no code: its test checks that the module's go.mod
// requires only modules that provide a package to the module's packages or
// their tests. A requirement nothing uses still enters every user's module
// graph, where minimal version selection can upgrade the user's own copy of
// that module and make their go mod tidy fetch it and its dependencies
// (as an unused testify requirement once did, pulling in a yaml module).
package modcheck
