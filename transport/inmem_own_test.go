package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// slowReader is a handler that, once started, keeps reading req (and, as
// an AppendHandler, writing dst) for a while after its ctx ends, then
// records whether req kept its content the whole time and returns.
type slowReader struct {
	started  chan struct{}
	linger   time.Duration
	returned atomic.Bool
	changed  atomic.Bool
}

func (h *slowReader) read(ctx context.Context, req, dst []byte) []byte {
	want := bytes.Clone(req)
	close(h.started)
	<-ctx.Done()
	deadline := time.Now().Add(h.linger)
	for time.Now().Before(deadline) {
		if !bytes.Equal(req, want) {
			h.changed.Store(true)
		}
		dst = append(dst[:0], req...)
	}
	h.returned.Store(true)
	return dst
}

func (h *slowReader) HandleRequest(ctx context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
	return h.read(ctx, req, nil), nil
}

func (h *slowReader) HandleRequestAppend(ctx context.Context, _ transport.NodeID, req, dst []byte) ([]byte, error) {
	return h.read(ctx, req, dst), nil
}

func (*slowReader) HandleMessage(transport.NodeID, []byte) {}

// TestInmem_CancelWaitsForBorrowingHandler: a caller that gives up while
// the handler still reads its request (and writes its dst) returns only
// after the handler has returned, so it may overwrite both at once. Run
// with -race this also proves there is no data race.
func TestInmem_CancelWaitsForBorrowingHandler(t *testing.T) {
	for _, appendMode := range []bool{false, true} {
		t.Run(map[bool]string{false: "Request", true: "RequestAppend"}[appendMode], func(t *testing.T) {
			n := transport.NewInmemNetwork()
			defer n.Close()
			h := &slowReader{started: make(chan struct{}), linger: 20 * time.Millisecond}
			if _, err := n.Join("srv", h); err != nil {
				t.Fatal(err)
			}
			cl, err := n.Join("cl", transporttest.Echo{})
			if err != nil {
				t.Fatal(err)
			}
			req := bytes.Repeat([]byte("gradient"), 1000)
			dst := make([]byte, 0, 2*len(req))
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-h.started
				cancel()
			}()
			if appendMode {
				_, err = cl.RequestAppend(ctx, dst, "srv", req)
			} else {
				_, err = cl.Request(ctx, "srv", req)
			}
			if err != context.Canceled {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if !h.returned.Load() {
				t.Fatal("Request returned while the handler was still using the caller's buffers")
			}
			for i := range req { // the caller reuses its buffers at once
				req[i] = 0
			}
			_ = append(dst[:0], req...) // overwrite the caller's response buffer too
			if h.changed.Load() {
				t.Fatal("the handler saw the request change under it")
			}
		})
	}
}

// TestInmem_CancelBeforeHandlerReturnsAtOnce: a request abandoned while
// it is still delayed on the network returns at once, without waiting for
// the delay, and its handler never runs.
func TestInmem_CancelBeforeHandlerReturnsAtOnce(t *testing.T) {
	n := transport.NewInmemNetwork()
	defer n.Close()
	rec := &transporttest.Recorder{}
	if _, err := n.Join("srv", rec); err != nil {
		t.Fatal(err)
	}
	cl, _ := n.Join("cl", transporttest.Echo{})
	n.SetDelay(300*time.Millisecond, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := cl.Request(ctx, "srv", []byte("x")); err != context.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("abandoned request returned after %v, want about 10ms", d)
	}
	time.Sleep(400 * time.Millisecond)
	if got := rec.NumRequests(); got != 0 {
		t.Fatalf("handler ran %d times for an abandoned request", got)
	}
}

// inPlace is an AppendHandler that answers with req reversed, written into
// the transport's buffer; it records the buffers it saw.
type inPlace struct {
	req, dst, resp []byte
}

func (h *inPlace) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return h.HandleRequestAppend(ctx, from, req, nil)
}

func (h *inPlace) HandleRequestAppend(_ context.Context, _ transport.NodeID, req, dst []byte) ([]byte, error) {
	h.req, h.dst = req, dst
	for i := len(req) - 1; i >= 0; i-- {
		dst = append(dst, req[i])
	}
	h.resp = dst
	return dst, nil
}

func (*inPlace) HandleMessage(transport.NodeID, []byte) {}

// TestInmem_ZeroCopy: without compression the handler reads the caller's
// request itself, Request returns the handler's response itself, and
// RequestAppend to an AppendHandler has the response written into dst.
func TestInmem_ZeroCopy(t *testing.T) {
	n := transport.NewInmemNetwork()
	defer n.Close()
	h := &inPlace{}
	if _, err := n.Join("srv", h); err != nil {
		t.Fatal(err)
	}
	cl, _ := n.Join("cl", transporttest.Echo{})
	ctx := context.Background()
	req := []byte("abcdef")

	resp, err := cl.Request(ctx, "srv", req)
	if err != nil || string(resp) != "fedcba" {
		t.Fatalf("Request = %q, %v", resp, err)
	}
	if &h.req[0] != &req[0] {
		t.Error("the handler got a copy of the request")
	}
	if &h.resp[0] != &resp[0] {
		t.Error("the caller got a copy of the response")
	}

	dst := append(make([]byte, 0, 64), "hdr:"...)
	out, err := cl.RequestAppend(ctx, dst, "srv", req)
	if err != nil || string(out) != "hdr:fedcba" {
		t.Fatalf("RequestAppend = %q, %v", out, err)
	}
	if &out[0] != &dst[0] || &h.dst[:1][0] != &dst[:5][4] {
		t.Error("RequestAppend did not have the response written into dst")
	}

	small := make([]byte, 1, 2) // too small: the handler grows it, the transport keeps the prefix
	small[0] = '>'
	out, err = cl.RequestAppend(ctx, small, "srv", req)
	if err != nil || string(out) != ">fedcba" {
		t.Fatalf("RequestAppend into a small dst = %q, %v", out, err)
	}
}

