package ps

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/falconml/falcon/transport"
)

// Role is one of the three kinds of node of a cluster.
type Role string

// The roles.
const (
	RoleCoordinator Role = "coordinator"
	RoleServer      Role = "server"
	RoleWorker      Role = "worker"
)

// CoordinatorNode is the coordinator's node name in a Cluster.
const CoordinatorNode transport.NodeID = "coordinator"

// ServerNode is server i's node name, "server-<i>".
func ServerNode(i int) transport.NodeID { return transport.NodeID(fmt.Sprintf("server-%d", i)) }

// WorkerNode is worker i's node name, "worker-<i>"; i is its epsp.WorkerID.
func WorkerNode(i int) transport.NodeID { return transport.NodeID(fmt.Sprintf("worker-%d", i)) }

// NodeName is the name of the node of role and rank (rank is ignored for
// the coordinator).
func NodeName(role Role, rank int) transport.NodeID {
	switch role {
	case RoleServer:
		return ServerNode(rank)
	case RoleWorker:
		return WorkerNode(rank)
	}
	return CoordinatorNode
}

// ParseNode splits a Cluster node name into its role and rank, checking
// the rank against a cluster of servers servers and workers workers.
// A worker's rank is its epsp.WorkerID: ids come from the names, so a
// node cannot claim another position than its name says.
func ParseNode(name transport.NodeID, servers, workers int) (Role, int, error) {
	if name == CoordinatorNode {
		return RoleCoordinator, 0, nil
	}
	role, num, ok := strings.Cut(string(name), "-")
	count := 0
	switch Role(role) {
	case RoleServer:
		count = servers
	case RoleWorker:
		count = workers
	default:
		ok = false
	}
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || i >= count || strconv.Itoa(i) != num {
		return "", 0, fmt.Errorf("%w: %q (want coordinator, server-<i> with i < %d or worker-<i> with i < %d)", ErrBadNodeName, name, servers, workers)
	}
	return Role(role), i, nil
}

// clusterNodes lists every node of a cluster: the coordinator (if there
// are workers), the servers, then the workers.
func clusterNodes(servers, workers int) []transport.NodeID {
	var names []transport.NodeID
	if workers > 0 {
		names = append(names, CoordinatorNode)
	}
	for i := range servers {
		names = append(names, ServerNode(i))
	}
	for i := range workers {
		names = append(names, WorkerNode(i))
	}
	return names
}

func serverNodes(n int) []transport.NodeID {
	s := make([]transport.NodeID, n)
	for i := range s {
		s[i] = ServerNode(i)
	}
	return s
}

func workerNodes(n int) []transport.NodeID {
	s := make([]transport.NodeID, n)
	for i := range s {
		s[i] = WorkerNode(i)
	}
	return s
}

// ParsePeers reads an address book "name=host:port,..." (spaces around
// entries and a trailing comma are allowed; a name twice is refused).
func ParsePeers(s string) (map[transport.NodeID]string, error) {
	m := make(map[transport.NodeID]string)
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "=")
		if !ok || name == "" || addr == "" || !strings.Contains(addr, ":") {
			return nil, fmt.Errorf("%w: entry %q (want name=host:port)", ErrBadPeers, part)
		}
		if _, dup := m[transport.NodeID(name)]; dup {
			return nil, fmt.Errorf("%w: %q named twice", ErrBadPeers, name)
		}
		m[transport.NodeID(name)] = addr
	}
	return m, nil
}

// PeersFromTemplate makes the address book of a cluster of servers
// servers and workers workers from a template in which {role} and {rank}
// stand for each node's role and rank (0 for the coordinator), e.g.
// "falcon-{role}-0-{rank}.falcon:7000" names the pods of a Kubernetes
// JobSet "falcon" with one indexed job per role under the JobSet's
// headless service. The names are resolved when a node dials, so pods
// that start later are found.
func PeersFromTemplate(tmpl string, servers, workers int) (map[transport.NodeID]string, error) {
	if !strings.Contains(tmpl, "{role}") || !strings.Contains(tmpl, "{rank}") {
		return nil, fmt.Errorf("%w: template %q must contain {role} and {rank}", ErrBadPeers, tmpl)
	}
	if _, _, err := net.SplitHostPort(strings.NewReplacer("{role}", "r", "{rank}", "0").Replace(tmpl)); err != nil {
		return nil, fmt.Errorf("%w: template %q: %v", ErrBadPeers, tmpl, err)
	}
	m := map[transport.NodeID]string{}
	for _, n := range clusterNodes(servers, workers) {
		role, rank, _ := ParseNode(n, servers, workers)
		m[n] = strings.NewReplacer("{role}", string(role), "{rank}", strconv.Itoa(rank)).Replace(tmpl)
	}
	return m, nil
}
