// Package deploytest holds what the manifest tests of cmd/falcon-cluster
// (internal/clusterbin) and contrib/etcd share when they run a manifest's
// pods as processes on loopback: Expand, Kubernetes' $(VAR) expansion of a
// container's args, and PodNet, a loopback network for one test's pods.
package deploytest

import (
	"fmt"
	"math/rand/v2"
	"regexp"
)

// k8sVar is Kubernetes' $(VAR) reference in container args.
var k8sVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// Expand replaces each $(VAR) reference in arg by vars[VAR], as Kubernetes
// expands a container's args from its environment; a reference to a
// variable vars lacks is left as it is, as Kubernetes leaves it.
func Expand(arg string, vars map[string]string) string {
	return k8sVar.ReplaceAllStringFunc(arg, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// PodNet returns the first three octets ("127.a.b.") of a loopback /24
// picked at random for one test's pods: every 127.0.0.0/8 address is
// loopback on Linux, and a fixed one (127.0.0.x:7000) collided when two
// checkouts ran a manifest test at once.
func PodNet() string {
	return fmt.Sprintf("127.%d.%d.", 1+rand.IntN(254), 1+rand.IntN(254))
}
