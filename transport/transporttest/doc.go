// Package transporttest holds the conformance suite every
// [transport.Transport] must pass, and handler fakes for tests.
//
// # Overview
//
// [Run] checks the contract of package transport: request/response
// (including empty and 64 KiB bodies), per-sender FIFO of one-way
// messages from concurrent senders, that Send copies the caller's bytes,
// 6 MiB messages both ways, 32 concurrent callers multiplexed on one peer,
// cancellation and deadlines, prompt failure of calls in flight to a
// crashed node (ErrUnreachable), unknown peers, Close semantics (ErrClosed)
// and handler errors delivered as *transport.RemoteError.
//
// The fakes: [Echo] answers with the request; [Funcs] adapts two
// functions; [Recorder] records messages in arrival order, counts
// requests, and lets a test wait for n messages. [WithHooks] wraps any
// Transport with fault-injection hooks (refuse or rewrite requests, drop
// messages with [ErrDrop]), for faults the transport itself does not model.
//
// # Usage
//
//	func TestMyTransport(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
//			c := &transporttest.Cluster{}
//			for i, h := range hs {
//				n := newMyNode(t, fmt.Sprint("node", i), h) // connected to the others
//				t.Cleanup(func() { n.Close() })
//				c.Nodes = append(c.Nodes, n)
//			}
//			return c
//		})
//	}
package transporttest
