package ps_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
)

// BenchmarkPairedPushPull measures one Push followed by one Pull of n
// float32 values per worker (all workers at once) against its ceiling,
// alternating the two inside one loop so that both see the same machine
// load:
//
//   - in-process (inmem): the ceiling is copy() of the same bytes, one
//     goroutine: per worker, the gradients into a server-side buffer and the
//     values back out (2 copies of 4·n bytes);
//   - over TCP on 127.0.0.1: the ceiling is a raw TCP stream per worker, no
//     framing, that writes the 4·n gradient bytes and reads 4·n bytes back,
//     all workers' streams at once.
//
// Reported per sub-benchmark: GB/s of float payload (8·n·workers bytes per
// iteration) for push+pull and for the ceiling, their ratio (the project's
// goal is ≥ 0.6), and the mean µs per push+pull. Run e.g.
//
//	go test -run '^$' -bench PairedPushPull -benchtime 1s -count 5 ./ps
func BenchmarkPairedPushPull(b *testing.B) {
	eachTransportCase(b, func(b *testing.B, c transportCase) {
		env := c.mk(b, c.workers, c.codec)
		defer env.close()
		var ceil func()
		if c.transport == "inmem" {
			ceil = copyCeiling(c.workers, c.n)
		} else {
			ceil = rawTCPCeiling(b, c.workers, c.n)
		}
		runPaired(b, env, c.n, ceil)
	})
}

// copyCeiling returns one iteration of the in-process ceiling: per worker
// two copies of 4·n bytes (gradients in, values out).
func copyCeiling(workers, n int) func() {
	src := make([][]float32, workers)
	srv := make([]float32, n)
	dst := make([][]float32, workers)
	for i := range workers {
		src[i] = make([]float32, n)
		dst[i] = make([]float32, n)
		for j := range src[i] {
			src[i][j] = float32(j)
		}
	}
	return func() {
		for i := range workers {
			copy(srv, src[i])
			copy(dst[i], srv)
		}
	}
}

// rawTCPCeiling returns one iteration of the TCP ceiling: per worker a raw
// loopback stream writes 4·n bytes and reads 4·n bytes back, all workers at
// once.
func rawTCPCeiling(b *testing.B, workers, n int) func() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var srvWG sync.WaitGroup
	for range workers {
		srvWG.Add(1)
		go func() {
			defer srvWG.Done()
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.(*net.TCPConn).SetNoDelay(true)
			buf := make([]byte, 4*n)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	conns := make([]net.Conn, workers)
	bufs := make([][]byte, workers)
	payload := make([]byte, 4*n)
	for i := range payload {
		payload[i] = byte(i)
	}
	for i := range workers {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		conns[i], bufs[i] = c, make([]byte, 4*n)
	}
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		ln.Close()
		srvWG.Wait()
	})
	one := func(i int) error {
		if _, err := conns[i].Write(payload); err != nil {
			return err
		}
		_, err := io.ReadFull(conns[i], bufs[i])
		return err
	}
	errs := make([]error, workers)
	return func() { fanOut(b, errs, one) }
}

func runPaired(b *testing.B, env benchEnv, n int, ceil func()) {
	w := len(env.clients)
	pushPull := pushPullRound(b, env, n)
	pushPull() // warm up buffers and pools
	ceil()
	var tPP, tCeil time.Duration
	iters := 0
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		pushPull()
		t1 := time.Now()
		ceil()
		tCeil += time.Since(t1)
		tPP += t1.Sub(t0)
		iters++
	}
	gb := float64(8*n*w) * float64(iters) / 1e9
	b.ReportMetric(gb/tPP.Seconds(), "pp-GB/s")
	b.ReportMetric(gb/tCeil.Seconds(), "ceil-GB/s")
	b.ReportMetric(tCeil.Seconds()/tPP.Seconds(), "ratio")
	b.ReportMetric(tPP.Seconds()*1e6/float64(iters), "pp-µs/op")
}

// BenchmarkPairedAuthPushPull alternates, inside one loop, one push+pull
// over TCP without a secret and one over TCP with every frame
// authenticated (same workers, same n, codec none), and reports both
// GB/s, their ratio auth/off (goal >= 0.9 at n=1e6) and the µs
// authentication adds to a push+pull (goal <= 5 at n=1e3).
func BenchmarkPairedAuthPushPull(b *testing.B) {
	for _, workers := range []int{1, 4} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("workers=%d/%s", workers, sz.name), func(b *testing.B) {
				off := newTCPEnv(b, workers, transport.CodecNone)
				defer off.close()
				on := newTCPAuthEnv(b, workers, transport.CodecNone)
				defer on.close()
				ppOff, ppOn := pushPullRound(b, off, sz.n), pushPullRound(b, on, sz.n)
				ppOff() // warm up buffers and pools
				ppOn()
				var tOff, tOn time.Duration
				iters := 0
				for b.Loop() {
					t0 := time.Now()
					ppOff()
					t1 := time.Now()
					ppOn()
					tOn += time.Since(t1)
					tOff += t1.Sub(t0)
					iters++
				}
				gb := float64(8*sz.n*workers) * float64(iters) / 1e9
				b.ReportMetric(gb/tOff.Seconds(), "off-GB/s")
				b.ReportMetric(gb/tOn.Seconds(), "auth-GB/s")
				b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "auth/off")
				b.ReportMetric(tOff.Seconds()*1e6/float64(iters), "off-µs/op")
				b.ReportMetric((tOn-tOff).Seconds()*1e6/float64(iters), "auth-added-µs/op")
			})
		}
	}
}

// pushPullRound initializes n values on env and returns one push+pull of
// every worker, all at once.
func pushPullRound(b *testing.B, env benchEnv, n int) func() {
	ctx := context.Background()
	keys, rng := initBench(ctx, b, env, n)
	w := len(env.clients)
	grads, outs := make([][]float32, w), make([][]float32, w)
	for i := range env.clients {
		grads[i] = make([]float32, n)
		for j := range grads[i] {
			grads[i][j] = float32(rng.NormFloat64() * 1e-3)
		}
		outs[i] = make([]float32, n)
		if err := env.clients[i].Pull(ctx, keys, outs[i], nil); err != nil {
			b.Fatal(err)
		}
	}
	errs := make([]error, w)
	round := func(i int) error {
		if err := env.clients[i].Push(ctx, keys, grads[i], nil); err != nil {
			return err
		}
		return env.clients[i].Pull(ctx, keys, outs[i], nil)
	}
	return func() { fanOut(b, errs, round) }
}
