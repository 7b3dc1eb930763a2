package live

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/transport"
)

// Bounds every decoder and buffer respects, whatever a Config says.
const (
	// MaxPorts bounds the agents of one coordinator (and a welcome
	// message's name list).
	MaxPorts = 1 << 12
	// MaxFlowsPerCoflow bounds a registered coflow's flows.
	MaxFlowsPerCoflow = 1 << 16
	// MaxNameBytes bounds a node name on the wire.
	MaxNameBytes = 255
	// MaxChunkBytes bounds a chunk's raw size (AgentConfig.ChunkBytes).
	MaxChunkBytes = 4 << 20
	// maxEntries bounds the list of one report or push.
	maxEntries = 1 << 20
)

// Config configures a Coordinator. Zero fields take the defaults of
// DefaultConfig except where a field says otherwise.
type Config struct {
	// Agents names the agents in port order: Agents[p] runs port p of
	// Fabric. Required, 1..MaxPorts names, no duplicates.
	Agents []transport.NodeID
	// Fabric gives each port's ingress and egress capacity (bytes/s) and
	// cores, and the codecs flows may use (profiles named "lz4" or
	// "snappy", the codecs agents run) with their starting profiles per data
	// class. The coordinator copies it; the codec profiles of its copy are
	// replaced by live predictions before every Schedule call. Required,
	// len(Ports) == len(Agents).
	Fabric *coflow.Fabric
	// Scheduler decides every allocation, run unchanged on live state.
	// Required. It is called from one goroutine at a time; its optional
	// capabilities (coflow.EventDriven, coflow.Timer) select the
	// rescheduling rules, as in coflow.Sim.
	Scheduler coflow.Scheduler
	// Predictor names the predictor (predictor.New) that turns the agents'
	// codec measurements into the profiles schedulers see, one per (data
	// class, codec). Empty means "ewma".
	Predictor string
	// PredictorConfig configures it; its Default is ignored (each
	// predictor starts from the Fabric's profile).
	PredictorConfig predictor.Config
	// CoalesceFlowEvents is coflow.Config.CoalesceFlowEvents: a scheduler
	// that is not EventDriven is called on a flow completion at once only
	// if this long has passed since its last call, otherwise once at last
	// call + CoalesceFlowEvents. Zero means a call at every flow completion.
	CoalesceFlowEvents time.Duration
	// AgentTimeout is how long an agent may go without a report (agents
	// report every AgentConfig.ReportInterval) before it is declared dead
	// and its coflows fail with ErrAgentDead. Zero means 2 s.
	AgentTimeout time.Duration
	// PushTimeout bounds one allocation push to one agent. Zero means 1 s.
	PushTimeout time.Duration
	// MaxCoflows bounds the coflows registered at once (finished ones count
	// until unregistered). Zero means 1024.
	MaxCoflows int
	// MaxFlowBytes bounds one flow's raw size. Zero means 1 GiB.
	MaxFlowBytes int64
	// OnComplete, if not nil, is called (from the coordinator's goroutine,
	// so it must return promptly) with each coflow's result as it
	// completes or fails.
	OnComplete func(Result)
}

