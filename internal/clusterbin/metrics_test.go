package clusterbin

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// metricsLineRE is a child's announcement of its endpoint, as the local
// mode prefixes it.
var metricsLineRE = regexp.MustCompile(`^\[(\S+)\] metrics: serving (http://\S+/metrics)$`)

// sample returns the sum of the samples of metric name whose labels
// contain every one of with, and how many there were, in a Prometheus
// text exposition.
func sample(expo, name string, with ...string) (float64, int) {
	var s float64
	n := 0
	for _, l := range strings.Split(expo, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		ok := true
		for _, w := range with {
			ok = ok && strings.Contains(l[:i], w)
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil && ok {
			s += v
			n++
		}
	}
	return s, n
}

// TestLocalCluster_Metrics runs the local mode with -metrics-addr from
// the environment (FALCON_METRICS_ADDR=127.0.0.1:0: each process its own
// port) and -metrics-linger, waits for the run's end and scrapes every
// process's /metrics: the coordinator served admits and clocks and
// observed each admitted push's staleness, each server served pushes and
// pulls with a latency histogram, each worker reports its clock (≥ 11 of
// 12), its waits for release and the orders it received.
func TestLocalCluster_Metrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(tinyArgs("bsp"), "-metrics-linger=80s")...)
	cmd.Env = append(os.Environ(), "FALCON_SECRET=a-test-secret-metrics", "FALCON_METRICS_ADDR=127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuf // the children's errors, for a failure's message
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	urls := map[string]string{}
	var log strings.Builder
	sc := bufio.NewScanner(stdout)
	trained := 0
	for trained < 3 || !strings.Contains(log.String(), "\ncluster policy=") {
		if !sc.Scan() {
			_ = cmd.Wait()
			t.Fatalf("output ended before the run did (%v):\n%s\nstderr:\n%s", cmd.ProcessState, log.String(), stderr.String())
		}
		l := sc.Text()
		log.WriteString("\n" + l)
		if m := metricsLineRE.FindStringSubmatch(l); m != nil {
			urls[m[1]] = m[2]
		}
		if strings.Contains(l, ": trained 12 clocks") {
			trained++
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if len(urls) != 6 {
		t.Fatalf("%d processes announced metrics, want 6: %v\n%s", len(urls), urls, log.String())
	}
	scrape := func(node string) string {
		resp, err := http.Get(urls[node])
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %v", node, resp.Status, err)
		}
		return string(b)
	}
	co := scrape("coordinator")
	admits, _ := sample(co, "falcon_ps_requests_total", `role="coordinator"`, `op="admit"`)
	if clocks, _ := sample(co, "falcon_ps_requests_total", `op="clock"`); admits < 36 || clocks < 36 {
		t.Errorf("coordinator served %v admits and %v clocks, want ≥ 36 each (3 workers × 12 clocks)", admits, clocks)
	}
	if n, _ := sample(co, "falcon_ps_push_staleness_count"); n != admits {
		t.Errorf("staleness histogram holds %v pushes, %v admitted", n, admits)
	}
	if n, _ := sample(co, "go_goroutines"); n <= 0 {
		t.Errorf("no Go runtime metrics")
	}
	for _, s := range []string{"server-0", "server-1"} {
		e := scrape(s)
		for _, op := range []string{"push", "pull"} {
			if n, _ := sample(e, "falcon_ps_request_duration_seconds_count", `node="`+s+`"`, `op="`+op+`"`); n < 36 {
				t.Errorf("%s: %v %s latencies observed, want ≥ 36", s, n, op)
			}
		}
		if b, _ := sample(e, "falcon_ps_request_bytes_total", `op="push"`, `dir="in"`); b <= 0 {
			t.Errorf("%s: no push bytes", s)
		}
	}
	for w := range 3 {
		node := "worker-" + strconv.Itoa(w)
		e := scrape(node)
		if c, n := sample(e, "falcon_ps_worker_clock", `worker="`+strconv.Itoa(w)+`"`); n != 1 || c < 11 {
			t.Errorf("%s: clock %v (%d series), want ≥ 11", node, c, n)
		}
		if n, _ := sample(e, "falcon_ps_worker_blocked_seconds_count"); n < 12 {
			t.Errorf("%s: %v waits for release, want ≥ 12", node, n)
		}
		if n, _ := sample(e, "falcon_ps_requests_total", `role="worker"`, `op="release"`); n < 11 {
			t.Errorf("%s: %v releases received, want ≥ 11", node, n)
		}
	}
}

// TestChildMetricsAddr: port 0 stays 0 for every child, another port is
// offset by the child's index, and an address without a port is refused.
func TestChildMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		base string
		k    int
		want string
	}{{"127.0.0.1:0", 3, "127.0.0.1:0"}, {":9100", 2, ":9102"}, {"[::1]:9100", 1, "[::1]:9101"}} {
		if got, err := childMetricsAddr(tc.base, tc.k); err != nil || got != tc.want {
			t.Errorf("childMetricsAddr(%q, %d) = %q, %v; want %q", tc.base, tc.k, got, err, tc.want)
		}
	}
	for _, bad := range []string{"localhost", ":x", ":65535"} {
		if _, err := childMetricsAddr(bad, 1); err == nil {
			t.Errorf("childMetricsAddr(%q, 1) accepted", bad)
		}
	}
}

// lockedBuf is a buffer safe for a writer and a reader at once.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
