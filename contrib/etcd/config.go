package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/falconml/falcon/ps"
	"go.uber.org/zap"
)

// DefaultPrefix is the key prefix used when Config.Prefix is empty.
const DefaultPrefix = "/falcon/"

// Config configures a Backend: where etcd is, the namespace of its keys,
// and the timing of its leases. Zero values mean the defaults stated on
// each field (DefaultConfig fills them in).
type Config struct {
	// Endpoints lists etcd's client URLs ("127.0.0.1:2379" or
	// "http://10.0.0.5:2379"). Required by Open; NewBackend ignores it.
	Endpoints []string
	// Prefix is put before every key the Backend reads or writes, so that
	// jobs sharing one etcd cluster never meet: give each job its own
	// ("/falcon/job-17/"). It must begin and end with "/". Empty means
	// DefaultPrefix.
	Prefix string
	// TTL is a lease's time to live, in whole seconds. A leader whose
	// process dies is replaced after at most TTL plus the server's expiry
	// sweep (500 ms in etcd) and one watch delivery; a leader cut off from
	// etcd sees Lost close no later than TTL after the start of its last
	// successful renewal. The server may raise a TTL to its minimum (1.5
	// election timeouts rounded up to whole seconds: 2 s with etcd's
	// defaults); the TTL it grants is the one used. Zero means 10 s.
	TTL time.Duration
	// DialTimeout bounds connecting to etcd in Open; zero means 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds each call to etcd that the caller's context
	// leaves unbounded or bounds more loosely; zero means 5 s.
	RequestTimeout time.Duration
	// MaxValue bounds a state kept by a Store (the coordinator's): Save
	// refuses a larger one and Load one whose head says it is larger. A
	// Store cuts a state into chunks and writes at most 1 MiB a request
	// (etcd's --max-request-bytes is 1.5 MiB by default). Zero means
	// ps.MaxCoordinatorState (64 MiB).
	MaxValue int
	// StopTimeout bounds RunStandby's wait for its RunFunc to return once
	// leadership is lost; zero means 10 s.
	StopTimeout time.Duration
	// Logger receives the etcd client's log; nil means the client's
	// default (warnings and errors to stderr).
	Logger *zap.Logger
	// TLS, when not nil, is used to reach etcd over TLS (client
	// certificates for etcd's --client-cert-auth go in it). Nil means
	// plain connections (or those the endpoints' https:// scheme asks
	// for, without client certificates).
	TLS *tls.Config
	// Username and Password authenticate to etcd when its auth is
	// enabled; empty means no authentication.
	Username, Password string
	// Name identifies this candidate: it is the value of its election key,
	// which Election.Leader returns. Empty means "<hostname>-<pid>".
	Name string
}

// DefaultConfig returns a Config with every default filled in and no
// Endpoints.
func DefaultConfig() Config {
	return Config{
		Prefix:         DefaultPrefix,
		TTL:            10 * time.Second,
		DialTimeout:    5 * time.Second,
		RequestTimeout: 5 * time.Second,
		MaxValue:       ps.MaxCoordinatorState,
		StopTimeout:    10 * time.Second,
		Name:           defaultName(),
	}
}

func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "host"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

// Validate checks the configuration; zero values are valid (they mean
// the defaults). It does not require Endpoints: Open does.
func (c *Config) Validate() error {
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/")) {
		return fmt.Errorf("etcd: Config.Prefix %q must begin and end with \"/\"", c.Prefix)
	}
	if c.TTL < 0 || c.DialTimeout < 0 || c.RequestTimeout < 0 || c.StopTimeout < 0 {
		return errors.New("etcd: negative duration in Config")
	}
	if c.TTL%time.Second != 0 {
		return fmt.Errorf("etcd: Config.TTL %v is not a whole number of seconds (etcd leases count seconds)", c.TTL)
	}
	if c.TTL > 24*time.Hour {
		return fmt.Errorf("etcd: Config.TTL %v is over 24h: a dead leader would hold the job that long", c.TTL)
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("etcd: Config.Password without Config.Username")
	}
	if c.MaxValue < 0 {
		return errors.New("etcd: negative Config.MaxValue")
	}
	for _, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			return errors.New("etcd: empty endpoint in Config.Endpoints")
		}
	}
	return nil
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Prefix == "" {
		c.Prefix = d.Prefix
	}
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.MaxValue == 0 {
		c.MaxValue = d.MaxValue
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = d.StopTimeout
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	return c
}
