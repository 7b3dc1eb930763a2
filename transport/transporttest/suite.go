package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
)

// Cluster is a set of connected nodes made by a Factory.
type Cluster struct {
	// Nodes are the transports; Nodes[i] is served by the i-th handler
	// given to the Factory. Every node can reach every other by LocalID.
	Nodes []transport.Transport
	// Kill stops node i abruptly, as a crash would: afterwards the others'
	// requests to it must fail with transport.ErrUnreachable, and requests
	// in flight to it must fail promptly. Nil means Nodes[i].Close().
	Kill func(i int)
}

// Factory makes len(handlers) connected nodes for one test. It must
// release everything it made when t ends (t.Cleanup); closing a node that
// the suite already closed must be harmless.
type Factory func(t *testing.T, handlers []transport.Handler) *Cluster

// Timeouts used by the suite. Generous because tests run with -race on
// small shared machines; a conforming transport finishes far sooner.
const (
	testTimeout = 30 * time.Second // bound on any one subtest's calls
	prompt      = 5 * time.Second  // "promptly" for failures after a crash
)

// Run runs the conformance suite against the transports newCluster makes.
// Every transport in this module passes it; users run it on their own.
func Run(t *testing.T, newCluster Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"RequestResponse", testRequestResponse},
		{"OneWayOrdering", testOneWayOrdering},
		{"SendCopiesBody", testSendCopiesBody},
		{"LargeMessages", testLargeMessages},
		{"ConcurrentCallers", testConcurrentCallers},
		{"Cancellation", testCancellation},
		{"Deadline", testDeadline},
		{"PeerLoss", testPeerLoss},
		{"UnknownPeer", testUnknownPeer},
		{"CloseSemantics", testCloseSemantics},
		{"HandlerError", testHandlerError},
		{"RequestAppend", testRequestAppend},
		{"CanceledCallerReusesBuffer", testCanceledCallerReusesBuffer},
		{"AppendHandler", testAppendHandler},
		{"RequestInPieces", testRequestInPieces},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newCluster) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func kill(c *Cluster, i int) {
	if c.Kill != nil {
		c.Kill(i)
		return
	}
	c.Nodes[i].Close()
}

// pattern returns n deterministic, varied bytes (not zeros, so a transport
// that drops or reorders chunks is caught).
func pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func testRequestResponse(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, Funcs{Request: func(_ context.Context, from transport.NodeID, req []byte) ([]byte, error) {
		return append([]byte(string(from)+":"), req...), nil
	}}})
	a, b := c.Nodes[0], c.Nodes[1]
	ctx := ctxFor(t)
	for _, n := range []int{0, 1, 100, 64 << 10} {
		req := pattern(n, uint32(n))
		got, err := a.Request(ctx, b.LocalID(), req)
		if err != nil {
			t.Fatalf("Request(%d bytes): %v", n, err)
		}
		want := append([]byte(string(a.LocalID())+":"), req...)
		if !bytes.Equal(got, want) {
			t.Fatalf("Request(%d bytes): response of %d bytes differs from the %d expected", n, len(got), len(want))
		}
		// And the other direction, served by Echo.
		got, err = b.Request(ctx, a.LocalID(), req)
		if err != nil {
			t.Fatalf("reverse Request(%d bytes): %v", n, err)
		}
		if !bytes.Equal(got, req) {
			t.Fatalf("reverse Request(%d bytes): echo differs", n)
		}
	}
}

