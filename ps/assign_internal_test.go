package ps

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/internal/wire"
	"github.com/falconml/falcon/transport"
)

func TestReleaseRoundTrip(t *testing.T) {
	for _, ra := range []*releaseAssign{
		nil,
		{batch: 16, keep: 10},
		{batch: 8, keep: 8, pieces: []assignedPiece{{owner: 2, lo: 10, hi: 13, batch: 16}, {owner: 0, lo: 0, hi: 4, batch: 4}}},
	} {
		e := wire.NewMsg(nil, wire.OpRelease)
		encodeRelease(&e, 7, 42, ra)
		o, body, err := wire.Header(e.B)
		if err != nil || o != wire.OpRelease {
			t.Fatal(o, err)
		}
		d := decoder{B: body}
		c, v, got, err := decodeRelease(&d)
		if err != nil || c != 7 || v != 42 || !reflect.DeepEqual(got, ra) {
			t.Errorf("decoded clock %d version %d %+v (err %v), want %+v", c, v, got, err, ra)
		}
		// every truncation but the one at the end of the old, short form
		// is an error
		for cut := 1; cut < len(body); cut++ {
			d := decoder{B: body[:cut]}
			_, _, got, err := decodeRelease(&d)
			if cut == 16 && err == nil && got == nil {
				continue
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("release cut at %d of %d: err %v", cut, len(body), err)
			}
		}
	}
}

// TestReleaseDecode_Bounded: crafted counts and sizes are refused before
// anything is allocated for them.
func TestReleaseDecode_Bounded(t *testing.T) {
	mk := func(batch, keep int64, n uint32, pieces ...int64) []byte {
		var e encoder
		e.I64(1)
		e.U64(0)
		e.I64(batch)
		e.I64(keep)
		e.U32(n)
		for _, p := range pieces {
			e.I64(p)
		}
		return e.B
	}
	big := int64(maxWireBatch)
	for name, b := range map[string][]byte{
		"count past the bytes": mk(8, 8, 1<<31, 0, 0, 4, 8),
		"keep past batch":      mk(8, 9, 0),
		"batch too big":        mk(big+1, 0, 0),
		"empty piece":          mk(8, 8, 1, 1, 4, 4, 8),
		"piece past its batch": mk(8, 8, 1, 1, 4, 9, 8),
		"too many samples":     mk(8, 8, 2, 1, 0, big, big, 2, 0, big, big),
		"negative owner":       mk(8, 8, 1, -1, 0, 4, 8),
		"trailing bytes":       append(mk(8, 8, 0), 0),
	} {
		d := decoder{B: b}
		if _, _, ra, err := decodeRelease(&d); !errors.Is(err, ErrMalformed) || ra != nil {
			t.Errorf("%s: %+v, err %v", name, ra, err)
		}
	}
}

func TestPushRoundTrip(t *testing.T) {
	for _, in := range []epsp.Push{
		{Worker: 1, Owner: 1, Clock: 3, BaseVersion: 9, Samples: 8, BatchSamples: 8, Busy: 1500 * time.Microsecond},
		{Worker: 2, Owner: 2, Clock: 4, BaseVersion: 9, Samples: 11, BatchSamples: 11, Busy: time.Millisecond,
			Parts: []epsp.PushPart{{Owner: 2, Clock: 4, Samples: 8}, {Owner: 0, Clock: 4, Samples: 3}}},
	} {
		var e encoder
		encodePush(&e, in)
		d := decoder{B: e.B}
		out := decodePush(&d)
		if err := d.End(); err != nil || !reflect.DeepEqual(out, in) {
			t.Errorf("decoded %+v (err %v), want %+v", out, err, in)
		}
		for cut := range len(e.B) {
			d := decoder{B: e.B[:cut]}
			decodePush(&d)
			if !errors.Is(d.End(), ErrMalformed) {
				t.Errorf("push cut at %d of %d decoded", cut, len(e.B))
			}
		}
	}
	// A crafted part count is refused before the parts are allocated.
	var e encoder
	encodePush(&e, epsp.Push{Worker: 1, Owner: 1, Samples: 1, BatchSamples: 1})
	binary.LittleEndian.PutUint32(e.B[len(e.B)-4:], math.MaxUint32)
	e.I64(1)
	e.I64(0)
	e.I64(1)
	d := decoder{B: e.B}
	if p := decodePush(&d); !errors.Is(d.End(), ErrMalformed) || p.Parts != nil {
		t.Errorf("count 2^32-1 with one part: %+v, err %v", p.Parts, d.Err)
	}
	// Negative busy time.
	e = encoder{}
	encodePush(&e, epsp.Push{Worker: 1, Owner: 1, Samples: 1, BatchSamples: 1, Busy: -1})
	d = decoder{B: e.B}
	if decodePush(&d); !errors.Is(d.End(), ErrMalformed) {
		t.Errorf("negative busy time decoded")
	}
}

