package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/transport"
)

// The cluster's own control messages share each node's transport with ps's
// traffic. They start with ctlMagic, whose first byte (0xFE) is never ps's
// wire version (1), so a wrapped ps handler never sees them and ps never
// mistakes them for its own.
//
// All are requests, so the sender knows they arrived:
//
//	ping     → ack (liveness of the coordinator)
//	stats    → 6 × u64: the node's transport.Stats
//	done     worker → coordinator: samples, given, taken | bits of the last loss (u64 each) → ack
//	shutdown coordinator → everyone: the run is over, exit 0 → ack
//	abort    coordinator → everyone: the run failed (the coordinator's log says why), exit 1 → ack
var ctlMagic = []byte{0xFE, 'F', 'C', 'L'}

const (
	ctlPing byte = iota + 1
	ctlStats
	ctlDone
	ctlShutdown
	ctlAbort
)

func ctlMsg(op byte, vals ...uint64) []byte {
	b := append(append([]byte(nil), ctlMagic...), op)
	for _, v := range vals {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// parseCtl splits a control message into its op and u64 fields; ok is
// false for anything else (ps traffic).
func parseCtl(b []byte) (op byte, vals []uint64, ok bool) {
	if len(b) < len(ctlMagic)+1 || string(b[:len(ctlMagic)]) != string(ctlMagic) {
		return 0, nil, false
	}
	body := b[len(ctlMagic)+1:]
	if len(body)%8 != 0 {
		return 0, nil, false
	}
	for i := 0; i < len(body); i += 8 {
		vals = append(vals, binary.BigEndian.Uint64(body[i:]))
	}
	return b[len(ctlMagic)], vals, true
}

// ctlHandler wraps a ps role's handler: control requests are served here,
// everything else goes to the role.
type ctlHandler struct {
	inner transport.Handler
	// onDone receives a worker's done report (coordinator only); it must
	// be quick.
	onDone func(from transport.NodeID, vals []uint64) error

	shutdownOnce sync.Once
	shutdown     chan struct{} // closed when the coordinator says the run is over
	abortOnce    sync.Once
	aborted      chan struct{} // closed when the coordinator says the run failed

	mu sync.Mutex
	tr transport.Transport // set once the transport exists
}

func newCtlHandler(inner transport.Handler) *ctlHandler {
	return &ctlHandler{inner: inner, shutdown: make(chan struct{}), aborted: make(chan struct{})}
}

var _ transport.Handler = (*ctlHandler)(nil)

func (h *ctlHandler) setTransport(tr transport.Transport) {
	h.mu.Lock()
	h.tr = tr
	h.mu.Unlock()
}

func (h *ctlHandler) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	op, vals, ok := parseCtl(req)
	if !ok {
		return h.inner.HandleRequest(ctx, from, req)
	}
	switch op {
	case ctlDone:
		if h.onDone == nil {
			return nil, errors.New("cluster: not the coordinator")
		}
		if err := h.onDone(from, vals); err != nil {
			return nil, err
		}
		return ctlMsg(ctlDone), nil
	case ctlShutdown, ctlAbort:
		if from != coordinatorName {
			return nil, fmt.Errorf("cluster: end of run from %q refused (only the coordinator may end the run)", from)
		}
		if op == ctlShutdown {
			h.shutdownOnce.Do(func() { close(h.shutdown) })
		} else {
			h.abortOnce.Do(func() { close(h.aborted) })
		}
		return ctlMsg(op), nil
	case ctlPing:
		return ctlMsg(ctlPing), nil
	case ctlStats:
		h.mu.Lock()
		tr := h.tr
		h.mu.Unlock()
		sr, _ := tr.(transport.StatsReporter)
		if sr == nil {
			return nil, errors.New("cluster: transport reports no stats")
		}
		s := sr.Stats()
		return ctlMsg(ctlStats, s.FramesSent, s.RawBytesSent, s.WireBytesSent, s.FramesReceived, s.RawBytesReceived, s.WireBytesReceived), nil
	}
	return nil, fmt.Errorf("cluster: unknown control request %d", op)
}

// HandleMessage passes ps's one-way messages on; the cluster sends none of
// its own.
func (h *ctlHandler) HandleMessage(from transport.NodeID, msg []byte) {
	if _, _, ok := parseCtl(msg); !ok {
		h.inner.HandleMessage(from, msg)
	}
}

// parsePeers reads "name=host:port,..." into an address book.
func parsePeers(s string) (map[transport.NodeID]string, error) {
	m := make(map[transport.NodeID]string)
	if s == "" || s == "-" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "=")
		if !ok || name == "" || addr == "" || !strings.Contains(addr, ":") {
			return nil, fmt.Errorf("%w: -peers entry %q (want name=host:port)", errUsage, part)
		}
		if _, dup := m[transport.NodeID(name)]; dup {
			return nil, fmt.Errorf("%w: -peers names %q twice", errUsage, name)
		}
		m[transport.NodeID(name)] = addr
	}
	return m, nil
}

