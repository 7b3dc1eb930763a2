package transport_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// Two in-process nodes: a request/response call, then the same call over
// a cut link.
func Example_inmem() {
	net := transport.NewInmemNetwork()
	defer net.Close()

	upper := transporttest.Funcs{Request: func(_ context.Context, from transport.NodeID, req []byte) ([]byte, error) {
		return []byte(strings.ToUpper(string(req)) + " from " + string(from)), nil
	}}
	server, _ := net.Join("server", upper)
	worker, _ := net.Join("worker", transporttest.Echo{})
	_ = server

	ctx := context.Background()
	resp, err := worker.Request(ctx, "server", []byte("pull"))
	fmt.Println(string(resp), err)

	net.Disconnect("worker", "server")
	_, err = worker.Request(ctx, "server", []byte("pull"))
	fmt.Println(err)

	// Output:
	// PULL from worker <nil>
	// transport: peer unreachable: link "worker"-"server" is down
}

// Two TCP nodes on loopback sharing a secret; the server answers with the
// sum of the float32 values it receives.
func Example_tcp() {
	sum := transporttest.Funcs{Request: func(_ context.Context, _ transport.NodeID, req []byte) ([]byte, error) {
		var s float32
		for i := 0; i+4 <= len(req); i += 4 {
			s += math.Float32frombits(binary.LittleEndian.Uint32(req[i:]))
		}
		return []byte(fmt.Sprint(s)), nil
	}}
	secret := []byte("example secret of 32 bytes, ok..")
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "server", Secret: secret}, sum)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	cfg := transport.DefaultTCPConfig()
	cfg.ID = "worker"
	cfg.Secret = secret
	cfg.Compression = transport.AboveSize(1024, transport.CodecLZ4)
	cfg.Peers = map[transport.NodeID]string{"server": srv.Addr().String()}
	wrk, err := transport.NewTCP(cfg, transporttest.Echo{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wrk.Close()

	grad := make([]byte, 4*1000)
	for i := range 1000 {
		binary.LittleEndian.PutUint32(grad[4*i:], math.Float32bits(0.5))
	}
	resp, err := wrk.Request(context.Background(), "server", grad)
	fmt.Println(string(resp), err)

	_, err = wrk.Request(context.Background(), "nobody", grad)
	fmt.Println(err)
	// Output:
	// 500 <nil>
	// transport: unknown peer: "nobody"
}

// A policy compresses only messages worth it; codecs round-trip exactly.
func ExampleAboveSize() {
	p := transport.AboveSize(64<<10, transport.CodecLZ4)
	small, big := make([]byte, 100), make([]byte, 1<<20)
	fmt.Println(p.Choose("server", small), p.Choose("server", big))

	wire, _ := transport.Compress(nil, transport.CodecLZ4, big)
	raw, err := transport.Decompress(nil, transport.CodecLZ4, wire, len(big), transport.DefaultMaxFrameSize)
	fmt.Println(len(wire) < len(big)/100, len(raw) == len(big), err)
	// Output:
	// none lz4
	// true true <nil>
}

// Partition splits the network into groups that cannot reach each other;
// Heal restores it.
func ExampleInmemNetwork_Partition() {
	net := transport.NewInmemNetwork()
	defer net.Close()
	for _, id := range []transport.NodeID{"s0", "w1", "w2"} {
		net.Join(id, transporttest.Echo{})
	}
	w1 := net.Node("w1")
	ctx := context.Background()

	net.Partition([]transport.NodeID{"s0", "w2"}, []transport.NodeID{"w1"})
	_, err := w1.Request(ctx, "s0", []byte("push"))
	fmt.Println(errors.Is(err, transport.ErrUnreachable))

	net.Heal()
	resp, err := w1.Request(ctx, "s0", []byte("push"))
	fmt.Println(string(resp), err)
	// Output:
	// true
	// push <nil>
}

// Drops are drawn from the network's seeded source, so a run is
// repeatable: the same seed loses the same messages.
func ExampleInmemNetwork_SetDropRate() {
	delivered := func(seed uint64) int {
		net := transport.NewInmemNetwork(transport.WithRand(rand.New(rand.NewPCG(seed, 0))))
		defer net.Close()
		rec := &transporttest.Recorder{}
		a, _ := net.Join("a", transporttest.Echo{})
		net.Join("b", rec)
		ctx := context.Background()
		net.SetDropRate(0.25)
		for i := range 100 {
			a.Send(ctx, "b", []byte{byte(i)})
		}
		net.SetDropRate(0)
		a.Send(ctx, "b", []byte("end")) // FIFO: arrives after all survivors
		msgs, _ := rec.WaitMessages(ctx, 1)
		for string(msgs[len(msgs)-1].Body) != "end" {
			msgs, _ = rec.WaitMessages(ctx, len(msgs)+1)
		}
		return len(msgs) - 1
	}
	// Same seed, same survivors; another seed, other losses (about 75 of
	// 100 survive a drop rate of 0.25).
	fmt.Println(delivered(42), delivered(42), delivered(1))
	// Output:
	// 77 77 64
}

// Keys minted per pair by the operator: each node is given only its own
// keys (a key file, LoadPairKeys), so the name the server's handler sees
// is one the worker could not have borrowed.
func ExampleMintPairKeys() {
	master := []byte("32 random bytes, kept by the operator") // use crypto/rand
	nodes := []transport.NodeID{"coordinator", "server-0", "worker-3"}
	keysOf := func(n transport.NodeID) transport.PairKeys {
		k, err := transport.MintPairKeys(master, n, nodes) // the operator's tool
		if err != nil {
			log.Fatal(err)
		}
		return k
	}
	whoami := transporttest.Funcs{Request: func(_ context.Context, from transport.NodeID, _ []byte) ([]byte, error) {
		return []byte("hello " + string(from)), nil
	}}
	srv, err := transport.NewTCP(transport.TCPConfig{ID: "server-0", PeerSecret: keysOf("server-0").Secret}, whoami)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dial := func(id transport.NodeID, keys transport.PairKeys) *transport.TCP {
		t, err := transport.NewTCP(transport.TCPConfig{ID: id, PeerSecret: keys.Secret,
			Peers: map[transport.NodeID]string{"server-0": srv.Addr().String()}}, transporttest.Echo{})
		if err != nil {
			log.Fatal(err)
		}
		return t
	}
	for _, id := range []transport.NodeID{"coordinator", "worker-3"} {
		n := dial(id, keysOf(id))
		resp, err := n.Request(context.Background(), "server-0", nil)
		fmt.Println(string(resp), err)
		n.Close()
	}

	impostor := dial("coordinator", keysOf("worker-3")) // worker-3's keys under another name
	defer impostor.Close()
	_, err = impostor.Request(context.Background(), "server-0", nil)
	fmt.Println(errors.Is(err, transport.ErrUnauthorized))

	// Output:
	// hello coordinator <nil>
	// hello worker-3 <nil>
	// true
}
