package transport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

func inmemFactory(opts ...transport.InmemOption) transporttest.Factory {
	return func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
		n := transport.NewInmemNetwork(opts...)
		t.Cleanup(func() { n.Close() })
		c := &transporttest.Cluster{}
		for i, h := range hs {
			tr, err := n.Join(transport.NodeID(fmt.Sprintf("node%d", i)), h)
			if err != nil {
				t.Fatal(err)
			}
			c.Nodes = append(c.Nodes, tr)
		}
		return c
	}
}

func TestInmem_Conformance(t *testing.T) {
	transporttest.Run(t, inmemFactory())
}

func TestInmem_ConformanceCompressed(t *testing.T) {
	t.Run("lz4", func(t *testing.T) {
		transporttest.Run(t, inmemFactory(transport.WithCompression(transport.Always(transport.CodecLZ4))))
	})
	t.Run("snappy-above-1KiB", func(t *testing.T) {
		transporttest.Run(t, inmemFactory(transport.WithCompression(transport.AboveSize(1024, transport.CodecSnappy))))
	})
}

// join makes a network with nodes named ids, each served by its own
// Recorder.
func join(t *testing.T, n *transport.InmemNetwork, ids ...transport.NodeID) ([]*transport.Inmem, []*transporttest.Recorder) {
	t.Helper()
	t.Cleanup(func() { n.Close() })
	var nodes []*transport.Inmem
	var recs []*transporttest.Recorder
	for _, id := range ids {
		r := &transporttest.Recorder{}
		tr, err := n.Join(id, r)
		if err != nil {
			t.Fatal(err)
		}
		nodes, recs = append(nodes, tr), append(recs, r)
	}
	return nodes, recs
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestInmem_DisconnectReconnect(t *testing.T) {
	n := transport.NewInmemNetwork()
	nodes, _ := join(t, n, "a", "b", "c")
	a := nodes[0]
	ctx := testCtx(t)
	n.Disconnect("b", "a") // order of arguments does not matter
	if _, err := a.Request(ctx, "b", []byte("x")); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Request over a cut link: err = %v, want ErrUnreachable", err)
	}
	if err := a.Send(ctx, "b", []byte("x")); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Send over a cut link: err = %v, want ErrUnreachable", err)
	}
	if _, err := a.Request(ctx, "c", []byte("x")); err != nil {
		t.Fatalf("Request over an intact link: %v", err)
	}
	n.Reconnect("a", "b")
	if _, err := a.Request(ctx, "b", []byte("x")); err != nil {
		t.Fatalf("Request after Reconnect: %v", err)
	}
}

func TestInmem_PartitionHeal(t *testing.T) {
	n := transport.NewInmemNetwork()
	nodes, _ := join(t, n, "a", "b", "c", "d")
	ctx := testCtx(t)
	n.Partition([]transport.NodeID{"a", "b"}, []transport.NodeID{"c"})
	tests := []struct {
		from, to transport.NodeID
		up       bool
	}{
		{"a", "b", true}, {"b", "a", true}, {"a", "c", false}, {"c", "b", false},
		{"a", "d", false}, {"c", "d", false}, {"d", "d", true},
	}
	byID := map[transport.NodeID]*transport.Inmem{}
	for _, tr := range nodes {
		byID[tr.LocalID()] = tr
	}
	for _, tc := range tests {
		_, err := byID[tc.from].Request(ctx, tc.to, []byte("x"))
		if tc.up && err != nil {
			t.Errorf("%s->%s inside a group: %v", tc.from, tc.to, err)
		}
		if !tc.up && !errors.Is(err, transport.ErrUnreachable) {
			t.Errorf("%s->%s across groups: err = %v, want ErrUnreachable", tc.from, tc.to, err)
		}
	}
	n.Disconnect("a", "b")
	n.Heal()
	for _, tc := range tests {
		if _, err := byID[tc.from].Request(ctx, tc.to, []byte("x")); err != nil {
			t.Errorf("%s->%s after Heal: %v", tc.from, tc.to, err)
		}
	}
}