func testOneWayOrdering(t *testing.T, f Factory) {
	rec := &Recorder{}
	c := f(t, []transport.Handler{rec, Echo{}, Echo{}})
	ctx := ctxFor(t)
	const perSender = 300
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range c.Nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8)
			for i := range perSender {
				binary.BigEndian.PutUint64(buf, uint64(i))
				if err := s.Send(ctx, c.Nodes[0].LocalID(), buf); err != nil {
					errs <- fmt.Errorf("%s: Send %d: %w", s.LocalID(), i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs, err := rec.WaitMessages(ctx, 2*perSender)
	if err != nil {
		t.Fatalf("got %d of %d messages: %v", len(msgs), 2*perSender, err)
	}
	next := map[transport.NodeID]uint64{}
	for _, m := range msgs {
		if len(m.Body) != 8 {
			t.Fatalf("message from %s has %d bytes, want 8", m.From, len(m.Body))
		}
		seq := binary.BigEndian.Uint64(m.Body)
		if seq != next[m.From] {
			t.Fatalf("from %s: got message %d, want %d (per-sender FIFO broken)", m.From, seq, next[m.From])
		}
		next[m.From]++
	}
	for _, s := range c.Nodes[1:] {
		if next[s.LocalID()] != perSender {
			t.Errorf("from %s: got %d messages, want %d", s.LocalID(), next[s.LocalID()], perSender)
		}
	}
	if len(msgs) != 2*perSender {
		t.Errorf("got %d messages, want %d", len(msgs), 2*perSender)
	}
}

func testSendCopiesBody(t *testing.T, f Factory) {
	rec := &Recorder{}
	c := f(t, []transport.Handler{rec, Echo{}})
	ctx := ctxFor(t)
	buf := []byte("original")
	if err := c.Nodes[1].Send(ctx, c.Nodes[0].LocalID(), buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "MUTATED!") // the caller owns buf again once Send returns
	msgs, err := rec.WaitMessages(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(msgs[0].Body); got != "original" {
		t.Fatalf("received %q, want %q", got, "original")
	}
}

func testLargeMessages(t *testing.T, f Factory) {
	rec := &Recorder{}
	c := f(t, []transport.Handler{rec, Echo{}})
	ctx := ctxFor(t)
	big := pattern(6<<20+3, 7) // 6 MiB + 3: several MB, odd length
	got, err := c.Nodes[0].Request(ctx, c.Nodes[1].LocalID(), big)
	if err != nil {
		t.Fatalf("Request(%d bytes): %v", len(big), err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("echo of %d bytes came back as %d different bytes", len(big), len(got))
	}
	if err := c.Nodes[1].Send(ctx, c.Nodes[0].LocalID(), big); err != nil {
		t.Fatalf("Send(%d bytes): %v", len(big), err)
	}
	msgs, err := rec.WaitMessages(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(msgs[0].Body, big) {
		t.Fatalf("one-way message of %d bytes arrived as %d different bytes", len(big), len(msgs[0].Body))
	}
}

func testConcurrentCallers(t *testing.T, f Factory) {
	slow := Funcs{Request: func(_ context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		// Reverse the body so the response depends on this request alone.
		out := make([]byte, len(req))
		for i, v := range req {
			out[len(req)-1-i] = v
		}
		return out, nil
	}}
	c := f(t, []transport.Handler{Echo{}, slow})
	ctx := ctxFor(t)
	const callers, calls = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				req := pattern(16+(g*calls+i)*37, uint32(g*calls+i))
				got, err := c.Nodes[0].Request(ctx, c.Nodes[1].LocalID(), req)
				if err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
				for j := range req {
					if got[len(got)-1-j] != req[j] {
						errs <- fmt.Errorf("caller %d call %d: got a response to another request", g, i)
						return
					}
				}
				if len(got) != len(req) {
					errs <- fmt.Errorf("caller %d call %d: response %d bytes, want %d", g, i, len(got), len(req))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// blocking returns a handler whose requests starting with "block" wait
// until release is closed or their ctx is done (others are echoed at once),
// a channel that receives once per blocking request started, and one that
// receives, per blocking request, its ctx's error when it ended (nil when
// released).
func blocking(release <-chan struct{}) (transport.Handler, <-chan struct{}, <-chan error) {
	started := make(chan struct{}, 64)
	ended := make(chan error, 64)
	return Funcs{Request: func(ctx context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		if !bytes.HasPrefix(req, []byte("block")) {
			return append([]byte{}, req...), nil
		}
		started <- struct{}{}
		select {
		case <-release:
			ended <- nil
			return req, nil
		case <-ctx.Done():
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
	}}, started, ended
}

func testCancellation(t *testing.T, f Factory) {
	release := make(chan struct{})
	h, started, ended := blocking(release)
	c := f(t, []transport.Handler{Echo{}, h})
	defer close(release)
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	base := ctxFor(t)

	pre, cancel := context.WithCancel(base)
	cancel()
	if _, err := a.Request(pre, b, []byte("block")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Request with canceled ctx: err = %v, want context.Canceled", err)
	}

	ctx, cancel := context.WithCancel(base)
	done := make(chan error, 1)
	go func() {
		_, err := a.Request(ctx, b, []byte("block"))
		done <- err
	}()
	select {
	case <-started:
	case <-base.Done():
		t.Fatal("request never reached the handler")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Request: err = %v, want context.Canceled", err)
		}
	case <-time.After(prompt):
		t.Fatal("Request did not return after its ctx was canceled")
	}
	// The handler's ctx ends too: nobody waits for its answer.
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("handler of a canceled request ran to completion")
		}
	case <-time.After(prompt):
		t.Fatal("handler's ctx did not end after the caller canceled")
	}

	// The transport still works after a canceled call.
	if got, err := a.Request(base, b, []byte("after")); err != nil || string(got) != "after" {
		t.Fatalf("Request after a canceled one = %q, %v; want %q, nil", got, err, "after")
	}
}

func testDeadline(t *testing.T, f Factory) {
	release := make(chan struct{})
	h, started, ended := blocking(release)
	c := f(t, []transport.Handler{Echo{}, h})
	defer close(release)
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	// A first call sets up the connection, so that the deadline below is
	// spent on the request, not on a dial and a handshake (which on a
	// loaded machine can take longer than the deadline: then the request
	// is never sent and no handler starts).
	if _, err := a.Request(ctxFor(t), b, []byte("warm")); err != nil {
		t.Fatalf("first Request: %v", err)
	}
	// A request whose deadline passed before it was written reaches no
	// handler, which is right but shows nothing: try longer deadlines until
	// one reaches the handler.
	for _, d := range []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second} {
		ctx, cancel := context.WithTimeout(ctxFor(t), d)
		start := time.Now()
		_, err := a.Request(ctx, b, []byte("block"))
		el := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Request past its %v deadline: err = %v, want context.DeadlineExceeded", d, err)
		}
		if el > d+prompt {
			t.Fatalf("Request returned %v after a %v deadline", el, d)
		}
		select {
		case <-started:
		case <-time.After(prompt):
			t.Logf("the request with a %v deadline reached no handler within %v", d, prompt)
			continue
		}
		select {
		case err := <-ended:
			if err == nil {
				t.Fatal("handler of an expired request ran to completion")
			}
		case <-time.After(prompt):
			t.Fatalf("handler's ctx did not end after the caller's %v deadline", d)
		}
		return
	}
	t.Fatal("no request reached the handler before its deadline (tried 50ms, 250ms, 1s)")
}

func testPeerLoss(t *testing.T, f Factory) {
	release := make(chan struct{})
	defer close(release)
	h, started, _ := blocking(release)
	c := f(t, []transport.Handler{Echo{}, h, Echo{}})
	a := c.Nodes[0]
	b, other := c.Nodes[1].LocalID(), c.Nodes[2].LocalID()
	ctx := ctxFor(t)
	// Warm the links so the in-flight request rides an established one.
	for _, to := range []transport.NodeID{b, other} {
		if _, err := a.Request(ctx, to, []byte("warm")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Request(ctx, b, []byte("block in flight"))
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("request never reached the handler")
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		kill(c, 1) // must cancel the blocked handler's ctx and wait for it
	}()
	select {
	case <-killed:
	case <-time.After(prompt):
		t.Fatal("killing a node with a handler blocked on its ctx did not finish")
	}
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("request in flight to a killed node: err = %v, want ErrUnreachable", err)
		}
	case <-time.After(prompt):
		t.Fatal("request in flight to a killed node did not fail promptly")
	}
	short, cancel := context.WithTimeout(ctx, prompt)
	defer cancel()
	if _, err := a.Request(short, b, []byte("later")); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Request to a killed node: err = %v, want ErrUnreachable", err)
	}
	if err := a.Send(short, b, []byte("later")); err != nil && !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Send to a killed node: err = %v, want nil or ErrUnreachable", err)
	}
	// The survivors still talk.
	if got, err := a.Request(ctx, other, []byte("still")); err != nil || string(got) != "still" {
		t.Fatalf("Request between survivors = %q, %v", got, err)
	}
}

