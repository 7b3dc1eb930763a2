package ps

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

func rawPush(keys []uint64, lens []int, vals []float32) []byte {
	c := &Client{}
	ps := make([]piece, len(keys))
	off := 0
	for i, k := range keys {
		ps[i] = piece{key: k, n: lens[i], src: off}
		off += lens[i]
	}
	return c.encode(nil, opPush, ps, off, vals, plainPush)
}

// TestServer_ValidatesBeforeApplying sends a raw push (no client-side
// checks) naming a known key and then an unknown one: the server refuses
// it with the unknown-key code and applies nothing.
func TestServer_ValidatesBeforeApplying(t *testing.T) {
	s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.store.InitValues([]uint64{5}, []int{2}, []float32{1, 2})
	tests := []struct {
		name string
		req  []byte
		want error
	}{
		{"unknown key", rawPush([]uint64{5, 6}, []int{2, 1}, []float32{1, 1, 1}), ErrUnknownKey},
		{"wrong length", rawPush([]uint64{5}, []int{1}, []float32{1}), ErrLengthMismatch},
		{"unsorted", rawPush([]uint64{5, 5}, []int{2, 2}, []float32{1, 1, 1, 1}), ErrUnsortedKeys},
		{"truncated", rawPush([]uint64{5}, []int{2}, []float32{1, 1})[:20], ErrMalformed},
		{"bad version", append([]byte{9}, rawPush([]uint64{5}, []int{2}, []float32{1, 1})[1:]...), ErrWireVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.HandleRequest(context.Background(), "c", tt.req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseResponse(resp, "s")
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if v, _ := s.store.Value(nil, 5); v[0] != 1 || v[1] != 2 || s.store.Steps(5) != 0 {
				t.Errorf("refused push changed key 5 to %v", v)
			}
		})
	}
}

// TestServer_GarbageNeverPanics feeds random and mutated messages to every
// role's handler.
func TestServer_GarbageNeverPanics(t *testing.T) {
	s, _ := NewServer("s", DefaultServerConfig())
	s.store.InitValues([]uint64{5}, []int{2}, []float32{1, 2})
	rng := rand.New(rand.NewPCG(3, 4))
	good := rawPush([]uint64{5}, []int{2}, []float32{1, 1})
	for i := range 5000 {
		var msg []byte
		if i%2 == 0 {
			msg = make([]byte, rng.IntN(64))
			for j := range msg {
				msg[j] = byte(rng.UintN(256))
			}
			if len(msg) > 1 {
				msg[0] = wireVersion
				msg[1] = byte(1 + rng.IntN(int(opTransferTask)))
			}
		} else {
			msg = append([]byte(nil), good...)
			msg[rng.IntN(len(msg))] = byte(rng.UintN(256))
			msg = msg[:rng.IntN(len(msg)+1)]
		}
		resp, err := s.HandleRequest(context.Background(), "c", msg)
		if err != nil || len(resp) < 2 {
			t.Fatalf("bad response %v %v", resp, err)
		}
	}
}

func TestErrorCodesRoundTrip(t *testing.T) {
	for _, e := range []error{ErrUnknownKey, ErrLengthMismatch, ErrUnsortedKeys, ErrMalformed, ErrWireVersion, ErrRejected, ErrClosed} {
		_, err := parseResponse(errResponse(e), "peer")
		if !errors.Is(err, e) {
			t.Errorf("%v came back as %v", e, err)
		}
	}
	_, err := parseResponse(errResponse(errors.New("boom")), "peer")
	if !errors.Is(err, ErrRemote) {
		t.Errorf("unknown error came back as %v", err)
	}
}
