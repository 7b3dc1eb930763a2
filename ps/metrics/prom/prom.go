// Package prom exports the metrics of package ps/metrics to Prometheus
// (github.com/prometheus/client_golang). New registers them on a
// registry and returns the Recorder to give a cluster:
//
//	reg := prometheus.NewRegistry()
//	rec, err := prom.New(reg)
//	...
//	c, err := ps.NewCluster(ctx, ps.ClusterConfig{..., Metrics: rec})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metric names, types, labels and units are listed in package
// ps/metrics. Package ps does not import this package (nor Prometheus): a
// program that does not use it does not link it.
package prom

import (
	"strconv"
	"time"

	"github.com/falconml/falcon/ps/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Bucket bounds of the histograms, in their metric's unit.
var (
	// LatencyBuckets (seconds): 50 µs to about 1.6 s, doubling.
	LatencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)
	// StalenessBuckets (updates): 0, 1, 2, 4, ..., 256.
	StalenessBuckets = append([]float64{0}, prometheus.ExponentialBuckets(1, 2, 9)...)
	// BlockedBuckets (seconds): 100 µs to about 26 s, ×4.
	BlockedBuckets = prometheus.ExponentialBuckets(1e-4, 4, 10)
	// CheckpointBuckets (seconds): 1 ms to about 262 s, ×4.
	CheckpointBuckets = prometheus.ExponentialBuckets(1e-3, 4, 10)
)

// Recorder is a metrics.Recorder that updates Prometheus metrics. Make it
// with New (its zero value is not usable); it is safe for concurrent use.
type Recorder struct {
	metrics.Nop
	requests   *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	staleness  prometheus.Histogram
	clock      *prometheus.GaugeVec
	blockedSum *prometheus.CounterVec
	blocked    *prometheus.HistogramVec
	rank       *prometheus.GaugeVec
	speed      *prometheus.GaugeVec
	leaseMiss  *prometheus.CounterVec
	checkpoint *prometheus.HistogramVec
}

var _ metrics.Recorder = (*Recorder)(nil)

// New makes the metrics and registers them with reg (for example
// prometheus.DefaultRegisterer, or a prometheus.NewRegistry()). It fails
// if reg already holds metrics of the same names.
func New(reg prometheus.Registerer) (*Recorder, error) {
	const ns = "falcon_ps"
	r := &Recorder{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Requests and one-way messages served, by role, node and wire op."}, []string{"role", "node", "op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "request_bytes_total",
			Help: "Body bytes of the requests (dir=in) and responses (dir=out) served, by role, node and op."}, []string{"role", "node", "op", "dir"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help: "Seconds from a request's receipt to its response, on the serving side, by role, node and op.", Buckets: LatencyBuckets}, []string{"role", "node", "op"}),
		staleness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "push_staleness",
			Help: "Staleness of admitted pushes in model updates: the version at admission minus the version the gradient was computed from.", Buckets: StalenessBuckets}),
		clock: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "worker_clock",
			Help: "The clock a worker last started."}, []string{"worker"}),
		blockedSum: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_blocked_seconds_total",
			Help: "Seconds a worker waited for its release after ending a clock."}, []string{"worker"}),
		blocked: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "worker_blocked_seconds",
			Help: "Seconds of each wait of a worker for its release.", Buckets: BlockedBuckets}, []string{"worker"}),
		rank: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "straggler_rank",
			Help: "The coordinator's rank of a worker by speed, 1 the slowest; 0 while unknown or after it left."}, []string{"worker"}),
		speed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "worker_speed_samples_per_second",
			Help: "The coordinator's estimate of a worker's throughput over its last clock."}, []string{"worker"}),
		leaseMiss: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "lease_misses_total",
			Help: "Peers found silent past their lease (by the coordinator, or a worker's coordinator by the worker), by the peer's role and node."}, []string{"role", "node"}),
		checkpoint: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "checkpoint_duration_seconds",
			Help: "Seconds per server checkpoint, by node and result (ok, error).", Buckets: CheckpointBuckets}, []string{"node", "result"}),
	}
	for _, c := range []prometheus.Collector{r.requests, r.bytes, r.latency, r.staleness, r.clock, r.blockedSum,
		r.blocked, r.rank, r.speed, r.leaseMiss, r.checkpoint} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// workerLabels are the label values of the first workers, made once.
var workerLabels = func() (l [256]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func worker(w int) string {
	if w >= 0 && w < len(workerLabels) {
		return workerLabels[w]
	}
	return strconv.Itoa(w)
}

// Request counts the request and its bytes and observes its latency.
func (r *Recorder) Request(q metrics.Request) {
	r.requests.WithLabelValues(q.Role, q.Node, q.Op).Inc()
	r.bytes.WithLabelValues(q.Role, q.Node, q.Op, "in").Add(float64(q.BytesIn))
	if !q.OneWay {
		r.bytes.WithLabelValues(q.Role, q.Node, q.Op, "out").Add(float64(q.BytesOut))
	}
	r.latency.WithLabelValues(q.Role, q.Node, q.Op).Observe(q.Duration.Seconds())
}

// Staleness observes an admitted push's staleness.
func (r *Recorder) Staleness(_, s int) { r.staleness.Observe(float64(s)) }

// Clock sets the worker's clock.
func (r *Recorder) Clock(w, c int) { r.clock.WithLabelValues(worker(w)).Set(float64(c)) }

// Blocked adds a wait for release.
func (r *Recorder) Blocked(w int, d time.Duration) {
	l := worker(w)
	r.blockedSum.WithLabelValues(l).Add(d.Seconds())
	r.blocked.WithLabelValues(l).Observe(d.Seconds())
}

// Straggler sets the worker's rank and speed.
func (r *Recorder) Straggler(w, rank int, speed float64) {
	l := worker(w)
	r.rank.WithLabelValues(l).Set(float64(rank))
	r.speed.WithLabelValues(l).Set(speed)
}

// LeaseMiss counts a peer found silent.
func (r *Recorder) LeaseMiss(role, peer string) { r.leaseMiss.WithLabelValues(role, peer).Inc() }

// Checkpoint observes a checkpoint's duration.
func (r *Recorder) Checkpoint(node string, d time.Duration, err error) {
	res := "ok"
	if err != nil {
		res = "error"
	}
	r.checkpoint.WithLabelValues(node, res).Observe(d.Seconds())
}