// recModel records the sample ids of each Gradient call.
type recModel struct {
	mu    sync.Mutex
	calls [][]int
}

func (m *recModel) Gradient(_ []float32, samples []int, grad []float32) float64 {
	m.mu.Lock()
	m.calls = append(m.calls, append([]int(nil), samples...))
	m.mu.Unlock()
	grad[0] += float32(len(samples))
	return 0
}

type idSampler struct{}

// Batch numbers owner's samples of clock owner·1000 + clock·100 + i.
func (idSampler) Batch(owner epsp.WorkerID, clock, size int) []int {
	ids := make([]int, size)
	for i := range ids {
		ids[i] = int(owner)*1000 + clock*100 + i
	}
	return ids
}

func testWorker(t *testing.T, m Model, obs Observer) *Worker {
	t.Helper()
	cfg := DefaultWorkerConfig()
	cfg.ID = 1
	cfg.Coordinator = "coordinator"
	cfg.Client.Servers = []transport.NodeID{"s0"}
	cfg.Chunk = 3
	cfg.ProgressEvery = 1 << 20
	w, err := NewWorker("w1", cfg, WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	w.model, w.sampler = m, idSampler{}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestJob_OneCursorAcrossPieces: a taker's job claims its own samples and
// then the assigned pieces with one cursor, chunks filled across the
// boundaries, the pieces' sample ids those of their owners' batches, each
// chunk part reported under its owner, and one push's parts and sums.
func TestJob_OneCursorAcrossPieces(t *testing.T) {
	m := &recModel{}
	var mu sync.Mutex
	var chunks []Event
	w := testWorker(t, m, ObserverFunc(func(e Event) {
		mu.Lock()
		chunks = append(chunks, e)
		mu.Unlock()
	}))
	w.mu.Lock()
	w.batch = 4
	_ = w.setReleasedAssignLocked(2, 0, &releaseAssign{batch: 4, keep: 4, pieces: []assignedPiece{
		{owner: 0, lo: 6, hi: 8, batch: 8}, {owner: 2, lo: 3, hi: 4, batch: 4}, {owner: 0, lo: 8, hi: 10, batch: 10}}})
	j := w.cur
	w.mu.Unlock()
	j.start([]float32{0}, 0, 1)
	<-j.doneCh
	want := [][]int{{1200, 1201, 1202}, {1203}, {206, 207}, {2203}, {208, 209}}
	if !slices.EqualFunc(m.calls, want, slices.Equal) {
		t.Errorf("gradient calls %v, want %v", m.calls, want)
	}
	type part struct {
		owner  epsp.WorkerID
		lo, hi int
	}
	var got []part
	for _, e := range chunks {
		if e.Kind == EvChunk {
			got = append(got, part{e.Owner, e.Lo, e.Hi})
		}
	}
	if wantParts := []part{{1, 0, 3}, {1, 3, 4}, {0, 6, 8}, {2, 3, 4}, {0, 8, 10}}; !slices.Equal(got, wantParts) {
		t.Errorf("chunks %v, want %v", got, wantParts)
	}
	if j.done != 4 || j.xdone != 5 || j.xtotal != 5 || j.grad[0] != 9 {
		t.Errorf("done %d, extra %d/%d, grad %v", j.done, j.xdone, j.xtotal, j.grad)
	}
	wantPush := []epsp.PushPart{{Owner: 1, Clock: 2, Samples: 4}, {Owner: 0, Clock: 2, Samples: 4}, {Owner: 2, Clock: 2, Samples: 1}}
	if p := j.pushParts(1); !slices.Equal(p, wantPush) {
		t.Errorf("parts %+v, want %+v", p, wantPush)
	}
	if j.busy() <= 0 {
		t.Errorf("busy %v", j.busy())
	}
}

// TestJob_GiverAndTakerGiving: a giver's job covers [0, keep) and gives
// reactively only from its end; a taker's job gives nothing.
func TestJob_GiverAndTakerGiving(t *testing.T) {
	w := testWorker(t, &recModel{}, nil)
	w.mu.Lock()
	w.batch = 16
	_ = w.setReleasedAssignLocked(1, 0, &releaseAssign{batch: 16, keep: 10})
	g := w.cur
	w.mu.Unlock()
	if g.hi0 != 10 || g.ownedEnd() != 10 {
		t.Fatalf("giver's own range ends at %d (owned end %d), want 10", g.hi0, g.ownedEnd())
	}
	if acc, _, _, _ := w.giveTail(epsp.TransferOrder{Clock: 1, Lo: 12, Hi: 16}); acc {
		t.Error("giver gave samples it assigned away at release")
	}
	if acc, lo, hi, b := w.giveTail(epsp.TransferOrder{Clock: 1, Lo: 7, Hi: 10}); !acc || lo != 7 || hi != 10 || b != 16 {
		t.Errorf("giver's tail [7,10): %v [%d,%d) of %d", acc, lo, hi, b)
	}
	w.mu.Lock()
	_ = w.setReleasedAssignLocked(2, 0, &releaseAssign{batch: 16, keep: 16, pieces: []assignedPiece{{owner: 0, lo: 12, hi: 16, batch: 16}}})
	w.mu.Unlock()
	if acc, _, _, _ := w.giveTail(epsp.TransferOrder{Clock: 2, Lo: 14, Hi: 16}); acc {
		t.Error("taker with assigned samples gave its own tail")
	}
	// a release assigning the worker its own samples fails the worker
	w.mu.Lock()
	err := w.setReleasedAssignLocked(3, 0, &releaseAssign{batch: 16, keep: 16, pieces: []assignedPiece{{owner: 1, lo: 0, hi: 4, batch: 16}}})
	c := w.released
	w.mu.Unlock()
	if c != 2 || !errors.Is(err, ErrMalformed) {
		t.Errorf("released into %d (err %v) by a release assigning the worker its own samples", c, err)
	}
}

func TestReleaseAssignments(t *testing.T) {
	c, err := epsp.NewCoordinator(epsp.Config{NumWorkers: 3, Batch: 8, Parallelism: 1}, epsp.NewBSP())
	if err != nil {
		t.Fatal(err)
	}
	out := epsp.Output{Assign: []epsp.Assignment{{From: 0, To: 2, Clock: 1, Lo: 6, Hi: 8}, {From: 0, To: 1, Clock: 1, Lo: 3, Hi: 6}, {From: 1, To: 2, Clock: 1, Lo: 7, Hi: 8}}}
	m, err := releaseAssignments(out, c.View())
	if err != nil {
		t.Fatal(err)
	}
	want := map[epsp.WorkerID]*releaseAssign{
		0: {batch: 8, keep: 3},
		1: {batch: 8, keep: 7, pieces: []assignedPiece{{owner: 0, lo: 3, hi: 6, batch: 8}}},
		2: {batch: 8, keep: 8, pieces: []assignedPiece{{owner: 0, lo: 6, hi: 8, batch: 8}, {owner: 1, lo: 7, hi: 8, batch: 8}}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %+v, want %+v", m, want)
	}
	out.Assign[0].Hi = 7 // pieces no longer end at the batch
	if _, err := releaseAssignments(out, c.View()); !errors.Is(err, epsp.ErrPolicyOutput) {
		t.Errorf("pieces ending at 7 of 8: err %v", err)
	}
}

func TestPushDecode_PartBounds(t *testing.T) {
	for _, n := range []int{0, maxWireBatch + 1} {
		var e encoder
		encodePush(&e, epsp.Push{Worker: 1, Owner: 1, Samples: 1, BatchSamples: 1, Parts: []epsp.PushPart{{Owner: 1, Samples: n}}})
		d := decoder{B: e.B}
		if decodePush(&d); !errors.Is(d.End(), ErrMalformed) {
			t.Errorf("part of %d samples decoded", n)
		}
	}
}

// TestWorker_MalformedReleaseFails: a release the worker cannot decode
// fails it (it would otherwise wait for that release forever).
func TestWorker_MalformedReleaseFails(t *testing.T) {
	w := testWorker(t, &recModel{}, nil)
	net := transport.NewInmemNetwork()
	defer net.Close()
	tr, err := net.Join("w1", w)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	w.mu.Lock()
	w.tr = tr
	w.mu.Unlock()
	e := wire.NewMsg(nil, wire.OpRelease)
	encodeRelease(&e, 1, 0, &releaseAssign{batch: 8, keep: 8, pieces: []assignedPiece{{owner: 0, lo: 4, hi: 8, batch: 8}}})
	w.HandleMessage("coordinator", e.B[:len(e.B)-1])
	if !errors.Is(w.Err(), ErrMalformed) {
		t.Fatalf("truncated release: worker error %v, want ErrMalformed", w.Err())
	}
}
