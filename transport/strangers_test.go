//go:build linux

package transport_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

// needFDs makes sure the process may open n more descriptors, raising
// the soft RLIMIT_NOFILE towards the hard one if needed, or skips.
func needFDs(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read RLIMIT_NOFILE: %v", err)
	}
	want := n + 256 // what the rest of the process holds, generously
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Skipf("needs %d descriptors, RLIMIT_NOFILE hard limit is %d", want, lim.Max)
	}
	old := lim
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise RLIMIT_NOFILE to %d: %v", want, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// holdStrangers opens n TCP connections to addr from the loopback
// addresses 127.0.0.2, 127.0.0.3, ... (sources of them, round robin), sends
// nothing on them and closes them at the end of the test. It skips when
// the host cannot bind those source addresses.
func holdStrangers(t *testing.T, addr string, n, sources int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		src := net.IPv4(127, 0, 0, byte(2+i%sources))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			if i == 0 {
				t.Skipf("cannot dial from %v (loopback sources other than 127.0.0.1 unavailable): %v", src, err)
			}
			t.Fatalf("stranger %d of %d from %v: %v", i+1, n, src, err)
		}
		conns = append(conns, c)
	}
}

// Finding 3 of issue 25: idle connections from hosts that hold no secret
// must not starve members of handshakes. 500 strangers connect and send
// nothing, from one source address and from ten; then a member (dialing
// from 127.0.0.1) connects and completes a request within its normal dial
// time: the ctx given to the request is twice the configured
// DialTimeout, so a dial that runs out its timeout fails the test.
func TestTCP_StrangersDoNotStarveMembers(t *testing.T) {
	const strangers = 500
	needFDs(t, 2*strangers+64)
	secret := []byte("falcon test secret")
	for _, sources := range []int{1, 10} {
		t.Run(fmt.Sprintf("sources=%d", sources), func(t *testing.T) {
			srv, err := transport.NewTCP(transport.TCPConfig{ID: "srv", Secret: secret}, transporttest.Echo{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			holdStrangers(t, srv.Addr().String(), strangers, sources)
			cfg := transport.DefaultTCPConfig()
			cfg.ID, cfg.Secret = "member", secret
			cfg.Peers = map[transport.NodeID]string{"srv": srv.Addr().String()}
			member, err := transport.NewTCP(cfg, transporttest.Echo{})
			if err != nil {
				t.Fatal(err)
			}
			defer member.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.DialTimeout)
			defer cancel()
			got, err := member.Request(ctx, "srv", []byte("member's request"))
			if err != nil || string(got) != "member's request" {
				t.Fatalf("member's request with %d strangers connected = %q, %v", strangers, got, err)
			}
		})
	}
}
