package clusterbin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/falconml/falcon/ps/metrics/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves a node's Prometheus metrics over HTTP at /metrics:
// the ps roles' (package ps/metrics names them), Go's runtime and the
// process's.
type metricsServer struct {
	rec  *prom.Recorder
	srv  *http.Server
	addr string // the bound address
}

// startMetrics listens on addr (host:port; port 0 picks one) and serves
// /metrics there until close. It prints the URL to out (the local mode
// and tests read it).
func startMetrics(addr string, out io.Writer) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	rec, err := prom.New(reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{rec: rec, addr: ln.Addr().String(),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = m.srv.Serve(ln) }() // ends with close (http.ErrServerClosed)
	fmt.Fprintf(out, "metrics: serving http://%s/metrics\n", m.addr)
	return m, nil
}

// linger keeps serving for d after the run, so that a scrape after the
// last one of the run still sees the final values, or until ctx is done.
func (m *metricsServer) linger(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		m.srv.Close()
	}
}

// childMetricsAddr is the -metrics-addr the local mode gives its k-th
// child: base's host, with port 0 for each when base's port is 0, else
// base's port + k.
func childMetricsAddr(base string, k int) (string, error) {
	host, port, err := net.SplitHostPort(base)
	if err != nil {
		return "", fmt.Errorf("%w: -metrics-addr %q: %v", errUsage, base, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+k > 65535 {
		return "", fmt.Errorf("%w: -metrics-addr %q: port", errUsage, base)
	}
	if p == 0 {
		return net.JoinHostPort(host, "0"), nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+k)), nil
}
