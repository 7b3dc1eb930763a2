package transporttest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/transport"
	"github.com/falconml/falcon/transport/transporttest"
)

func TestWithHooks(t *testing.T) {
	net := transport.NewInmemNetwork()
	defer net.Close()
	rec := &transporttest.Recorder{}
	a, _ := net.Join("a", transporttest.Echo{})
	if _, err := net.Join("b", rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	boom := errors.New("injected")
	var sends atomic.Int64
	w := transporttest.WithHooks(a, transporttest.Hooks{
		BeforeRequest: func(_ context.Context, _ transport.NodeID, req []byte) error {
			if string(req) == "fail" {
				return boom
			}
			return nil
		},
		AfterRequest: func(_ transport.NodeID, _, resp []byte, err error) ([]byte, error) {
			return append(resp, '!'), err
		},
		BeforeSend: func(_ context.Context, _ transport.NodeID, msg []byte) error {
			if sends.Add(1)%2 == 0 {
				return transporttest.ErrDrop
			}
			return nil
		},
	})
	if _, err := w.Request(ctx, "b", []byte("fail")); !errors.Is(err, boom) {
		t.Fatalf("hooked Request: err = %v, want the injected error", err)
	}
	if rec.NumRequests() != 0 {
		t.Fatal("a request refused by BeforeRequest was sent")
	}
	if got, err := w.Request(ctx, "b", []byte("hi")); err != nil || string(got) != "hi!" {
		t.Fatalf("hooked Request = %q, %v; want %q", got, err, "hi!")
	}
	for i := range 6 {
		if err := w.Send(ctx, "b", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(ctx, "b", []byte("end")); err != nil {
		t.Fatal(err)
	}
	msgs, err := rec.WaitMessages(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(msgs[0].Body, msgs[1].Body, msgs[2].Body, " ", string(msgs[3].Body)); got != "[0] [2] [4] end" {
		t.Fatalf("delivered %s, want every other message then end", got)
	}
	if w.LocalID() != "a" {
		t.Fatalf("LocalID = %q", w.LocalID())
	}
}

func TestRecorder_WaitMessagesTimesOut(t *testing.T) {
	rec := &transporttest.Recorder{}
	rec.HandleMessage("x", []byte("one"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	msgs, err := rec.WaitMessages(ctx, 2)
	if !errors.Is(err, context.DeadlineExceeded) || len(msgs) != 1 {
		t.Fatalf("WaitMessages = %d messages, %v; want 1 and DeadlineExceeded", len(msgs), err)
	}
	buf := []byte("mutable")
	rec.HandleMessage("x", buf)
	buf[0] = 'M'
	if got := string(rec.Messages()[1].Body); got != "mutable" {
		t.Fatalf("Recorder kept %q, want its own copy %q", got, "mutable")
	}
}

// The suite also runs against a hooked transport with no-op hooks, which
// shows the wrapper keeps the contract.
func TestRun_HookedInmem(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, hs []transport.Handler) *transporttest.Cluster {
		net := transport.NewInmemNetwork()
		t.Cleanup(func() { net.Close() })
		c := &transporttest.Cluster{}
		for i, h := range hs {
			n, err := net.Join(transport.NodeID(fmt.Sprint("node", i)), h)
			if err != nil {
				t.Fatal(err)
			}
			c.Nodes = append(c.Nodes, transporttest.WithHooks(n, transporttest.Hooks{}))
		}
		return c
	})
}
