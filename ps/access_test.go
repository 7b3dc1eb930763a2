package ps

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// TestServer_RoleChecks: in a cluster with workers, a flush from a worker,
// a server or a node outside the cluster, and a write from an outsider,
// are refused with ErrForbidden naming the op and the sender, and leave
// the store as it was; the coordinator's flush then applies the pending
// accumulation (so the refused flushes had something to change). Over the
// in-process network and over TCP with a secret, where the sender is the
// name its connection proved.
func TestServer_RoleChecks(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		name := "inmem"
		if tcp {
			name = "tcp-secret"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			secret := []byte("role-check-secret")
			c, err := NewCluster(ctx, ClusterConfig{Servers: 2, Workers: 2, TCP: tcp, Secret: secret,
				Store: StoreConfig{Optimizer: SGD{LR: 1}}, StartTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			client := func(n transport.NodeID) *Client {
				cl, err := NewClient(c.Transport(n), c.ClientConfig())
				if err != nil {
					t.Fatal(err)
				}
				return cl
			}
			coord, worker := client(CoordinatorNode), client(WorkerNode(0))
			// server-0 speaking to server-1 (a TCP node cannot reach itself).
			server, err := NewClient(c.Transport(ServerNode(0)), ClientConfig{Servers: []transport.NodeID{ServerNode(1)}})
			if err != nil {
				t.Fatal(err)
			}
			var outsider *Client
			var outTr transport.Transport
			if tcp {
				tr, err := transport.NewTCP(transport.TCPConfig{ID: "intruder", Secret: secret}, ClientHandler{})
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				for i := range 2 {
					tr.AddPeer(ServerNode(i), c.Addr(ServerNode(i)))
				}
				tr.AddPeer(CoordinatorNode, c.Addr(CoordinatorNode))
				outTr = tr
				outsider, err = NewClient(tr, c.ClientConfig())
				if err != nil {
					t.Fatal(err)
				}
			} else {
				tr, err := c.Network().Join("intruder", ClientHandler{})
				if err != nil {
					t.Fatal(err)
				}
				outTr = tr
				outsider, err = NewClient(tr, c.ClientConfig())
				if err != nil {
					t.Fatal(err)
				}
			}

			keys := []uint64{0, 1}
			if err := coord.Init(ctx, keys, []float32{10, 20}, nil); err != nil {
				t.Fatalf("coordinator init: %v", err)
			}
			// A worker's accumulated push for clock 0, waiting for its flush.
			if err := worker.do(ctx, wire.OpPush, keys, []float32{1, 2}, nil, nil, pushArgs{mode: wire.ModeAccumulate, clock: 0, scale: 1, weight: 1}); err != nil {
				t.Fatalf("worker push: %v", err)
			}
			snap := func() []float32 {
				out := make([]float32, 2)
				if err := outsider.Pull(ctx, keys, out, nil); err != nil { // reads are open
					t.Fatalf("outsider pull: %v", err)
				}
				return out
			}
			before := snap()
			refused := []struct {
				who  string
				from transport.NodeID
				op   string
				do   func() error
			}{
				{"worker flush", WorkerNode(0), "flush", func() error { return worker.Flush(ctx, 0, 1) }},
				{"server flush", ServerNode(0), "flush", func() error { return server.Flush(ctx, 0, 1) }},
				{"outsider flush", "intruder", "flush", func() error { return outsider.Flush(ctx, 0, 1) }},
				{"outsider push", "intruder", "push", func() error { return outsider.Push(ctx, keys, []float32{5, 5}, nil) }},
				{"outsider pushpull", "intruder", "pushpull", func() error {
					return outsider.PushPull(ctx, keys, []float32{5, 5}, make([]float32, 2), nil)
				}},
				{"outsider init", "intruder", "init", func() error { return outsider.Init(ctx, []uint64{7}, []float32{1}, nil) }},
				{"server push", ServerNode(0), "push", func() error {
					// by hand: server-1 may hold neither key, so a Client would
					// not send it
					e := wire.NewMsg(nil, wire.OpPush)
					e.U8(wire.ModeApply)
					e.I64(0)
					e.F64(1)
					e.F64(1)
					e.U32(1)
					e.U64(keys[0])
					e.U32(1)
					e.Pad4()
					e.F32s([]float32{5})
					_, err := server.call(ctx, 0, e.B)
					return err
				}},
			}
			for _, r := range refused {
				err := r.do()
				if !errors.Is(err, ErrForbidden) {
					t.Errorf("%s: err = %v, want ErrForbidden", r.who, err)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, r.op) || !strings.Contains(msg, string(r.from)) {
					t.Errorf("%s: %q does not name the op %q and the sender %q", r.who, msg, r.op, r.from)
				}
			}
			if got := snap(); !slices.Equal(got, before) {
				t.Errorf("after the refused requests the values are %v, want %v", got, before)
			}
			for i := range 2 {
				c.Server(i).View(func(s *Store) {
					if _, ok := s.Len(7); ok {
						t.Errorf("server %d holds key 7 from a refused init", i)
					}
				})
			}
			// The coordinator serves workers only: an outsider's hello and
			// heartbeat are refused, naming it.
			for _, o := range []op{wire.OpHello, wire.OpHeartbeat} {
				e := wire.NewMsg(nil, o)
				if o == wire.OpHello {
					e.I64(0)
				}
				e.U64(1)
				resp, err := outTr.Request(ctx, CoordinatorNode, e.B)
				if err == nil {
					_, err = wire.ParseResponse(resp, "coordinator")
				}
				if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "intruder") {
					t.Errorf("outsider's op %d to the coordinator: err = %v, want ErrForbidden naming intruder", o, err)
				}
			}
			// The coordinator's flush applies the accumulated push: x -= 1·g.
			if err := coord.Flush(ctx, 0, 1); err != nil {
				t.Fatalf("coordinator flush: %v", err)
			}
			if got, want := snap(), []float32{9, 18}; !slices.Equal(got, want) {
				t.Errorf("after the coordinator's flush: %v, want %v", got, want)
			}
		})
	}
}

// TestAccess_Table: every server op against every kind of sender.
func TestAccess_Table(t *testing.T) {
	a := ClusterAccess(2, 3)
	senders := []transport.NodeID{CoordinatorNode, "server-1", "worker-2", "worker-3", "client-0"}
	want := map[op]string{ // the senders allowed, by index into senders
		wire.OpPing: "01234", wire.OpLayout: "01234", wire.OpPull: "01234",
		wire.OpInit: "02", wire.OpPush: "02", wire.OpPushID: "02", wire.OpPushPull: "02", wire.OpPushPullID: "02",
		wire.OpFlush: "0",
	}
	for o, allowed := range want {
		for i, s := range senders {
			err := a.check("server-0", s, o)
			ok := strings.ContainsRune(allowed, rune('0'+i))
			if ok != (err == nil) || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Errorf("%s from %s: err = %v, want allowed=%v", opName(o), s, err, ok)
			}
		}
	}
	if err := (Access{}).check("s", "anyone", wire.OpFlush); err != nil {
		t.Errorf("zero Access refuses: %v", err)
	}
}