// TestInmem_SendCopies: a one-way message is copied, so the sender may
// reuse its buffer as soon as Send returns.
func TestInmem_SendCopies(t *testing.T) {
	n := transport.NewInmemNetwork()
	n.SetDelay(20*time.Millisecond, 0)
	nodes, recs := join(t, n, "a", "b")
	msg := []byte("original")
	if err := nodes[0].Send(testCtx(t), "b", msg); err != nil {
		t.Fatal(err)
	}
	copy(msg, "mutated!")
	got, err := recs[1].WaitMessages(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0].Body) != "original" {
		t.Fatalf("handler got %q, want %q", got[0].Body, "original")
	}
}

// TestInmem_RequestAppendCompressed: with compression the response is
// decoded straight into dst.
func TestInmem_RequestAppendCompressed(t *testing.T) {
	n := transport.NewInmemNetwork(transport.WithCompression(transport.Always(transport.CodecLZ4)))
	defer n.Close()
	if _, err := n.Join("srv", transporttest.Echo{}); err != nil {
		t.Fatal(err)
	}
	cl, _ := n.Join("cl", transporttest.Echo{})
	req := bytes.Repeat([]byte("compressible "), 500)
	dst := make([]byte, 0, 2*len(req))
	out, err := cl.RequestAppend(context.Background(), dst, "srv", req)
	if err != nil || !bytes.Equal(out, req) {
		t.Fatalf("RequestAppend: %d bytes, %v", len(out), err)
	}
	if &out[0] != &dst[:1][0] {
		t.Error("compressed response not decoded into dst")
	}
}

// TestTCP_AppendHandler: a TCP server answers through HandleRequestAppend
// into pooled buffers; responses of changing sizes, many at once, stay
// intact while the buffers are recycled.
func TestTCP_AppendHandler(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, &reverser{}})
	ctx := testCtx(t)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var buf []byte
			for i := range 40 {
				req := bytes.Repeat([]byte{byte(g), byte(i)}, 1+(g*977+i*331)%30000)
				var err error
				buf, err = nodes[0].RequestAppend(ctx, buf[:0], nodes[1].LocalID(), req)
				if err == nil {
					for j := range req {
						if buf[j] != req[len(req)-1-j] {
							err = fmt.Errorf("goroutine %d request %d: byte %d differs", g, i, j)
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// reverser is inPlace without the recording (safe for concurrent use).
type reverser struct{}

func (r *reverser) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return r.HandleRequestAppend(ctx, from, req, nil)
}

func (*reverser) HandleRequestAppend(_ context.Context, _ transport.NodeID, req, dst []byte) ([]byte, error) {
	for i := len(req) - 1; i >= 0; i-- {
		dst = append(dst, req[i])
	}
	return dst, nil
}

func (*reverser) HandleMessage(transport.NodeID, []byte) {}

// echoAppend is an AppendHandler that answers a request of even length
// with the request itself (allowed: a response may alias req) and one of
// odd length with its reversal, written into the offered buffer.
type echoAppend struct{}

func (h echoAppend) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return h.HandleRequestAppend(ctx, from, req, nil)
}

func (echoAppend) HandleRequestAppend(_ context.Context, _ transport.NodeID, req, dst []byte) ([]byte, error) {
	if len(req)%2 == 0 {
		return req, nil
	}
	for i := len(req) - 1; i >= 0; i-- {
		dst = append(dst, req[i])
	}
	return dst, nil
}

func (echoAppend) HandleMessage(transport.NodeID, []byte) {}

// TestTCP_AppendHandlerAliasingRequest: a response that is the request
// buffer itself must not enter the response pool as well as the request
// pool (the two would then hand it out twice); concurrent answers of
// different sizes, some aliasing the request and some in pooled buffers,
// stay intact.
func TestTCP_AppendHandlerAliasingRequest(t *testing.T) {
	nodes := tcpCluster(t, transport.TCPConfig{}, []transport.Handler{transporttest.Echo{}, echoAppend{}})
	ctx := testCtx(t)
	errs := make(chan error, 6)
	for g := range 6 {
		go func() {
			for i := range 40 {
				req := bytes.Repeat([]byte{byte(g + 1), byte(i)}, 1+(g*1237+i*517)%40000)
				if i%2 == 1 {
					req = append(req, 0xEE) // odd length: answered in the pooled buffer
				}
				want := bytes.Clone(req)
				if len(req)%2 == 1 {
					for j := range req {
						want[len(req)-1-j] = req[j]
					}
				}
				got, err := nodes[0].Request(ctx, nodes[1].LocalID(), req)
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("goroutine %d request %d: answer differs", g, i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