// DefaultConfig returns the defaults (Agents, Fabric and Scheduler still
// need setting).
func DefaultConfig() Config {
	return Config{
		Predictor:    predictor.NameEWMA,
		AgentTimeout: 2 * time.Second,
		PushTimeout:  time.Second,
		MaxCoflows:   1024,
		MaxFlowBytes: 1 << 30,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Predictor == "" {
		c.Predictor = d.Predictor
	}
	if c.AgentTimeout == 0 {
		c.AgentTimeout = d.AgentTimeout
	}
	if c.PushTimeout == 0 {
		c.PushTimeout = d.PushTimeout
	}
	if c.MaxCoflows == 0 {
		c.MaxCoflows = d.MaxCoflows
	}
	if c.MaxFlowBytes == 0 {
		c.MaxFlowBytes = d.MaxFlowBytes
	}
	return c
}

// Validate checks the configuration (zeros mean defaults).
func (c *Config) Validate() error {
	x := c.withDefaults()
	if len(x.Agents) == 0 || len(x.Agents) > MaxPorts {
		return fmt.Errorf("%w: %d agents (want 1..%d)", ErrInvalidConfig, len(x.Agents), MaxPorts)
	}
	seen := make(map[transport.NodeID]bool, len(x.Agents))
	for _, a := range x.Agents {
		if a == "" || len(a) > MaxNameBytes || seen[a] {
			return fmt.Errorf("%w: agent name %q empty, too long or repeated", ErrInvalidConfig, a)
		}
		seen[a] = true
	}
	if x.Fabric == nil {
		return fmt.Errorf("%w: no fabric", ErrInvalidConfig)
	}
	if err := x.Fabric.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(x.Fabric.Ports) != len(x.Agents) {
		return fmt.Errorf("%w: %d ports for %d agents", ErrInvalidConfig, len(x.Fabric.Ports), len(x.Agents))
	}
	for k, p := range x.Fabric.Codecs {
		if codecKind(p.Name) == kindRaw {
			return fmt.Errorf("%w: codec %d is %q (want lz4 or snappy)", ErrInvalidConfig, k+1, p.Name)
		}
	}
	if x.Scheduler == nil {
		return fmt.Errorf("%w: no scheduler", ErrInvalidConfig)
	}
	if _, err := predictor.New(x.Predictor, x.PredictorConfig); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if x.CoalesceFlowEvents < 0 || x.AgentTimeout < 0 || x.PushTimeout < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if x.MaxCoflows < 0 || x.MaxFlowBytes < 0 {
		return fmt.Errorf("%w: negative bound", ErrInvalidConfig)
	}
	return nil
}

// AgentConfig configures an Agent. Zero fields take the defaults of
// DefaultAgentConfig except where a field says otherwise.
type AgentConfig struct {
	// Coordinator is the coordinator's node name. Required.
	Coordinator transport.NodeID
	// ChunkBytes is the raw size of one chunk, the unit that is compressed,
	// paced and sent. Zero means coflow.DefaultChunkBytes (64 KiB); at most
	// MaxChunkBytes.
	ChunkBytes int
	// PipelineDepth is how many chunks of one flow may be in the compress
	// stage and, separately, on the wire at once (compress → send →
	// decompress overlap by this many chunks). Zero means 4.
	PipelineDepth int
	// ReportInterval is how often the agent reports its flows' progress
	// and codec measurements to the coordinator (a report is also the
	// agent's heartbeat); a finished flow is reported at once. Zero means
	// 50 ms.
	ReportInterval time.Duration
	// ReportTimeout bounds one report. Zero means 1 s.
	ReportTimeout time.Duration
	// CoordinatorTimeout: when no report has been answered for this long,
	// the coordinator is declared dead and every coflow the agent knows
	// fails with ErrCoordinatorDead. Zero means 2 s.
	CoordinatorTimeout time.Duration
	// ChunkTimeout bounds one chunk's delivery to the receiving agent
	// (decompression included). Zero means 10 s.
	ChunkTimeout time.Duration
	// AnnounceTimeout bounds how long Send waits for the coordinator to
	// tell this agent about the flow after registration. Zero means 2 s.
	AnnounceTimeout time.Duration
	// MaxBufferedBytes bounds the raw bytes of flows being received or
	// received and not yet taken by Receive; a chunk of a new flow over the
	// bound is refused. Zero means 1 GiB.
	MaxBufferedBytes int64
	// MaxWorkers caps each codec worker pool whatever the cores granted.
	// Zero means runtime.NumCPU().
	MaxWorkers int
	// SpeedPerGrantedCore makes the agent report codec speeds per granted
	// core-second instead of per CPU-second of the worker thread: each
	// codec job costs share·(release − start), the wall time it held its
	// pool slot (from taking it to freeing it after the duty-cycle hold)
	// times the cores the scheduler granted per slot (cores/⌈cores⌉), at
	// least its CPU time (and its CPU time when no cores were granted), so
	// raw bytes over summed cost is the rate the pool achieves for the
	// cores it was granted, stalls (a CFS quota shared with the agent's
	// networking, a busy machine) included. False (the zero value and the
	// default) keeps CPU time, which cannot see such stalls. See the
	// package doc, "Codec profiles".
	SpeedPerGrantedCore bool
}

// DefaultAgentConfig returns the defaults (Coordinator still needs setting).
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{
		ChunkBytes:         coflow.DefaultChunkBytes,
		PipelineDepth:      4,
		ReportInterval:     50 * time.Millisecond,
		ReportTimeout:      time.Second,
		CoordinatorTimeout: 2 * time.Second,
		ChunkTimeout:       10 * time.Second,
		AnnounceTimeout:    2 * time.Second,
		MaxBufferedBytes:   1 << 30,
		MaxWorkers:         runtime.NumCPU(),
	}
}

func (c AgentConfig) withDefaults() AgentConfig {
	d := DefaultAgentConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = d.ChunkBytes
	}
	if c.PipelineDepth == 0 {
		c.PipelineDepth = d.PipelineDepth
	}
	set(&c.ReportInterval, d.ReportInterval)
	set(&c.ReportTimeout, d.ReportTimeout)
	set(&c.CoordinatorTimeout, d.CoordinatorTimeout)
	set(&c.ChunkTimeout, d.ChunkTimeout)
	set(&c.AnnounceTimeout, d.AnnounceTimeout)
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = d.MaxBufferedBytes
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = d.MaxWorkers
	}
	return c
}

// Validate checks the configuration (zeros mean defaults).
func (c *AgentConfig) Validate() error {
	x := c.withDefaults()
	if x.Coordinator == "" || len(x.Coordinator) > MaxNameBytes {
		return fmt.Errorf("%w: coordinator name %q", ErrInvalidConfig, x.Coordinator)
	}
	if x.ChunkBytes < 1 || x.ChunkBytes > MaxChunkBytes {
		return fmt.Errorf("%w: ChunkBytes %d (want 1..%d)", ErrInvalidConfig, x.ChunkBytes, MaxChunkBytes)
	}
	if x.PipelineDepth < 1 || x.PipelineDepth > 1024 {
		return fmt.Errorf("%w: PipelineDepth %d (want 1..1024)", ErrInvalidConfig, x.PipelineDepth)
	}
	for _, d := range []time.Duration{x.ReportInterval, x.ReportTimeout, x.CoordinatorTimeout, x.ChunkTimeout, x.AnnounceTimeout} {
		if d <= 0 {
			return fmt.Errorf("%w: non-positive duration %v", ErrInvalidConfig, d)
		}
	}
	if x.CoordinatorTimeout < x.ReportInterval {
		return fmt.Errorf("%w: CoordinatorTimeout %v below ReportInterval %v", ErrInvalidConfig, x.CoordinatorTimeout, x.ReportInterval)
	}
	if x.MaxBufferedBytes < 1 || x.MaxWorkers < 1 || x.MaxWorkers > math.MaxInt32 {
		return fmt.Errorf("%w: MaxBufferedBytes %d, MaxWorkers %d", ErrInvalidConfig, x.MaxBufferedBytes, x.MaxWorkers)
	}
	return nil
}
