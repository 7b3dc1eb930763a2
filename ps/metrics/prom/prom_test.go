package prom_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/metrics/prom"
	"github.com/falconml/falcon/ps/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrape fetches url and returns each sample line's value by its series
// ("name{labels}" as exposed).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// sum adds the samples of name whose labels contain every one of with.
func sum(m map[string]float64, name string, with ...string) (float64, int) {
	var s float64
	n := 0
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range with {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			s += v
			n++
		}
	}
	return s, n
}

// TestScrape trains a cluster of two servers and three workers in this
// process for 8 clocks with the Prometheus recorder and durable servers,
// serves the registry over HTTP and scrapes it: requests of every role
// with their bytes, the server-side latency histogram of pushes and
// pulls, each worker's clock (at least 7), blocked time, speed and rank,
// the staleness histogram with one sample per admitted push, and the
// checkpoint histogram are present with plausible values.
func TestScrape(t *testing.T) {
	const clocks, workers = 8, 3
	reg := prometheus.NewRegistry()
	rec, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	train, _, _ := model.Synthetic(model.SyntheticConfig{Train: 600, Test: 1, Seed: 1})
	m := model.NewSoftmax(train.D, train.Classes)
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: workers, Policy: epsp.NewSSP(1),
		Store:   store.Config{Optimizer: store.SGD{LR: 0.1}},
		Durable: ps.DurableConfig{Dir: t.TempDir(), CheckpointPeriod: time.Millisecond},
		Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{10, m.NumParams() - 10}, Init: store.Zeros{}, Clocks: clocks}
	if _, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: workers}, tc); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, srv.URL)

	for _, role := range []string{"server", "coordinator", "worker"} {
		if n, _ := sum(got, "falcon_ps_requests_total", `role="`+role+`"`); n <= 0 {
			t.Errorf("no requests served by role %s", role)
		}
	}
	pushes, _ := sum(got, "falcon_ps_requests_total", `role="server"`, `op="push"`)
	admits, _ := sum(got, "falcon_ps_requests_total", `op="admit"`)
	if pushes < clocks*workers || admits < clocks*workers {
		t.Errorf("%v pushes and %v admits served, want at least %d each", pushes, admits, clocks*workers)
	}
	if b, _ := sum(got, "falcon_ps_request_bytes_total", `op="push"`, `dir="in"`); b < pushes*float64(m.NumParams()) {
		t.Errorf("%v push bytes in for %v pushes of %d parameters: fewer than 1 byte each", b, pushes, m.NumParams())
	}
	if b, _ := sum(got, "falcon_ps_request_bytes_total", `op="pull"`, `dir="out"`); b < 4*float64(m.NumParams()) {
		t.Errorf("%v pull bytes out, want at least one model of %d float32s", b, m.NumParams())
	}
	for _, op := range []string{"push", "pull"} {
		n, _ := sum(got, "falcon_ps_request_duration_seconds_count", `role="server"`, `op="`+op+`"`)
		inf, _ := sum(got, "falcon_ps_request_duration_seconds_bucket", `role="server"`, `op="`+op+`"`, `le="+Inf"`)
		if n <= 0 || inf != n {
			t.Errorf("server %s latency: count %v, +Inf bucket %v", op, n, inf)
		}
	}
	if n, _ := sum(got, "falcon_ps_push_staleness_count"); n != admits {
		t.Errorf("staleness histogram holds %v pushes, %v were admitted", n, admits)
	}
	for w := range workers {
		l := `worker="` + strconv.Itoa(w) + `"`
		if v, n := sum(got, "falcon_ps_worker_clock", l); n != 1 || v < clocks-1 {
			t.Errorf("worker %d clock %v (%d series), want ≥ %d", w, v, n, clocks-1)
		}
		if v, n := sum(got, "falcon_ps_worker_blocked_seconds_count", l); n != 1 || v < clocks {
			t.Errorf("worker %d blocked %v times, want ≥ %d", w, v, clocks)
		}
		if v, n := sum(got, "falcon_ps_worker_speed_samples_per_second", l); n != 1 || v <= 0 {
			t.Errorf("worker %d speed %v (%d series), want > 0", w, v, n)
		}
		if v, n := sum(got, "falcon_ps_straggler_rank", l); n != 1 || v < 0 || v > workers {
			t.Errorf("worker %d rank %v (%d series), want in [0, %d]", w, v, n, workers)
		}
	}
	if n, _ := sum(got, "falcon_ps_checkpoint_duration_seconds_count", `result="ok"`); n <= 0 {
		t.Errorf("no checkpoint observed")
	}
}

// TestPSDoesNotImportPrometheus: package ps and everything it imports
// are free of Prometheus; only this adapter links it.
func TestPSDoesNotImportPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	for _, pkg := range []string{"github.com/falconml/falcon/ps", "github.com/falconml/falcon/ps/metrics"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(out)) {
			if strings.Contains(d, "prometheus") {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
}
