package transport_test

import (
	"context"
	"fmt"
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
