package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconml/falcon/internal/clusterbin"
)

const peers = "-peers=coordinator=127.0.0.1:7000,server-0=127.0.0.1:7001,worker-0=127.0.0.1:7002"

// TestFlags_Refused: the -etcd-* flags and their environment variables
// are read, and what cannot work is refused as bad flags (exit 2) naming
// the flag, before anything runs.
func TestFlags_Refused(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no run id", []string{"-etcd-endpoints=127.0.0.1:2379"}, nil, "-run-id"},
		{"no run id from env", nil, map[string]string{"FALCON_ETCD_ENDPOINTS": "127.0.0.1:2379"}, "-run-id"},
		{"with coordinator dir", []string{"-etcd-endpoints=127.0.0.1:2379", "-run-id=r", "-coordinator-dir=/tmp/x"}, nil, "-coordinator-dir"},
		{"bad prefix", []string{"-etcd-endpoints=127.0.0.1:2379", "-run-id=r", "-etcd-prefix=falcon"}, nil, "Prefix"},
		{"bad ttl from env", []string{"-etcd-endpoints=127.0.0.1:2379", "-run-id=r"}, map[string]string{"FALCON_ETCD_TTL": "1500ms"}, "whole number of seconds"},
		{"cert without key", []string{"-etcd-endpoints=127.0.0.1:2379", "-run-id=r", "-etcd-cert=c.pem"}, nil, "-etcd-key"},
		{"missing CA file", []string{"-etcd-endpoints=127.0.0.1:2379", "-run-id=r", "-etcd-ca=/nonexistent/ca.pem"}, nil, "-etcd-ca"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"-role=coordinator", "-servers=1", "-workers=1", "-listen=127.0.0.1:7000", peers}, c.args...)
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			if code := clusterbin.Run(args, lookup, &out, &errb, extension(&flags{})); code != 2 {
				t.Fatalf("exit %d, want 2 (bad flags); stderr:\n%s", code, errb.String())
			}
			if !strings.Contains(errb.String(), c.want) {
				t.Errorf("stderr does not name %q:\n%s", c.want, errb.String())
			}
		})
	}
}

// TestFlags_Config: the flags become the etcd.Config (prefix from the run
// id by default, endpoints split and trimmed, the TTL).
func TestFlags_Config(t *testing.T) {
	f := &flags{endpoints: "10.0.0.1:2379, 10.0.0.2:2379", ttl: 5 * time.Second}
	cfg, err := f.config(clusterbin.Settings{RunID: "job-17"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prefix != "/falcon/job-17/" || len(cfg.Endpoints) != 2 || cfg.Endpoints[1] != "10.0.0.2:2379" || cfg.TTL != 5*time.Second {
		t.Errorf("config %+v", cfg)
	}
	f.prefix = "/other/"
	if cfg, err = f.config(clusterbin.Settings{RunID: "job-17"}); err != nil || cfg.Prefix != "/other/" {
		t.Errorf("-etcd-prefix: %q, %v", cfg.Prefix, err)
	}
}

// TestRunBound_RetriesAddressInUse: a coordinator whose address is still
// bound (the deposed leader closing its listener) is started again until
// it binds, within the wait; another error, or the wait passed, is
// returned at once.
func TestRunBound_RetriesAddressInUse(t *testing.T) {
	s := clusterbin.Settings{Out: io.Discard}
	inUse := fmt.Errorf("start: ps: coordinator: transport: listen on 127.0.0.1:7000: %w", syscall.EADDRINUSE)
	calls := 0
	err := runBound(context.Background(), s, 10*time.Second, func() error {
		if calls++; calls < 3 {
			return inUse
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("runBound = %v after %d calls, want nil after 3", err, calls)
	}
	other := errors.New("other")
	calls = 0
	if err := runBound(context.Background(), s, 10*time.Second, func() error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("another error: %v after %d calls, want it after 1", err, calls)
	}
	calls = 0
	if err := runBound(context.Background(), s, 0, func() error { calls++; return inUse }); !errors.Is(err, syscall.EADDRINUSE) || calls != 1 {
		t.Fatalf("no wait: %v after %d calls, want EADDRINUSE after 1", err, calls)
	}
}