// formatPeers is parsePeers' inverse, in a stable order.
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
	names := []transport.NodeID{coordinatorName}
	names = append(names, serverNames(servers)...)
	return append(names, workerNames(workers)...)
}

const coordinatorName transport.NodeID = "coordinator"

func serverNames(n int) []transport.NodeID {
	s := make([]transport.NodeID, n)
	for i := range s {
		s[i] = transport.NodeID(fmt.Sprintf("server-%d", i))
	}
	return s
}

func workerNames(n int) []transport.NodeID {
	s := make([]transport.NodeID, n)
	for i := range s {
		s[i] = transport.NodeID(fmt.Sprintf("worker-%d", i))
	}
	return s
}

// parseID checks -id against -role and the cluster size and returns the
// node name and its index (0 for the coordinator).
func (o *options) parseID() (transport.NodeID, int, error) {
	id := o.id
	if id == "" {
		id = o.role
		if o.role != "coordinator" {
			id += "-0"
		}
	}
	if o.role == "coordinator" {
		if id != string(coordinatorName) {
			return "", 0, fmt.Errorf("%w: the coordinator's -id must be %q, not %q", errUsage, coordinatorName, id)
		}
		return coordinatorName, 0, nil
	}
	count := o.workers
	if o.role == "server" {
		count = o.servers
	}
	prefix := o.role + "-"
	i, err := strconv.Atoi(strings.TrimPrefix(id, prefix))
	if !strings.HasPrefix(id, prefix) || err != nil || i < 0 || i >= count {
		return "", 0, fmt.Errorf("%w: -id %q: a %s's name is %s<i> with 0 <= i < %d", errUsage, id, o.role, prefix, count)
	}
	return transport.NodeID(id), i, nil
}

func (o *options) nodeName() string {
	n, _, err := o.parseID()
	if err != nil {
		return o.role
	}
	return string(n)
}

// tcpConfig builds this node's transport configuration from the flags.
func (o *options) tcpConfig(id transport.NodeID, peers map[transport.NodeID]string) (transport.TCPConfig, error) {
	cfg := transport.DefaultTCPConfig()
	cfg.ID = id
	cfg.ListenAddr = o.listen
	cfg.Peers = peers
	if o.secret != "" {
		cfg.Secret = []byte(o.secret)
	}
	switch o.compress {
	case "never":
		cfg.Compression = transport.Never
	case "always":
		c := transport.CodecLZ4
		if o.codec == "snappy" {
			c = transport.CodecSnappy
		}
		cfg.Compression = transport.Always(c)
	case "auto":
		pc := fvdf.DefaultPolicyConfig()
		if o.bandwidth > 0 {
			pc.Bandwidth = o.bandwidth
		}
		pol, err := fvdf.NewPolicy(pc)
		if err != nil {
			return cfg, err
		}
		cfg.Compression = pol
	}
	if o.tlsCert != "" {
		tc, err := loadTLS(o.tlsCert, o.tlsKey, o.tlsCA)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	return cfg, nil
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