func testUnknownPeer(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, Echo{}})
	ctx := ctxFor(t)
	const nobody = transport.NodeID("transporttest-no-such-node")
	if _, err := c.Nodes[0].Request(ctx, nobody, []byte("x")); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("Request to unknown peer: err = %v, want ErrUnknownPeer", err)
	}
	if err := c.Nodes[0].Send(ctx, nobody, []byte("x")); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("Send to unknown peer: err = %v, want ErrUnknownPeer", err)
	}
}

func testCloseSemantics(t *testing.T, f Factory) {
	rec := &Recorder{}
	c := f(t, []transport.Handler{Echo{}, rec})
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	ctx := ctxFor(t)
	if _, err := a.Request(ctx, b, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.Request(ctx, b, []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Request after Close: err = %v, want ErrClosed", err)
	}
	if err := a.Send(ctx, b, []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after Close: err = %v, want ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("second Close: err = %v, want ErrClosed", err)
	}
	if n := rec.NumRequests(); n != 1 {
		t.Errorf("handler saw %d requests, want 1", n)
	}
}

func testHandlerError(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, Funcs{Request: func(context.Context, transport.NodeID, []byte) ([]byte, error) {
		return nil, errors.New("disk on fire")
	}}})
	_, err := c.Nodes[0].Request(ctxFor(t), c.Nodes[1].LocalID(), []byte("x"))
	var re *transport.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want *transport.RemoteError", err, err)
	}
	if re.Node != c.Nodes[1].LocalID() || !strings.Contains(re.Msg, "disk on fire") {
		t.Fatalf("RemoteError = {Node: %q, Msg: %q}, want node %q and the handler's message", re.Node, re.Msg, c.Nodes[1].LocalID())
	}
	// The connection survives a handler error.
	if _, err := c.Nodes[1].Request(ctxFor(t), c.Nodes[0].LocalID(), []byte("x")); err != nil {
		t.Fatalf("Request after a remote error: %v", err)
	}
}

