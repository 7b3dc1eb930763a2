package etcd

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// proxy forwards TCP connections to an address until cut, after which it
// closes every connection it forwards and every new one: the process
// behind it is cut off from etcd while both live.
type proxy struct {
	ln     net.Listener
	to     string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
	wg     sync.WaitGroup
	closed chan struct{}
}

func newProxy(t *testing.T, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to, closed: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		close(p.closed)
		ln.Close()
		p.partition()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		d, err := net.DialTimeout("tcp", p.to, 5*time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(d, c); d.Close() })
		p.wg.Go(func() { io.Copy(c, d); c.Close() })
	}
}

// partition cuts every connection, now and to come.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// heal lets new connections through again (the client redials).
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// TestPartition_BriefDisconnectRetried: a leader whose connection to
// etcd drops for a second (every connection closed, new ones refused,
// then let through again) keeps its leadership, and a Save made during
// the outage succeeds once the client has reconnected: the store retries
// the failed requests instead of failing the save (which, in a
// coordinator, aborted the run). Bounds: the TTL (5 s) is the store's
// retry bound and the session's (Lost at 9/10 of it); the outage and the
// client's redial (gRPC backs off from 1 s) fit in it with margin.
func TestPartition_BriefDisconnectRetried(t *testing.T) {
	const ttl = 5 * time.Second
	endpoint := needEtcd(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{"http://" + px.ln.Addr().String()}
	cfg.Prefix = freshPrefix(t)
	cfg.TTL = ttl
	cfg.Name = "flaky-link"
	cfg.RequestTimeout = time.Second // an attempt during the outage fails within it
	cfg.Logger = zap.NewNop()
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := testCtx(t, 6*slack)
	l, err := b.Election("coordinator").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(context.Background())
	st := NewStore(l, DefaultStateName)
	if err := st.Save(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	px.partition()
	time.AfterFunc(time.Second, px.heal)
	start := time.Now()
	if err := st.Save(ctx, []byte("during the outage")); err != nil {
		t.Fatalf("Save across a 1 s disconnect: %v (after %v)", err, time.Since(start))
	}
	t.Logf("Save across a 1 s disconnect took %v", time.Since(start).Round(time.Millisecond))
	if err := l.Err(); err != nil {
		t.Fatalf("leadership lost over a 1 s disconnect (TTL %v): %v", ttl, err)
	}
	got, err := NewStore(l, DefaultStateName).Load(ctx)
	if err != nil || string(got) != "during the outage" {
		t.Fatalf("Load = %q, %v", got, err)
	}
}

// TestPartition_LeaderStopsBeforeSuccessor: a leader cut off from etcd
// (its process alive, its renewals failing) sees Lost close within its
// TTL, and before the standby leads: a coordinator that stops on Lost
// never overlaps its successor. Lost closes at 9/10 TTL after the last
// renewal began; the server expires the lease at TTL or later, so the
// order has at least TTL/10 (500 ms here) plus the server's expiry sweep
// to spare.
func TestPartition_LeaderStopsBeforeSuccessor(t *testing.T) {
	const ttl = 5 * time.Second
	endpoint := needEtcd(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	prefix := freshPrefix(t)
	open := func(ep, name string) *Backend {
		cfg := DefaultConfig()
		cfg.Endpoints = []string{ep}
		cfg.Prefix = prefix
		cfg.TTL = ttl
		cfg.Name = name
		cfg.RequestTimeout = slack
		cfg.Logger = zap.NewNop()
		b, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a := open("http://"+px.ln.Addr().String(), "a")
	b := open(endpoint, "b")
	ctx := testCtx(t, 6*slack)
	la, err := a.Election("coordinator").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan time.Time, 1)
	go func() {
		l, err := b.Election("coordinator").Campaign(ctx)
		if err != nil {
			t.Errorf("standby: %v", err)
			return
		}
		won <- time.Now()
		<-ctx.Done()
		l.Resign(context.Background())
	}()
	time.Sleep(ttl / 2) // a renewal or two through the proxy
	cut := time.Now()
	px.partition()
	var lost time.Time
	select {
	case <-la.Lost():
		lost = time.Now()
	case <-time.After(ttl + slack):
		t.Fatalf("cut-off leader's Lost still open %v after the cut (TTL %v)", ttl+slack, ttl)
	}
	var win time.Time
	select {
	case win = <-won:
	case <-time.After(ttl + slack):
		t.Fatalf("standby did not lead within %v of the cut (TTL %v)", ttl+slack, ttl)
	}
	t.Logf("cut at 0: leader's Lost at %v (%v), standby leads at %v", lost.Sub(cut).Round(time.Millisecond), la.Err(), win.Sub(cut).Round(time.Millisecond))
	if !lost.Before(win) {
		t.Fatalf("standby led %v before the cut-off leader's Lost closed", lost.Sub(win))
	}
}
