package ps

import (
	"fmt"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// # Role checks
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map.)
//
// A server of a Cluster with workers checks the role of every request's
// sender (ServerConfig.Access, ClusterAccess): pings, layouts and pulls
// come from anyone (evaluation and monitoring clients read), inits, pushes
// and pushpulls only from workers and the coordinator, flushes only from
// the coordinator; anything else is answered with an ErrForbidden error
// naming the op, the sender and the server, and changes nothing. The
// coordinator serves workers only (hello, admit, clock, progress,
// transfers, leave, heartbeat: ErrForbidden for any other sender), and a
// worker and a Cluster's control handler take orders and the end of a run
// from the coordinator only. The sender is the name the connection proved
// over TCP and the joined name in process. Over TCP those checks hold
// against members only under per-node identity (ClusterConfig.NodeTLS:
// the name is the one in the peer's certificate; or keys minted per pair,
// transport.PairKeys): a shared secret (or one TLS certificate for all)
// proves membership only, and any member can claim any role; without a
// secret the name is only claimed. A servers-only Cluster (Workers 0) and a Server built
// with a zero Access check nothing.

// Access is a server's role checks: which senders may send which requests.
// The sender is the transport's `from`: over TCP, the name the connection
// proved in its handshake; in process, the name the node joined under.
// Role checks hold against members only when that name is an identity
// (transport.TCPConfig.CertIdentity, ClusterConfig.NodeTLS, or keys per
// pair): under a shared secret any member can claim any name, and without
// one a TCP peer's name is only claimed, so role checks there guard
// against mistakes and strangers, not members.
//
// With RoleOf set, a server serves
//
//	ping, layout, pull          any sender (evaluation and monitoring clients read)
//	init, push, pushpull        workers and the coordinator (the coordinator initialises)
//	flush                       the coordinator only (it closes clocks, see Coordinator)
//
// and refuses anything else with an ErrForbidden error, before it decodes
// the request further: the store is unchanged.
type Access struct {
	// RoleOf returns the role of a sender; ok false means the sender is
	// not a member of the cluster. Nil turns role checks off: any sender
	// may send anything (a server used on its own, with Clients of any
	// name, as a key-value store).
	RoleOf func(transport.NodeID) (role Role, ok bool)
}

// Enabled reports whether role checks are on.
func (a Access) Enabled() bool { return a.RoleOf != nil }

// check returns nil when from may send o, else an ErrForbidden error.
func (a Access) check(server string, from transport.NodeID, o op) error {
	if a.RoleOf == nil {
		return nil
	}
	var need string
	role, member := a.RoleOf(from)
	switch o {
	case wire.OpPing, wire.OpLayout, wire.OpPull:
		return nil
	case wire.OpInit, wire.OpPush, wire.OpPushPull, wire.OpPushID, wire.OpPushPullID:
		if member && (role == RoleWorker || role == RoleCoordinator) {
			return nil
		}
		need = "only workers and the coordinator write"
	case wire.OpFlush:
		if member && role == RoleCoordinator {
			return nil
		}
		need = "only the coordinator flushes"
	default:
		return nil // an unknown op is refused as malformed by serve
	}
	who := "a node that is not a member of the cluster"
	if member {
		who = "a " + string(role)
	}
	return fmt.Errorf("%w: %s from %q (%s) refused by %s: %s", ErrForbidden, opName(o), from, who, server, need)
}

// ClusterAccess is the Access of a cluster whose nodes are named as
// ParseNode reads them: coordinator, server-<i> for i < servers,
// worker-<i> for i < workers.
func ClusterAccess(servers, workers int) Access {
	return Access{RoleOf: func(n transport.NodeID) (Role, bool) {
		r, _, err := ParseNode(n, servers, workers)
		return r, err == nil
	}}
}

// opName names a server op in messages.
func opName(o op) string {
	switch o {
	case wire.OpPing:
		return "ping"
	case wire.OpInit:
		return "init"
	case wire.OpPush, wire.OpPushID:
		return "push"
	case wire.OpPull:
		return "pull"
	case wire.OpPushPull, wire.OpPushPullID:
		return "pushpull"
	case wire.OpFlush:
		return "flush"
	case wire.OpLayout:
		return "layout"
	}
	return fmt.Sprintf("op %d", o)
}