func testRequestAppend(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, Echo{}})
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	ctx := ctxFor(t)
	buf := append(make([]byte, 0, 1<<20), "prefix:"...)
	for _, n := range []int{100, 300_000, 10} {
		req := pattern(n, uint32(n))
		out, err := transport.RequestAppend(ctx, a, buf, b, req)
		if err != nil {
			t.Fatalf("RequestAppend(%d bytes): %v", n, err)
		}
		if string(out[:7]) != "prefix:" || !bytes.Equal(out[7:], req) {
			t.Fatalf("RequestAppend(%d bytes): got %d bytes, want the prefix and the echo", n, len(out))
		}
		if &out[0] != &buf[:1][0] {
			t.Fatalf("RequestAppend(%d bytes) reallocated although dst had room", n)
		}
	}
	out, err := transport.RequestAppend(ctx, a, buf, "transporttest-no-such-node", []byte("x"))
	if err == nil || string(out) != "prefix:" {
		t.Fatalf("RequestAppend to an unknown peer = %q, %v; want dst unchanged and an error", out, err)
	}
	// A nil dst works like Request.
	if out, err := transport.RequestAppend(ctx, a, nil, b, []byte("plain")); err != nil || string(out) != "plain" {
		t.Fatalf("RequestAppend(nil dst) = %q, %v", out, err)
	}
}

// testCanceledCallerReusesBuffer: a caller whose ctx ends while the
// handler is still reading the request may overwrite its request buffer as
// soon as Request returns; the handler must never see it change (a
// transport that lends the caller's buffer waits for the handler). Run
// with -race this also checks for a data race.
func testCanceledCallerReusesBuffer(t *testing.T, f Factory) {
	started := make(chan struct{}, 1)
	changed := make(chan bool, 1)
	h := Funcs{Request: func(ctx context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		want := bytes.Clone(req)
		started <- struct{}{}
		<-ctx.Done()
		saw := false
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
			saw = saw || !bytes.Equal(req, want)
		}
		changed <- saw
		return nil, ctx.Err()
	}}
	c := f(t, []transport.Handler{Echo{}, h})
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	req := pattern(64<<10, 7)
	ctx, cancel := context.WithCancel(ctxFor(t))
	go func() {
		<-started
		cancel()
	}()
	if _, err := a.Request(ctx, b, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Request: err = %v, want context.Canceled", err)
	}
	for i := range req {
		req[i] = ^req[i]
	}
	select {
	case saw := <-changed:
		if saw {
			t.Fatal("the handler saw the request buffer change after the caller reused it")
		}
	case <-time.After(prompt):
		t.Fatal("handler's ctx did not end after the caller canceled")
	}
}

