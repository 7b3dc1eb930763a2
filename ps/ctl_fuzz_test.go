package ps

import (
	"context"
	"testing"

	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

// FuzzClusterControl feeds arbitrary bytes to a Cluster node's handler
// (the control layer around a server) by every path a transport uses: no
// input panics, a control request from anyone but the coordinator never
// ends the run, and role traffic still reaches the server.
func FuzzClusterControl(f *testing.F) {
	for _, op := range []byte{ctlPing, ctlStats, ctlShutdown, ctlAbort, 99} {
		f.Add(ctlMsg(op), "coordinator")
		f.Add(ctlMsg(op, 1, 2), "worker-0")
	}
	f.Add(ctlNote(ctlAbort, "ps: peer lost: worker worker-1"), "coordinator")
	f.Add(ctlNote(ctlShutdown, "the run went on without lost workers: worker-1"), "worker-0")
	f.Add([]byte{0xFE, 'F', 'C'}, "coordinator")
	f.Add(wire.NewMsg(nil, wire.OpPing).B, "worker-0")
	f.Fuzz(func(t *testing.T, req []byte, from string) {
		s, err := NewServer("server-0", DefaultServerConfig())
		if err != nil {
			t.Fatal(err)
		}
		h := ctlServer{newCtlHandler(s), s}
		ctx := context.Background()
		id := transport.NodeID(from)
		h.HandleRequest(ctx, id, req)
		h.HandleRequestAppend(ctx, id, req, nil)
		if len(req) > 1 {
			h.HandleRequestV(ctx, id, [][]byte{req[:1], req[1:]}, nil)
		}
		h.HandleMessage(id, req)
		if id != CoordinatorNode {
			select {
			case <-h.shutdown:
				t.Fatalf("%q ended the run", from)
			case <-h.aborted:
				t.Fatalf("%q aborted the run", from)
			default:
			}
		}
	})
}
