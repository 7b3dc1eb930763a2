package transport_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
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
	secret := []byte("example secret")
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
