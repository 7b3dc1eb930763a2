package ps

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// TestCluster_CertIdentityEnforcesRoles is finding 6 of issue 25 under
// per-node identity: a worker holding its own certificate (worker-0's,
// issued by the cluster's CA) that dials a server claiming to be
// "coordinator" and sends a flush, which only the coordinator may send,
// is refused at the handshake and changes nothing; the real
// coordinator's identical flush is accepted and applies the pending
// accumulation. Under a shared secret alone, the same impersonation (the
// worker holding the secret, claiming "coordinator") is accepted and
// flushes: a shared secret proves membership, not roles, as
// transport's doc says.
func TestCluster_CertIdentityEnforcesRoles(t *testing.T) {
	pki := transporttest.NewPKI(t, "falcon ps test CA")
	secret := []byte("falcon ps identity test secret, 32 bytes+")
	for _, mode := range []string{"certificates", "shared-secret"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cfg := ClusterConfig{Servers: 2, Workers: 1, TCP: true, Secret: secret,
				Store: StoreConfig{Optimizer: SGD{LR: 1}}, StartTimeout: 10 * time.Second}
			if mode == "certificates" {
				cfg.NodeTLS = func(n transport.NodeID) (*tls.Config, error) { return pki.TLS(t, n), nil }
			}
			c, err := NewCluster(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			client := func(tr transport.Transport) *Client {
				cl, err := NewClient(tr, c.ClientConfig())
				if err != nil {
					t.Fatal(err)
				}
				return cl
			}
			coord, worker := client(c.Transport(CoordinatorNode)), client(c.Transport(WorkerNode(0)))

			// worker-0's own credentials, under the name "coordinator".
			icfg := transport.TCPConfig{ID: CoordinatorNode, Secret: secret}
			if mode == "certificates" {
				icfg.TLS = pki.TLS(t, WorkerNode(0)) // its own certificate; it cannot get another
			}
			itr, err := transport.NewTCP(icfg, ClientHandler{})
			if err != nil {
				t.Fatal(err)
			}
			defer itr.Close()
			for i := range 2 {
				itr.AddPeer(ServerNode(i), c.Addr(ServerNode(i)))
			}
			impostor := client(itr)

			keys := []uint64{0, 1}
			if err := coord.Init(ctx, keys, []float32{10, 20}, nil); err != nil {
				t.Fatalf("coordinator init: %v", err)
			}
			if err := worker.do(ctx, wire.OpPush, keys, []float32{1, 2}, nil, nil, pushArgs{mode: wire.ModeAccumulate, clock: 0, scale: 1, weight: 1}); err != nil {
				t.Fatalf("worker push: %v", err)
			}
			snap := func() []float32 {
				out := make([]float32, 2)
				if err := worker.Pull(ctx, keys, out, nil); err != nil {
					t.Fatalf("pull: %v", err)
				}
				return out
			}
			applied := []float32{9, 18} // x -= 1·g once the flush applies
			err = impostor.Flush(ctx, 0, 1)
			if mode == "shared-secret" {
				if err != nil {
					t.Fatalf("under a shared secret the impostor's flush was refused (%v); the test's premise, that a secret does not enforce roles, no longer holds: update the docs", err)
				}
				if got := snap(); !slices.Equal(got, applied) {
					t.Fatalf("after the impostor's flush: %v, want %v", got, applied)
				}
				return
			}
			if !errors.Is(err, transport.ErrUnauthorized) {
				t.Fatalf("worker-0's certificate claiming coordinator: flush err = %v, want ErrUnauthorized (refused at the handshake)", err)
			}
			if got, want := snap(), []float32{10, 20}; !slices.Equal(got, want) {
				t.Fatalf("after the refused flush: %v, want %v unchanged", got, want)
			}
			// The same worker under its own name reaches the server and is
			// refused by the role check, naming it.
			own := icfg
			own.ID, own.CertIdentity = WorkerNode(0), true
			otr, err := transport.NewTCP(own, ClientHandler{})
			if err != nil {
				t.Fatal(err)
			}
			defer otr.Close()
			for i := range 2 {
				otr.AddPeer(ServerNode(i), c.Addr(ServerNode(i)))
			}
			if err := client(otr).Flush(ctx, 0, 1); !errors.Is(err, ErrForbidden) {
				t.Fatalf("worker-0's flush under its own name: %v, want ErrForbidden", err)
			}
			if err := coord.Flush(ctx, 0, 1); err != nil {
				t.Fatalf("the coordinator's flush: %v", err)
			}
			if got := snap(); !slices.Equal(got, applied) {
				t.Fatalf("after the coordinator's flush: %v, want %v", got, applied)
			}
		})
	}
}

// NodeTLS needs TCP and excludes TLS.
func TestClusterConfig_NodeTLS(t *testing.T) {
	nt := func(transport.NodeID) (*tls.Config, error) { return nil, errors.New("unused") }
	for _, c := range []ClusterConfig{
		{Servers: 1, Workers: 1, NodeTLS: nt},
		{Servers: 1, Workers: 1, TCP: true, NodeTLS: nt, TLS: &tls.Config{}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("TCP=%v TLS=%v NodeTLS set: Validate accepted", c.TCP, c.TLS != nil)
		}
	}
	c := ClusterConfig{Servers: 1, Workers: 1, TCP: true, NodeTLS: nt}
	if _, err := NewCluster(context.Background(), c); err == nil || !strings.Contains(err.Error(), "TLS identity: unused") {
		t.Errorf("NewCluster with a failing NodeTLS: %v, want its error", err)
	}
}
