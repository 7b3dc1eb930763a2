package ps

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
)

const testFP = "policy=bsp workers=3 slots=3 servers=server-0"

// sampleLog returns a log with one entry of every kind.
func sampleLog() *coordLog {
	l := &coordLog{fp: testFP}
	l.hello(0, 0xfeed)
	l.admit(3*time.Millisecond, epsp.Push{Worker: 1, Owner: 1, Clock: 2, BaseVersion: 1, Samples: 8, BatchSamples: 8, Busy: time.Millisecond,
		Parts: []epsp.PushPart{{Owner: 1, Clock: 2, Samples: 6}, {Owner: 2, Clock: 2, Samples: 2}}})
	l.step(4*time.Millisecond, epsp.Event{Kind: epsp.EventClock, Worker: 1, Clock: 2})
	l.step(5*time.Millisecond, epsp.Event{Kind: epsp.EventProgress, Worker: 2, Clock: 2,
		Progress: epsp.ProgressReport{Worker: 2, Clock: 2, Done: 3, Assigned: 8, Claimed: 4, Parallelism: 1, Elapsed: time.Second}})
	l.step(6*time.Millisecond, epsp.Event{Kind: epsp.EventTransferResult, Worker: 2, Transfer: epsp.TransferResult{ID: 7, Accepted: true, Lo: 4, Hi: 8}})
	l.step(7*time.Millisecond, epsp.Event{Kind: epsp.EventLeave, Worker: 0, Quit: true})
	l.handOver(2, 1)
	l.retarget(2, []epsp.WorkerID{0, 1})
	l.abandon(2)
	l.lost(2, "silent for 2s")
	return l
}

// TestCoordState_RoundTrip: every entry kind decodes to what was
// logged, and the decoded log re-encodes to the same bytes.
func TestCoordState_RoundTrip(t *testing.T) {
	l := sampleLog()
	b := encodeCoordState(nil, l.fp, l.b)
	es, log, cut, err := decodeCoordState(b, testFP, 3)
	if err != nil || cut != 0 {
		t.Fatal(err, cut)
	}
	if len(es) != 10 || !bytes.Equal(log, l.b) {
		t.Fatalf("%d entries, log equal %v", len(es), bytes.Equal(log, l.b))
	}
	if p := es[1].push; es[1].kind != entAdmit || es[1].now != 3*time.Millisecond || p.Worker != 1 || len(p.Parts) != 2 || p.Parts[1].Owner != 2 || p.Busy != time.Millisecond {
		t.Errorf("admit entry = %+v", es[1])
	}
	if e := es[3].ev; e.Kind != epsp.EventProgress || e.Progress.Done != 3 || e.Progress.Elapsed != time.Second {
		t.Errorf("progress entry = %+v", e)
	}
	if e := es[4].ev; e.Transfer.ID != 7 || !e.Transfer.Accepted || e.Transfer.Hi != 8 {
		t.Errorf("transfer entry = %+v", e)
	}
	if !es[5].ev.Quit || es[0].inc != 0xfeed || len(es[7].to) != 2 || es[9].why != "silent for 2s" {
		t.Errorf("entries = %+v", es)
	}
	if again := encodeCoordState(nil, testFP, log); !bytes.Equal(again, b) {
		t.Error("re-encoding differs")
	}
}

// TestCoordState_TornTailCut: a state whose last record was cut short,
// or whose last record fails its CRC (an append a crash tore), decodes
// to the records before it; a bad record before the last refuses the
// state.
func TestCoordState_TornTailCut(t *testing.T) {
	l := sampleLog()
	b := encodeCoordState(nil, l.fp, l.b)
	for _, k := range []int{1, 5, 9} {
		es, _, cut, err := decodeCoordState(b[:len(b)-k], testFP, 3)
		if err != nil || len(es) != 9 || cut == 0 {
			t.Errorf("cut %d bytes: %d entries, cut %d, %v; want 9 entries", k, len(es), cut, err)
		}
	}
	last := bytes.Clone(b)
	last[len(last)-1] ^= 1
	if es, _, cut, err := decodeCoordState(last, testFP, 3); err != nil || len(es) != 9 || cut == 0 {
		t.Errorf("last record bit-flipped: %d entries, cut %d, %v", len(es), cut, err)
	}
	mid := bytes.Clone(b)
	mid[len(encodeCoordState(nil, testFP, nil))+12] ^= 1 // the first record's body
	if _, _, _, err := decodeCoordState(mid, testFP, 3); !errors.Is(err, ErrCoordinatorState) {
		t.Errorf("first record bit-flipped: %v, want ErrCoordinatorState", err)
	}
}

