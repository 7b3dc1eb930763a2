package live

import (
	"errors"
	"reflect"
	"testing"

	"github.com/falconml/falcon/transport"
)

func samplePush() pushMsg {
	return pushMsg{Epoch: 7,
		Flows:  []pushFlow{{Coflow: 1, Flow: 2, Src: 0, Dst: 3, Bytes: 1 << 20, Class: 1, Rate: 1.5e6, Kind: kindLZ4, SendCores: 0.25, RecvCores: 0.5}},
		Failed: []failure{{Coflow: 4, Reason: reasonAgentDead, Node: "a3"}},
		Gone:   []uint64{9, 10}}
}

func sampleReport() reportMsg {
	return reportMsg{Progress: []progress{{Coflow: 1, Flow: 0, Acked: 65536, Wire: 20000}},
		Meas: []measurement{{Class: 0, Kind: kindSnappy, RawC: 65536, OutC: 30000, NsC: 100000, RawD: 65536, NsD: 20000}}}
}

// Every message decodes to what was encoded.
func TestWireRoundTrip(t *testing.T) {
	w := welcomeMsg{Port: 1, Names: []transport.NodeID{"a0", "a1"}}
	if got, err := decodeWelcome(encodeWelcome(w)); err != nil || !reflect.DeepEqual(got, w) {
		t.Errorf("welcome: %+v, %v", got, err)
	}
	r := registerMsg{Weight: 2, Flows: []wireFlow{{Src: 0, Dst: 1, Bytes: 10, Class: 0}, {Src: 1, Dst: 0, Bytes: 1 << 40, Class: 3}}}
	if got, err := decodeRegister(encodeRegister(r)); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("register: %+v, %v", got, err)
	}
	if got, err := decodeReport(encodeReport(sampleReport())); err != nil || !reflect.DeepEqual(got, sampleReport()) {
		t.Errorf("report: %+v, %v", got, err)
	}
	if got, err := decodePush(encodePush(samplePush())); err != nil || !reflect.DeepEqual(got, samplePush()) {
		t.Errorf("push: %+v, %v", got, err)
	}
	c := chunkMsg{Coflow: 3, Flow: 1, Class: 2, Offset: 65536, Total: 200000, Kind: kindRaw, RawLen: 5, Payload: []byte("hello")}
	got, err := decodeChunk(append(chunkHead(c), c.Payload...))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("chunk: %+v, %v", got, err)
	}
	if id, err := decodeID(encodeID(tRegistered, 42), tRegistered); err != nil || id != 42 {
		t.Errorf("id: %d, %v", id, err)
	}
}

// A list that declares more entries than its bytes can hold, a wrong
// version or type, a truncation or trailing bytes are refused with
// ErrMalformed, before anything is allocated for the declared count.
func TestWireRefuses(t *testing.T) {
	push := encodePush(samplePush())
	huge := append([]byte(nil), push[:10]...)
	huge = append(huge, 0x00, 0x0f, 0xff, 0xff) // a million flows, none present
	bad := map[string][]byte{
		"version":   append([]byte{9}, push[1:]...),
		"type":      append([]byte{wireVersion, tReport}, push[2:]...),
		"truncated": push[:len(push)-1],
		"trailing":  append(append([]byte(nil), push...), 0),
		"count":     huge,
		"empty":     nil,
	}
	for name, b := range bad {
		if _, err := decodePush(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	nan := samplePush()
	nan.Flows[0].Rate = -1
	if _, err := decodePush(encodePush(nan)); !errors.Is(err, ErrMalformed) {
		t.Errorf("negative rate: %v", err)
	}
	c := chunkMsg{Coflow: 1, Total: 10, Offset: 8, Kind: kindRaw, RawLen: 5}
	if _, err := decodeChunk(append(chunkHead(c), "hello"...)); !errors.Is(err, ErrMalformed) {
		t.Errorf("chunk past the flow's end: %v", err)
	}
}

// fuzzRoundTrip checks that what decodes re-encodes to the same bytes.
func fuzzRoundTrip[M any](t *testing.T, b []byte, dec func([]byte) (M, error), enc func(M) []byte) {
	m, err := dec(b)
	if err != nil {
		return
	}
	if again, err := dec(enc(m)); err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("re-encoded %+v decodes to %+v, %v", m, again, err)
	}
}

func FuzzDecodePush(f *testing.F) {
	f.Add(encodePush(samplePush()))
	f.Add(encodePush(pushMsg{}))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRoundTrip(t, b, decodePush, encodePush) })
}

func FuzzDecodeReport(f *testing.F) {
	f.Add(encodeReport(sampleReport()))
	f.Add(encodeReport(reportMsg{}))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRoundTrip(t, b, decodeReport, encodeReport) })
}

func FuzzDecodeRegister(f *testing.F) {
	f.Add(encodeRegister(registerMsg{Weight: 1, Flows: []wireFlow{{Src: 0, Dst: 1, Bytes: 5}}}))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRoundTrip(t, b, decodeRegister, encodeRegister) })
}

func FuzzDecodeWelcome(f *testing.F) {
	f.Add(encodeWelcome(welcomeMsg{Port: 0, Names: []transport.NodeID{"a0", "a1"}}))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRoundTrip(t, b, decodeWelcome, encodeWelcome) })
}

func FuzzDecodeChunk(f *testing.F) {
	c := chunkMsg{Coflow: 1, Total: 10, Kind: kindRaw, RawLen: 5}
	f.Add(append(chunkHead(c), "hello"...))
	lz := chunkMsg{Coflow: 1, Total: 100, Kind: kindLZ4, RawLen: 100}
	out, _, _ := compress(kindLZ4, make([]byte, 100))
	f.Add(append(chunkHead(lz), out...))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeChunk(b)
		if err != nil {
			return
		}
		// The receiver's decompression into the declared size never
		// panics and never writes past it.
		dst := make([]byte, m.RawLen+8)
		_ = decompress(m.Kind, m.Payload, dst[:m.RawLen:m.RawLen])
		if again, err := decodeChunk(append(chunkHead(m), m.Payload...)); err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", m, again, err)
		}
	})
}

func FuzzDecodeID(f *testing.F) {
	f.Add(encodeID(tRegistered, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeID(b, tRegistered)
		if err == nil && !reflect.DeepEqual(encodeID(tRegistered, id), b) {
			t.Fatalf("id %d re-encodes differently", id)
		}
	})
}
