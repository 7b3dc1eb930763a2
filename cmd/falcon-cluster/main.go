// Command falcon-cluster runs a Falcon parameter-server cluster as separate OS
// processes talking over real TCP: one coordinator, -servers servers and
// -workers workers, each a role of this one binary built on ps.Cluster.
//
// With no -role it starts the whole cluster on 127.0.0.1 as child
// processes of itself, with a random shared secret, streams their
// prefixed output and exits non-zero if any of them fails or the run
// exceeds -timeout. With -role it runs one node, as a deployment does:
// role, rank and peers come from flags or the environment (FALCON_ROLE,
// FALCON_RANK or JOB_COMPLETION_INDEX, FALCON_PEERS or FALCON_PEERS_DNS),
// and deploy/ holds Kubernetes JobSet manifests that run it.
//
// Its logic is in internal/clusterbin (shared with
// contrib/etcd/cmd/falcon-cluster-etcd, the same binary with a standby
// coordinator on etcd); its tests are there. See README.md for the
// commands.
package main

import "github.com/falconml/falcon/internal/clusterbin"

func main() { clusterbin.Main(nil) }
