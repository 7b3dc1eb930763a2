// Package clusterbin is the cluster binary's logic: cmd/falcon-cluster is
// Main(nil), and contrib/etcd/cmd/falcon-cluster-etcd is Main with an
// Extension that adds etcd's flags and runs the coordinator as a standby
// on etcd. It runs a Falcon parameter-server cluster as separate OS
// processes talking over real TCP: one coordinator, -servers servers and
// -workers workers, each a role of one binary built on ps.Cluster.
//
// With no -role it starts the whole cluster on 127.0.0.1 as child
// processes of itself, with a random shared secret, streams their
// prefixed output and exits non-zero if any of them fails or the run
// exceeds -timeout. With -role it runs one node, as a deployment does:
// role, rank and peers come from flags or the environment (FALCON_ROLE,
// FALCON_RANK or JOB_COMPLETION_INDEX, FALCON_PEERS or FALCON_PEERS_DNS),
// and cmd/falcon-cluster/deploy/ holds Kubernetes JobSet manifests that
// run it.
//
// It is internal to the repository: the nested module contrib/etcd may
// import it (Go's rule on internal packages is on import paths, and
// github.com/falconml/falcon/contrib/etcd/... is under
// github.com/falconml/falcon), users may not. See
// cmd/falcon-cluster/README.md for the commands.
package clusterbin

import (
	"context"
	"flag"
	"io"

	"github.com/falconml/falcon/ps"
)

// Extension is what a binary built on this package adds to the cluster
// binary. Every field may be nil.
type Extension struct {
	// Flags registers the extension's flags on fs and returns, for each
	// flag name, the environment variable read when the flag is not
	// given ("" or absent: none). The local mode forwards them to its
	// children as it does the others.
	Flags func(fs *flag.FlagSet) (env map[string]string)
	// Check validates the extension's flags once every flag is parsed,
	// given the binary's settings; its error is a usage error (exit 2).
	Check func(s Settings) error
	// Coordinator, when not nil, runs the coordinator role: it calls run
	// while this process may act as the coordinator (again only after a
	// call that failed), and returns its error. run's store, when not nil, is the coordinator's
	// state (ps.ClusterConfig.CoordinatorStore, replacing
	// -coordinator-dir's); nil keeps the flags' store. When run's ctx is
	// done while the process's own is not (the extension canceled it:
	// leadership lost), the coordinator stops as a crash would
	// (ps.Cluster.Abandon: no abort sent, nothing answered) and run
	// returns ctx's error; otherwise (-timeout, parent gone) it stops as
	// the plain binary does.
	Coordinator func(ctx context.Context, s Settings, run CoordinatorFunc) error
}

// CoordinatorFunc runs the coordinator role with store (see
// Extension.Coordinator).
type CoordinatorFunc func(ctx context.Context, store ps.CoordinatorStore) error

// Settings are the binary's flags an extension may need.
type Settings struct {
	// Role is "coordinator", "server", "worker", or "" (the local mode).
	Role string
	// RunID is -run-id; CoordinatorDir is -coordinator-dir.
	RunID, CoordinatorDir string
	// Out is where the role writes its progress lines (nil in Check).
	Out io.Writer
}

func (o *options) settings(out io.Writer) Settings {
	return Settings{Role: o.role, RunID: o.runID, CoordinatorDir: o.coordDir, Out: out}
}
