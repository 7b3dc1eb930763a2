package clusterbin

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/falconml/falcon/ps"
)

// -lease and -lost-worker (or FALCON_LEASE and FALCON_LOST_WORKER) reach
// the cluster's LeaseConfig, the workers heartbeat often enough for the
// lease, and bad values are refused as usage errors.
func TestLeaseFlags(t *testing.T) {
	base := []string{"-role=coordinator", "-secret=0123456789abcdef0123", "-peers=coordinator=127.0.0.1:7000,server-0=127.0.0.1:7001,server-1=127.0.0.1:7002,worker-0=127.0.0.1:7003,worker-1=127.0.0.1:7004,worker-2=127.0.0.1:7005"}
	none := func(string) (string, bool) { return "", false }
	cfgOf := func(args []string, lookup func(string) (string, bool)) ps.ClusterConfig {
		t.Helper()
		o, _, err := parseArgs(append(base, args...), lookup, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		peers, listen, err := o.book()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.clusterConfig(peers, listen)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if c := cfgOf(nil, none); c.Lease.Timeout != 10*time.Second || c.Lease.OnWorkerLost != ps.AbortRun || c.Heartbeat != 500*time.Millisecond {
		t.Errorf("defaults: lease %+v, heartbeat %v; want 10s, AbortRun, 500ms", c.Lease, c.Heartbeat)
	}
	if c := cfgOf([]string{"-lease=2s", "-lost-worker=continue"}, none); c.Lease.Timeout != 2*time.Second || c.Lease.OnWorkerLost != ps.ContinueWithout || c.Heartbeat != 250*time.Millisecond {
		t.Errorf("-lease=2s -lost-worker=continue: lease %+v, heartbeat %v", c.Lease, c.Heartbeat)
	}
	env := map[string]string{"FALCON_LEASE": "3s", "FALCON_LOST_WORKER": "continue"}
	if c := cfgOf(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); c.Lease.Timeout != 3*time.Second || c.Lease.OnWorkerLost != ps.ContinueWithout {
		t.Errorf("FALCON_LEASE=3s FALCON_LOST_WORKER=continue: lease %+v", c.Lease)
	}
	for _, bad := range [][]string{{"-lease=0s"}, {"-lease=-1s"}, {"-lost-worker=retry"}} {
		if _, _, err := parseArgs(append(base, bad...), none, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
