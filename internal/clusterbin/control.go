package clusterbin

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/transport"
)

// parsePeers reads -peers ("name=host:port,...") with ps.ParsePeers.
func parsePeers(s string) (map[transport.NodeID]string, error) {
	m, err := ps.ParsePeers(s)
	if err != nil {
		return nil, fmt.Errorf("%w: -peers: %v", errUsage, err)
	}
	return m, nil
}

// formatPeers is parsePeers' inverse, in the order of names.
func formatPeers(names []transport.NodeID, addrs map[transport.NodeID]string) string {
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, string(n)+"="+addrs[n])
	}
	return strings.Join(parts, ",")
}

// nodeNames lists every node of a cluster: the coordinator, the servers
// and the workers.
func nodeNames(servers, workers int) []transport.NodeID {
	names := []transport.NodeID{ps.CoordinatorNode}
	for i := range servers {
		names = append(names, ps.ServerNode(i))
	}
	for i := range workers {
		names = append(names, ps.WorkerNode(i))
	}
	return names
}

// expandPeers makes the address book from -peers-dns with
// ps.PeersFromTemplate.
func expandPeers(tmpl string, servers, workers int) (map[transport.NodeID]string, error) {
	m, err := ps.PeersFromTemplate(tmpl, servers, workers)
	if err != nil {
		return nil, fmt.Errorf("%w: -peers-dns: %v", errUsage, err)
	}
	return m, nil
}

// applyHosts rewrites the host part of the peers' addresses found in
// hosts ("name=ip,..."): a static hosts table where there is no cluster
// DNS.
func applyHosts(peers map[transport.NodeID]string, hosts string) error {
	if hosts == "" {
		return nil
	}
	table := map[string]string{}
	for _, part := range strings.Split(hosts, ",") {
		name, ip, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || ip == "" {
			return fmt.Errorf("%w: -hosts entry %q (want hostname=address)", errUsage, part)
		}
		table[name] = ip
	}
	for n, a := range peers {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("%w: address %q of %s: %v", errUsage, a, n, err)
		}
		if ip, ok := table[h]; ok {
			peers[n] = net.JoinHostPort(ip, p)
		}
	}
	return nil
}

// isLoopback reports whether binding addr listens on loopback only.
func isLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// compression builds the -compress policy.
func (o *options) compression() (transport.CompressionPolicy, error) {
	switch o.compress {
	case "always":
		c := transport.CodecLZ4
		if o.codec == "snappy" {
			c = transport.CodecSnappy
		}
		return transport.Always(c), nil
	case "auto":
		pc := fvdf.DefaultPolicyConfig()
		if o.bandwidth > 0 {
			pc.Bandwidth = o.bandwidth
		}
		return fvdf.NewPolicy(pc)
	}
	return transport.Never, nil
}

// loadTLS builds a mutual-TLS config: this node's certificate serves both
// as server and client certificate, and ca verifies every peer.
func loadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: no certificate found in %s", caFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