// TestCoordState_AppendsAfterOneSave: with an appending store the log is
// saved whole once, then appended to: the store holds exactly the whole
// state, and the bytes written grow with the log, not its square.
func TestCoordState_AppendsAfterOneSave(t *testing.T) {
	dir := t.TempDir()
	l := &coordLog{fp: testFP, store: DirCoordinatorStore(dir)}
	ctx := context.Background()
	for i := range 200 {
		l.step(time.Duration(i), epsp.Event{Kind: epsp.EventClock, Worker: 0, Clock: i})
		if err := l.persist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := DirCoordinatorStore(dir).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := encodeCoordState(nil, testFP, l.b); !bytes.Equal(got, want) {
		t.Fatalf("stored %d bytes, want the whole state's %d", len(got), len(want))
	}
	if l.saves != 200 || l.bytes != int64(len(got)) {
		t.Fatalf("%d saves wrote %d bytes, want 200 writing %d (one whole save, then appends)", l.saves, l.bytes, len(got))
	}
}

// TestCoordState_Refusals: a state with a truncated or bit-flipped
// header, of a future version, of another cluster, or with a worker out
// of range is refused with ErrCoordinatorState (a torn last record is
// cut instead: TestCoordState_TornTailCut).
func TestCoordState_Refusals(t *testing.T) {
	l := sampleLog()
	b := encodeCoordState(nil, l.fp, l.b)
	flip := bytes.Clone(b)
	flip[20] ^= 1 // in the header
	ver := bytes.Clone(b)
	ver[8] = 9
	for name, c := range map[string]struct {
		b     []byte
		fp    string
		slots int
	}{
		"truncated header":    {b[:14], testFP, 3},
		"bit flip":            {flip, testFP, 3},
		"version":             {ver, testFP, 3},
		"foreign":             {b, "policy=ssp(s=1) workers=3 slots=3 servers=server-0", 3},
		"worker out of range": {b, testFP, 2},
		"empty":               {nil, testFP, 3},
	} {
		if _, _, _, err := decodeCoordState(c.b, c.fp, c.slots); !errors.Is(err, ErrCoordinatorState) {
			t.Errorf("%s: err = %v, want ErrCoordinatorState", name, err)
		}
	}
}

// TestCoordState_PersistOnlyWhenNew: persist saves only when entries
// were added since the last save.
func TestCoordState_PersistOnlyWhenNew(t *testing.T) {
	l := &coordLog{fp: testFP, store: DirCoordinatorStore(t.TempDir())}
	ctx := context.Background()
	if err := l.persist(ctx); err != nil || l.saves != 0 {
		t.Fatalf("empty log: err %v, %d saves", err, l.saves)
	}
	l.hello(0, 1)
	for range 3 {
		if err := l.persist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if l.saves != 1 {
		t.Fatalf("%d saves of one entry, want 1", l.saves)
	}
}

// FuzzCoordState: no input makes the decoder panic or allocate beyond
// its input; what decodes re-encodes to the same bytes.
func FuzzCoordState(f *testing.F) {
	l := sampleLog()
	f.Add(encodeCoordState(nil, l.fp, l.b))
	f.Add(encodeCoordState(nil, testFP, nil))
	f.Add([]byte("FALCCSTA"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, log, cut, err := decodeCoordState(b, testFP, 3)
		if err != nil {
			if !errors.Is(err, ErrCoordinatorState) {
				t.Fatalf("error without ErrCoordinatorState: %v", err)
			}
			return
		}
		if again := encodeCoordState(nil, testFP, log); !bytes.Equal(again, b[:len(b)-cut]) || len(es) > len(log)/9 {
			t.Fatal("decoded state re-encodes differently")
		}
	})
}

// BenchmarkCoordinatorState measures what a durable coordinator adds:
// logging a BSP clock's entries (4 workers: admit, 4 progress reports,
// clock each), encoding the state of a 1000-clock run, and replaying it.
func BenchmarkCoordinatorState(b *testing.B) {
	const workers, clocks = 4, 1000
	build := func() *coordLog {
		l := &coordLog{fp: "policy=bsp workers=4 slots=4 servers=server-0"}
		now := time.Duration(0)
		for c := range clocks {
			for w := range workers {
				id := epsp.WorkerID(w)
				for p := range 4 {
					now += time.Microsecond
					l.step(now, epsp.Event{Kind: epsp.EventProgress, Worker: id, Clock: c,
						Progress: epsp.ProgressReport{Worker: id, Clock: c, Done: 2 * p, Assigned: 8, Parallelism: 1}})
				}
				l.admit(now, epsp.Push{Worker: id, Owner: id, Clock: c, BaseVersion: uint64(c), Samples: 8, BatchSamples: 8})
				l.step(now, epsp.Event{Kind: epsp.EventClock, Worker: id, Clock: c})
			}
		}
		return l
	}
	b.Run("log-1000-clocks", func(b *testing.B) {
		for b.Loop() {
			build()
		}
	})
	l := build()
	st := encodeCoordState(nil, l.fp, l.b)
	b.Logf("%d entries, %d bytes (%.1f bytes/entry)", l.n, len(st), float64(len(st))/float64(l.n))
	b.Run("encode", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = encodeCoordState(buf[:0], l.fp, l.b)
		}
	})
	b.Run("append-dir-one-clock", func(b *testing.B) {
		// what a clock adds (4 workers' 6 entries), appended
		s := DirCoordinatorStore(b.TempDir())
		if err := s.Save(context.Background(), st); err != nil {
			b.Fatal(err)
		}
		tail := l.b[len(l.b)-len(l.b)/clocks:]
		for b.Loop() {
			if err := s.(CoordinatorAppender).Append(context.Background(), tail); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("save-dir", func(b *testing.B) {
		s := DirCoordinatorStore(b.TempDir())
		for b.Loop() {
			if err := s.Save(context.Background(), st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			core, err := epsp.NewCoordinator(epsp.Config{NumWorkers: workers, Batch: 8}, epsp.NewBSP())
			if err != nil {
				b.Fatal(err)
			}
			es, _, _, err := decodeCoordState(st, l.fp, workers)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range es {
				switch e.kind {
				case entAdmit:
					_, err = core.Admit(e.now, e.push)
				case entStep:
					_, err = core.Step(e.now, e.ev)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
