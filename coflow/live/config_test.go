package live

import (
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/transport"
)

func TestConfigValidate(t *testing.T) {
	sebf, _ := coflow.NewScheduler("sebf")
	good := func() Config {
		c := DefaultConfig()
		c.Agents = []transport.NodeID{"a0", "a1"}
		c.Fabric, c.Scheduler = coflow.NewFabric(2, 1e6), sebf
		return c
	}
	if c := good(); c.Validate() != nil {
		t.Fatal(c.Validate())
	}
	for name, mod := range map[string]func(*Config){
		"no agents":    func(c *Config) { c.Agents = nil },
		"repeated":     func(c *Config) { c.Agents = []transport.NodeID{"a", "a"} },
		"ports":        func(c *Config) { c.Fabric = coflow.NewFabric(3, 1e6) },
		"no fabric":    func(c *Config) { c.Fabric = nil },
		"no scheduler": func(c *Config) { c.Scheduler = nil },
		"codec": func(c *Config) {
			c.Fabric.Codecs = []coflow.CodecProfile{{Name: "zstd", CompressSpeed: 1, DecompressSpeed: 1, Ratio: 0.5}}
		},
		"predictor":     func(c *Config) { c.Predictor = "crystal-ball" },
		"negative wait": func(c *Config) { c.AgentTimeout = -time.Second },
	} {
		c := good()
		mod(&c)
		if _, err := NewCoordinator(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a := DefaultAgentConfig()
	if _, err := NewAgent(a); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no coordinator: %v", err)
	}
	a.Coordinator = "coord"
	if _, err := NewAgent(a); err != nil {
		t.Error(err)
	}
	for name, mod := range map[string]func(*AgentConfig){
		"chunk":    func(c *AgentConfig) { c.ChunkBytes = MaxChunkBytes + 1 },
		"depth":    func(c *AgentConfig) { c.PipelineDepth = -1 },
		"timeouts": func(c *AgentConfig) { c.CoordinatorTimeout = time.Millisecond; c.ReportInterval = time.Second },
		"buffer":   func(c *AgentConfig) { c.MaxBufferedBytes = -1 },
	} {
		c := a
		mod(&c)
		if _, err := NewAgent(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