// deliveredUnderDrop sends 1000 numbered messages with drop rate p and
// returns the numbers that arrived, in arrival order.
func deliveredUnderDrop(t *testing.T, seed uint64, p float64) []uint64 {
	n := transport.NewInmemNetwork(transport.WithRand(rand.New(rand.NewPCG(seed, 0))))
	nodes, recs := join(t, n, "a", "b")
	ctx := testCtx(t)
	n.SetDropRate(p)
	buf := make([]byte, 8)
	for i := range 1000 {
		binary.BigEndian.PutUint64(buf, uint64(i))
		if err := nodes[0].Send(ctx, "b", buf); err != nil {
			t.Fatal(err)
		}
	}
	n.SetDropRate(0)
	if err := nodes[0].Send(ctx, "b", []byte("end")); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for {
		msgs, err := recs[1].WaitMessages(ctx, len(got)+1)
		if err != nil {
			t.Fatal(err)
		}
		m := msgs[len(got)]
		if string(m.Body) == "end" {
			return got
		}
		got = append(got, binary.BigEndian.Uint64(m.Body))
	}
}

func TestInmem_DropIsSeededAndRoughlyP(t *testing.T) {
	a := deliveredUnderDrop(t, 7, 0.3)
	b := deliveredUnderDrop(t, 7, 0.3)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed delivered different messages")
	}
	c := deliveredUnderDrop(t, 8, 0.3)
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("different seeds delivered exactly the same messages")
	}
	// 1000 trials at p = 0.3: mean 700 delivered, sd ≈ 14.5; ±6 sd.
	if len(a) < 613 || len(a) > 787 {
		t.Fatalf("delivered %d of 1000 at drop rate 0.3, want about 700", len(a))
	}
	for i := 1; i < len(a); i++ {
		if a[i] <= a[i-1] {
			t.Fatalf("order broken under drops: %d after %d", a[i], a[i-1])
		}
	}
}

func TestInmem_DroppedRequestWaitsForCtx(t *testing.T) {
	n := transport.NewInmemNetwork()
	nodes, recs := join(t, n, "a", "b")
	n.SetDropRate(1)
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Millisecond)
	defer cancel()
	if _, err := nodes[0].Request(ctx, "b", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dropped request: err = %v, want DeadlineExceeded", err)
	}
	if recs[1].NumRequests() != 0 {
		t.Fatal("a dropped request reached the handler")
	}
}

func TestInmem_DelayAndJitterKeepFIFO(t *testing.T) {
	n := transport.NewInmemNetwork(transport.WithRand(rand.New(rand.NewPCG(5, 5))))
	nodes, recs := join(t, n, "a", "b")
	ctx := testCtx(t)
	const fixed = 20 * time.Millisecond
	n.SetDelay(fixed, 0)
	start := time.Now()
	if _, err := nodes[0].Request(ctx, "b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*fixed {
		t.Fatalf("round trip took %v with a %v one-way delay, want at least %v", el, fixed, 2*fixed)
	}
	n.SetDelay(0, 5*time.Millisecond)
	for i := range 50 {
		if err := nodes[0].Send(ctx, "b", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := recs[1].WaitMessages(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if m.Body[0] != byte(i) {
			t.Fatalf("message %d arrived as number %d under jitter", m.Body[0], i)
		}
	}
}

func TestInmem_KillAndRejoin(t *testing.T) {
	n := transport.NewInmemNetwork()
	nodes, _ := join(t, n, "a", "b")
	ctx := testCtx(t)
	if err := n.Kill("b"); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill("b"); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("second Kill: err = %v, want ErrUnknownPeer", err)
	}
	if _, err := nodes[1].Request(ctx, "a", []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("killed node's own Request: err = %v, want ErrClosed", err)
	}
	if _, err := nodes[0].Request(ctx, "b", []byte("x")); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Request to killed node: err = %v, want ErrUnreachable", err)
	}
	if _, err := n.Join("a", transporttest.Echo{}); err == nil {
		t.Fatal("joining a live name succeeded")
	}
	if _, err := n.Join("b", transporttest.Echo{}); err != nil {
		t.Fatalf("rejoining a killed name: %v", err)
	}
	if got, err := nodes[0].Request(ctx, "b", []byte("back")); err != nil || string(got) != "back" {
		t.Fatalf("Request to the restarted node = %q, %v", got, err)
	}
	n.Close()
	if _, err := n.Join("z", transporttest.Echo{}); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Join after Close: err = %v, want ErrClosed", err)
	}
}