// appendReverse is an AppendHandler answering with the request reversed.
type appendReverse struct{}

func (h appendReverse) HandleRequest(ctx context.Context, from transport.NodeID, req []byte) ([]byte, error) {
	return h.HandleRequestAppend(ctx, from, req, nil)
}

func (appendReverse) HandleRequestAppend(_ context.Context, _ transport.NodeID, req, dst []byte) ([]byte, error) {
	for i := len(req) - 1; i >= 0; i-- {
		dst = append(dst, req[i])
	}
	return dst, nil
}

func (appendReverse) HandleMessage(transport.NodeID, []byte) {}

// testAppendHandler: a handler that implements transport.AppendHandler
// answers Request and RequestAppend alike, whatever buffer the transport
// offers it.
func testAppendHandler(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, appendReverse{}})
	a, b := c.Nodes[0], c.Nodes[1].LocalID()
	ctx := ctxFor(t)
	for _, n := range []int{1, 1000, 300_000} {
		req := pattern(n, uint32(n))
		want := make([]byte, n)
		for i := range req {
			want[n-1-i] = req[i]
		}
		got, err := a.Request(ctx, b, req)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Request(%d bytes): %d bytes, %v", n, len(got), err)
		}
		for _, room := range []int{0, n / 2, n} {
			dst := append(make([]byte, 0, 3+room), "pre"...)
			out, err := transport.RequestAppend(ctx, a, dst, b, req)
			if err != nil || string(out[:3]) != "pre" || !bytes.Equal(out[3:], want) {
				t.Fatalf("RequestAppend(%d bytes, room %d): %d bytes, %v", n, room, len(out), err)
			}
		}
	}
}

// vectorReverse is appendReverse that also reads requests in pieces.
type vectorReverse struct{ appendReverse }

func (vectorReverse) HandleRequestV(_ context.Context, _ transport.NodeID, reqs [][]byte, dst []byte) ([]byte, error) {
	for p := len(reqs) - 1; p >= 0; p-- {
		for i := len(reqs[p]) - 1; i >= 0; i-- {
			dst = append(dst, reqs[p][i])
		}
	}
	return dst, nil
}

// testRequestInPieces: transport.RequestAppendV delivers the concatenation
// of the pieces, split anywhere, to handlers that read pieces and to
// handlers that do not.
func testRequestInPieces(t *testing.T, f Factory) {
	c := f(t, []transport.Handler{Echo{}, appendReverse{}, vectorReverse{}})
	a := c.Nodes[0]
	ctx := ctxFor(t)
	for _, n := range []int{3, 5000, 300_000} {
		req := pattern(n, uint32(n)+1)
		want := make([]byte, n)
		for i := range req {
			want[n-1-i] = req[i]
		}
		for _, split := range [][]int{{0, n}, {1, n}, {n / 3, n - 1}} {
			reqs := [][]byte{req[:split[0]], req[split[0]:split[1]], req[split[1]:]}
			for _, to := range []int{1, 2} {
				dst := append(make([]byte, 0, 8), "pre"...)
				out, err := transport.RequestAppendV(ctx, a, dst, c.Nodes[to].LocalID(), reqs)
				if err != nil || string(out[:3]) != "pre" || !bytes.Equal(out[3:], want) {
					t.Fatalf("RequestAppendV(%d bytes split %v) to node %d: %d bytes, %v", n, split, to, len(out), err)
				}
			}
			out, err := transport.RequestAppendV(ctx, a, nil, c.Nodes[1].LocalID(), [][]byte{req})
			if err != nil || !bytes.Equal(out, want) {
				t.Fatalf("RequestAppendV with one piece: %d bytes, %v", len(out), err)
			}
		}
	}
}