func TestInmem_CompressionIsApplied(t *testing.T) {
	obs := &observingPolicy{CompressionPolicy: transport.Always(transport.CodecLZ4), obs: make(chan observation, 16)}
	n := transport.NewInmemNetwork(transport.WithCompression(obs))
	nodes, _ := join(t, n, "a", "b")
	msg := bytes.Repeat([]byte("gradient "), 10_000)
	got, err := nodes[0].Request(testCtx(t), "b", msg)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("compressed echo: err = %v, equal = %v", err, bytes.Equal(got, msg))
	}
	// One observation for the request (to b) and one for the response (to a).
	for _, wantTo := range []transport.NodeID{"b", "a"} {
		o := <-obs.obs
		if o.to != wantTo || o.c != transport.CodecLZ4 || o.raw != len(msg) || o.wire <= 0 || o.wire >= o.raw/10 {
			t.Fatalf("observation %+v: want to=%s, lz4, raw=%d and a wire size under a tenth of it", o, wantTo, len(msg))
		}
	}
}

func TestInmem_MaxMessageSize(t *testing.T) {
	n := transport.NewInmemNetwork(transport.WithMaxMessageSize(100))
	nodes, _ := join(t, n, "a", "b")
	ctx := testCtx(t)
	if _, err := nodes[0].Request(ctx, "b", make([]byte, 101)); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("oversized request: err = %v, want ErrFrameTooLarge", err)
	}
	if err := nodes[0].Send(ctx, "b", make([]byte, 101)); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("oversized message: err = %v, want ErrFrameTooLarge", err)
	}
	if _, err := nodes[0].Request(ctx, "b", make([]byte, 100)); err != nil {
		t.Fatalf("request at the limit: %v", err)
	}
}

// statsCase sends one compressible request (echoed) and one message from
// a to b and checks both nodes' counters.
func checkStats(t *testing.T, a, b transport.Transport, wait func()) {
	t.Helper()
	msg := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB, compresses well
	ctx := testCtx(t)
	if _, err := a.Request(ctx, b.LocalID(), msg); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, b.LocalID(), msg[:1000]); err != nil {
		t.Fatal(err)
	}
	wait()
	sa, sb := a.(transport.StatsReporter).Stats(), b.(transport.StatsReporter).Stats()
	if sa.FramesSent != 2 || sa.RawBytesSent != uint64(len(msg)+1000) || sa.FramesReceived != 1 || sa.RawBytesReceived != uint64(len(msg)) {
		t.Errorf("sender stats %+v: want 2 frames / %d raw bytes sent, 1 frame / %d received", sa, len(msg)+1000, len(msg))
	}
	if sb.FramesReceived != 2 || sb.RawBytesReceived != sa.RawBytesSent || sb.WireBytesReceived != sa.WireBytesSent {
		t.Errorf("receiver stats %+v do not mirror sender stats %+v", sb, sa)
	}
	if sa.WireBytesSent*10 > sa.RawBytesSent {
		t.Errorf("wire bytes %d not under a tenth of raw %d with lz4 on repetitive data", sa.WireBytesSent, sa.RawBytesSent)
	}
}

func TestInmem_Stats(t *testing.T) {
	n := transport.NewInmemNetwork(transport.WithCompression(transport.Always(transport.CodecLZ4)))
	nodes, recs := join(t, n, "a", "b")
	checkStats(t, nodes[0], nodes[1], func() { recs[1].WaitMessages(testCtx(t), 1) })
}
