package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testTTL is the lease TTL of the tests: the embedded server's minimum
// with etcd's default election timeout (1 s × 1.5, rounded up).
const testTTL = 2 * time.Second

// slack is added to every bound derived from the TTL: the tests share a
// loaded 2-core machine with other work.
const slack = 10 * time.Second

var prefixSeq atomic.Int64

// freshPrefix returns a key prefix no other test uses.
func freshPrefix(t *testing.T) string {
	return fmt.Sprintf("/falcon-test/%s-%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1))
}

// newBackend opens a Backend of its own (its own client: closing it is a
// crash of that process) under prefix.
func newBackend(t *testing.T, prefix, name string) *Backend {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoints = []string{needEtcd(t)}
	cfg.Prefix = prefix
	cfg.TTL = testTTL
	cfg.Name = name
	cfg.RequestTimeout = slack
	cfg.Logger = zap.NewNop() // the client's retries of a closed backend are expected here
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConfig_Validate(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	var zero Config
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	for name, c := range map[string]Config{
		"prefix without slash": {Prefix: "falcon"},
		"prefix open":          {Prefix: "/falcon"},
		"negative TTL":         {TTL: -time.Second},
		"fractional TTL":       {TTL: 1500 * time.Millisecond},
		"huge TTL":             {TTL: 25 * time.Hour},
		"negative timeout":     {RequestTimeout: -1},
		"negative MaxValue":    {MaxValue: -1},
		"empty endpoint":       {Endpoints: []string{" "}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if _, err := Open(Config{}); err == nil {
		t.Error("Open without endpoints succeeded")
	}
}

func TestStore_Conformance(t *testing.T) {
	needEtcd(t)
	pstest.TestCoordinatorStore(t, func(t *testing.T) ps.CoordinatorStore {
		b := newBackend(t, freshPrefix(t), "conformance")
		l, err := b.Election("coordinator").Campaign(testCtx(t, slack))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Resign(context.Background()) })
		return NewStore(l, DefaultStateName)
	})
}

// TestElection_RaceOneWinsLoserRefused: candidates race; exactly one
// leads; once the leader's lease is gone (revoked from outside, as the
// server does at expiry) the next one leads, and the deposed leader's
// Save is refused by etcd even when it has not noticed its loss.
func TestElection_RaceOneWinsLoserRefused(t *testing.T) {
	prefix := freshPrefix(t)
	const n = 3
	type won struct {
		i int
		l *Leadership
	}
	wins := make(chan won, n)
	ctx := testCtx(t, 4*slack)
	var bs [n]*Backend
	for i := range bs {
		bs[i] = newBackend(t, prefix, fmt.Sprintf("cand-%d", i))
	}
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			l, err := bs[i].Election("coordinator").Campaign(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("candidate %d: %v", i, err)
				}
				return
			}
			wins <- won{i, l}
		}()
	}
	close(start)
	var first won
	select {
	case first = <-wins:
	case <-time.After(slack):
		t.Fatalf("nobody led within %v", slack)
	}
	// exactly one: while the first holds, nobody else wins (watch for
	// a full TTL: a second leader would show by then)
	select {
	case w := <-wins:
		t.Fatalf("candidates %d and %d both lead", first.i, w.i)
	case <-time.After(2 * testTTL):
	}
	name, ok, err := bs[0].Election("coordinator").Leader(ctx)
	if err != nil || !ok || name != fmt.Sprintf("cand-%d", first.i) {
		t.Fatalf("Leader = %q, %v, %v; want cand-%d", name, ok, err, first.i)
	}
	st := NewStore(first.l, DefaultStateName)
	if err := st.Save(ctx, []byte("first")); err != nil {
		t.Fatalf("leader's Save: %v", err)
	}
	stale := NewStore(staleCopy(first.l), DefaultStateName)

	// the leader is deposed: its lease goes on the server
	if _, err := bs[first.i].Client().Revoke(ctx, first.l.Session().ID()); err != nil {
		t.Fatal(err)
	}
	var second won
	select {
	case second = <-wins:
	case <-time.After(slack):
		t.Fatalf("no successor within %v of the leader's lease revocation", slack)
	}
	if second.l.Rev() <= first.l.Rev() {
		t.Errorf("successor's fencing token %d not above its predecessor's %d", second.l.Rev(), first.l.Rev())
	}
	if err := NewStore(second.l, DefaultStateName).Save(ctx, []byte("second")); err != nil {
		t.Fatalf("successor's Save: %v", err)
	}
	// a deposed leader that has not noticed: etcd refuses its write
	if err := stale.Save(ctx, []byte("stale")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's Save = %v, want ErrNotLeader", err)
	}
	if _, err := stale.Load(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's Load = %v, want ErrNotLeader", err)
	}
	// and the deposed leader notices: Lost closes, its Saves fail
	select {
	case <-first.l.Lost():
	case <-time.After(testTTL + slack):
		t.Fatalf("deposed leader's Lost still open %v after its lease was revoked", testTTL+slack)
	}
	if err := st.Save(ctx, []byte("late")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's Save after Lost = %v, want ErrNotLeader", err)
	}
	got, err := NewStore(second.l, DefaultStateName).Load(ctx)
	if err != nil || string(got) != "second" {
		t.Fatalf("state = %q, %v; want the successor's %q", got, err, "second")
	}
	second.l.Resign(ctx)
	// the third candidate leads once the second resigned
	select {
	case w := <-wins:
		w.l.Resign(ctx)
	case <-time.After(slack):
		t.Fatalf("third candidate did not lead within %v of the second's Resign", slack)
	}
}

// TestLeaseExpiry_StandbyTakesOver: the leader's process stops renewing
// (its client is closed, as at kill -9, without revoking); the standby
// leads once the lease expires on the server: not before TTL after the
// start of the leader's last successful renewal, and within TTL (plus
// the server's expiry sweep and a wide margin) of the stop.
func TestLeaseExpiry_StandbyTakesOver(t *testing.T) {
	prefix := freshPrefix(t)
	a, b := newBackend(t, prefix, "a"), newBackend(t, prefix, "b")
	ctx := testCtx(t, 4*slack)
	la, err := a.Election("coordinator").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewStore(la, DefaultStateName).Save(ctx, []byte("a's state")); err != nil {
		t.Fatal(err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		l, err := b.Election("coordinator").Campaign(ctx)
		if err != nil {
			t.Errorf("standby: %v", err)
			return
		}
		won <- l
	}()
	select {
	case <-won:
		t.Fatal("standby leads while the leader lives")
	case <-time.After(testTTL):
	}
	stop := time.Now()
	a.Close() // the leader's process dies
	renewed := renewedAt(la.Session())
	var lb *Leadership
	bound := testTTL + slack
	select {
	case lb = <-won:
	case <-time.After(bound):
		t.Fatalf("standby did not lead within %v (TTL %v) of the leader's stop", bound, testTTL)
	}
	at := time.Now()
	t.Logf("takeover %v after the leader stopped renewing, %v after its last renewal began (TTL %v)",
		at.Sub(stop).Round(time.Millisecond), at.Sub(renewed).Round(time.Millisecond), testTTL)
	if d := at.Sub(renewed); d < testTTL {
		t.Fatalf("standby led %v after the leader's last renewal began, before its lease (TTL %v) could expire", d, testTTL)
	}
	got, err := NewStore(lb, DefaultStateName).Load(ctx)
	if err != nil || string(got) != "a's state" {
		t.Fatalf("standby loads %q, %v; want the leader's state", got, err)
	}
	lb.Resign(ctx)
}

// TestSession_LostWhenNotRenewed: a session whose renewals stop (the
// backend closed) reports Lost at once, and a session whose lease was
// revoked elsewhere within the renewal period plus slack.
func TestSession_LostWhenNotRenewed(t *testing.T) {
	prefix := freshPrefix(t)
	ctx := testCtx(t, 4*slack)
	a := newBackend(t, prefix, "a")
	s, err := a.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.TTL() < testTTL {
		t.Fatalf("granted TTL %v below the %v asked", s.TTL(), testTTL)
	}
	if _, err := s.Put(ctx, "members/a", []byte("here")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client().Revoke(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Lost():
	case <-time.After(testTTL + slack):
		t.Fatalf("Lost still open %v after the lease was revoked", testTTL+slack)
	}
	if !errors.Is(s.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", s.Err())
	}
	if _, ok, err := a.Get(ctx, "members/a"); err != nil || ok {
		t.Fatalf("key of a revoked lease: present %v, %v", ok, err)
	}
	if _, err := s.Put(ctx, "members/a", nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Put on a lost session = %v, want ErrLeaseLost", err)
	}

	b := newBackend(t, prefix, "b")
	s2, err := b.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	select {
	case <-s2.Lost():
	case <-time.After(slack):
		t.Fatal("Lost still open after the Backend closed")
	}
}

// TestResign_HandsOverAtOnce: a standby leads well within the TTL once
// the leader resigns (its lease is revoked, not left to expire).
func TestResign_HandsOverAtOnce(t *testing.T) {
	prefix := freshPrefix(t)
	a, b := newBackend(t, prefix, "a"), newBackend(t, prefix, "b")
	ctx := testCtx(t, 4*slack)
	la, err := a.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		l, err := b.Election("e").Campaign(ctx)
		if err == nil {
			won <- l
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the standby wait
	t0 := time.Now()
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("Lost open after Resign")
	}
	select {
	case l := <-won:
		t.Logf("handover %v after Resign", time.Since(t0).Round(time.Millisecond))
		l.Resign(ctx)
	case <-time.After(slack):
		t.Fatalf("standby did not lead within %v of Resign", slack)
	}
}

// TestCampaign_CanceledLeavesNothing: a candidate whose ctx ends while it
// waits returns the ctx's error and leaves no key behind.
func TestCampaign_CanceledLeavesNothing(t *testing.T) {
	prefix := freshPrefix(t)
	a, b := newBackend(t, prefix, "a"), newBackend(t, prefix, "b")
	ctx := testCtx(t, 4*slack)
	la, err := a.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(ctx)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Election("e").Campaign(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign with a short ctx = %v, want DeadlineExceeded", err)
	}
	kvs, _, err := a.List(ctx, "election/e/", 0)
	if err != nil || len(kvs) != 1 {
		t.Fatalf("election keys after a canceled candidate: %d, %v; want the leader's only", len(kvs), err)
	}
}

// TestBackend_KVAndWatch: Put, Get, List and Watch on the prefix.
func TestBackend_KVAndWatch(t *testing.T) {
	prefix := freshPrefix(t)
	b := newBackend(t, prefix, "a")
	ctx := testCtx(t, 4*slack)
	rev, err := b.Put(ctx, "x/1", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ev := b.Watch(wctx, "x/", rev+1)
	if _, err := b.Put(ctx, "x/2", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "x/1"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name    string
		value   string
		deleted bool
	}{{"x/2", "two", false}, {"x/1", "", true}} {
		select {
		case e := <-ev:
			if e.Err != nil || e.Name != want.name || string(e.Value) != want.value || e.Deleted != want.deleted {
				t.Fatalf("event %d = %+v, want %+v", i, e, want)
			}
		case <-time.After(slack):
			t.Fatalf("event %d not seen within %v", i, slack)
		}
	}
	kvs, _, err := b.List(ctx, "x/", 0)
	if err != nil || len(kvs) != 1 || kvs[0].Name != "x/2" || !bytes.Equal(kvs[0].Value, []byte("two")) {
		t.Fatalf("List = %+v, %v", kvs, err)
	}
	if _, ok, err := b.Get(ctx, "x/1"); ok || err != nil {
		t.Fatalf("Get of a deleted key: %v, %v", ok, err)
	}
	cancel()
	for range ev { // closes once ctx is done
	}
}

// TestStore_RefusesOversize: a state over MaxValue is refused before it
// reaches etcd.
func TestStore_RefusesOversize(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{needEtcd(t)}
	cfg.Prefix = freshPrefix(t)
	cfg.MaxValue = 1000
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := testCtx(t, 4*slack)
	l, err := b.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(ctx)
	st := NewStore(l, DefaultStateName)
	if err := st.Save(ctx, make([]byte, 1000)); err != nil {
		t.Fatalf("Save of MaxValue bytes: %v", err)
	}
	if err := st.Save(ctx, make([]byte, 1001)); !errors.Is(err, ps.ErrCoordinatorState) {
		t.Fatalf("oversize Save = %v, want ps.ErrCoordinatorState", err)
	}
}

// storeKeys returns the generations and chunk count kept under the
// default state name.
func storeKeys(t *testing.T, ctx context.Context, b *Backend) (gens map[string]int) {
	t.Helper()
	kvs, _, err := b.List(ctx, DefaultStateName+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	gens = map[string]int{}
	for _, kv := range kvs {
		parts := strings.Split(strings.TrimPrefix(kv.Name, DefaultStateName+"/"), "/")
		gens[parts[0]]++
	}
	return gens
}

// TestStore_Chunks: a state that grows at its end (the coordinator's
// log) is saved in place, one generation, ceil(size/16 KiB) chunks, each
// Save writing the changed chunks only (counted from etcd's revisions:
// one revision a transaction, and the chunks' ModRev); a state that
// changes by more than 1 MiB goes to a new generation and the old one is
// deleted; a state that shrinks loses its extra chunks; a Save that
// failed is followed by a whole write; a new leader's Store loads what
// the last one saved.
func TestStore_Chunks(t *testing.T) {
	b := newBackend(t, freshPrefix(t), "a")
	ctx := testCtx(t, 6*slack)
	l, err := b.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(l, DefaultStateName)
	check := func(want []byte, gens int) {
		t.Helper()
		got, err := NewStore(l, DefaultStateName).Load(ctx)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Load: %d bytes, %v; want %d bytes", len(got), err, len(want))
		}
		g := storeKeys(t, ctx, b)
		if len(g) != gens {
			t.Fatalf("generations %v, want %d", g, gens)
		}
		for _, n := range g {
			if n != chunks(len(want), chunkSize) {
				t.Fatalf("%d chunks for %d bytes, want %d", n, len(want), chunks(len(want), chunkSize))
			}
		}
	}
	// a log growing by 10 KiB records to 300 KiB
	var state []byte
	for i := range 30 {
		state = append(state, pat(byte(i), 10<<10)...)
		before, _, err := b.List(ctx, DefaultStateName+"/", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Save(ctx, state); err != nil {
			t.Fatal(err)
		}
		after, rev, err := b.List(ctx, DefaultStateName+"/", 0)
		if err != nil {
			t.Fatal(err)
		}
		written := 0
		for _, kv := range after {
			if kv.ModRev == rev {
				written++
			}
		}
		if i > 0 && written > 2 { // the chunk that grew and at most one new one
			t.Fatalf("append %d: %d chunks written (of %d before)", i, written, len(before))
		}
	}
	check(state, 1)
	// the same growth by Append (ps.CoordinatorAppender)
	for i := range 30 {
		tail := pat(byte(100+i), 10<<10)
		state = append(state, tail...)
		if err := st.Append(ctx, tail); err != nil {
			t.Fatal(err)
		}
		after, rev, err := b.List(ctx, DefaultStateName+"/", 0)
		if err != nil {
			t.Fatal(err)
		}
		written := 0
		for _, kv := range after {
			if kv.ModRev == rev {
				written++
			}
		}
		if written > 2 {
			t.Fatalf("Append %d: %d chunks written", i, written)
		}
	}
	check(state, 1)
	// rewritten whole (2 MiB differ): a new generation, the old deleted
	big := pat(99, 2<<20)
	if err := st.Save(ctx, big); err != nil {
		t.Fatal(err)
	}
	check(big, 1)
	// shrunk in place
	small := big[:100<<10]
	if err := st.Save(ctx, small); err != nil {
		t.Fatal(err)
	}
	check(small, 1)
	// empty
	if err := st.Save(ctx, []byte{}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Load(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Load of an empty state: %v (nil %v), %v", got, got == nil, err)
	}
	// a failed Save, then a whole write
	done, cancel := context.WithCancel(ctx)
	cancel()
	st.Save(done, state)
	if err := st.Save(ctx, state); err != nil {
		t.Fatal(err)
	}
	check(state, 1)
	// the next leader loads it
	l.Resign(ctx)
	l2, err := b.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Resign(ctx)
	if got, err := NewStore(l2, DefaultStateName).Load(ctx); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("next leader loads %d bytes, %v; want %d", len(got), err, len(state))
	}
}

// TestStore_Corrupt: a missing chunk, a changed chunk or a bad head make
// Load fail with ErrCorruptState (and ps.ErrCoordinatorState), never
// return a wrong state.
func TestStore_Corrupt(t *testing.T) {
	b := newBackend(t, freshPrefix(t), "a")
	ctx := testCtx(t, 4*slack)
	l, err := b.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(ctx)
	st := NewStore(l, DefaultStateName)
	state := pat(7, 200<<10)
	for name, spoil := range map[string]func(c KeyValue) error{
		"missing chunk": func(c KeyValue) error { return b.Delete(ctx, c.Name) },
		"changed chunk": func(c KeyValue) error {
			v := bytes.Clone(c.Value)
			v[10] ^= 1
			_, err := b.Put(ctx, c.Name, v)
			return err
		},
		"short chunk": func(c KeyValue) error { _, err := b.Put(ctx, c.Name, c.Value[:5]); return err },
		"bad head":    func(KeyValue) error { _, err := b.Put(ctx, DefaultStateName, []byte("nonsense")); return err },
	} {
		if err := st.Save(ctx, state); err != nil {
			t.Fatal(err)
		}
		kvs, _, err := b.List(ctx, DefaultStateName+"/", 0)
		if err != nil || len(kvs) < 2 {
			t.Fatalf("%d chunks, %v", len(kvs), err)
		}
		if err := spoil(kvs[1]); err != nil {
			t.Fatal(err)
		}
		got, err := NewStore(l, DefaultStateName).Load(ctx)
		if !errors.Is(err, ErrCorruptState) || !errors.Is(err, ps.ErrCoordinatorState) || got != nil {
			t.Fatalf("%s: Load = %d bytes, %v; want ErrCorruptState", name, len(got), err)
		}
		// the store knows no more what etcd holds: its next Save writes whole
		st = NewStore(l, DefaultStateName)
	}
	if err := st.Save(ctx, state); err != nil {
		t.Fatalf("Save over a corrupt state: %v", err)
	}
	if got, err := st.Load(ctx); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("Load after a Save over a corrupt state: %d bytes, %v", len(got), err)
	}
	if g := storeKeys(t, ctx, b); len(g) != 1 {
		t.Fatalf("generations after the repair: %v, want 1", g)
	}
}

// pat returns n bytes that differ from every other seed's.
func pat(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestRunStandby_TakeoverResumesState: two standbys; the leader's run
// saves a counter, its process dies (client closed); the standby's run
// starts from the last saved counter; the deposed run's ctx is done.
func TestRunStandby_TakeoverResumesState(t *testing.T) {
	prefix := freshPrefix(t)
	a, b := newBackend(t, prefix, "a"), newBackend(t, prefix, "b")
	ctx := testCtx(t, 6*slack)
	saved := make(chan int, 100)
	var mu sync.Mutex
	lastSaved := 0
	runner := func(name string, stopAfter int) RunFunc {
		return func(ctx context.Context, st *Store, state []byte) error {
			n := 0
			if state != nil {
				if _, err := fmt.Sscanf(string(state), "%d", &n); err != nil {
					return err
				}
			}
			for ; ; n++ {
				if stopAfter > 0 && n >= stopAfter {
					return nil
				}
				if err := st.Save(ctx, fmt.Appendf(nil, "%d", n)); err != nil {
					return err
				}
				mu.Lock()
				lastSaved = n
				mu.Unlock()
				select {
				case saved <- n:
				default:
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
	aDone := make(chan error, 1)
	go func() { aDone <- RunStandby(ctx, a.Election("coord"), DefaultStateName, runner("a", 0)) }()
	for range 5 { // a leads and saves
		select {
		case <-saved:
		case <-time.After(slack):
			t.Fatal("the leader saved nothing")
		}
	}
	resumed := make(chan int, 1)
	bDone := make(chan error, 1)
	go func() {
		bDone <- RunStandby(ctx, b.Election("coord"), DefaultStateName, func(ctx context.Context, st *Store, state []byte) error {
			var n int
			fmt.Sscanf(string(state), "%d", &n)
			resumed <- n
			return runner("b", n+10)(ctx, st, state)
		})
	}()
	time.Sleep(200 * time.Millisecond)
	a.Close() // a's process dies
	mu.Lock()
	atStop := lastSaved
	mu.Unlock()
	select {
	case err := <-aDone:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("deposed RunStandby = %v, want ErrNotLeader", err)
		}
	case <-time.After(slack):
		t.Fatal("deposed RunStandby did not return")
	}
	var n int
	select {
	case n = <-resumed:
	case <-time.After(testTTL + slack):
		t.Fatalf("standby did not take over within %v", testTTL+slack)
	}
	mu.Lock()
	final := lastSaved
	mu.Unlock()
	if n < atStop {
		t.Fatalf("standby resumed from %d, before %d saved by the leader", n, atStop)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("standby's RunStandby = %v", err)
	}
	t.Logf("leader saved up to %d (%d at its stop); standby resumed from %d", final, atStop, n)
}

// TestStore_DeposedIsSuperseded: a deposed leader's Save and Append fail
// at once with an error wrapping ErrNotLeader and ps.ErrSuperseded (on
// which a ps coordinator stops as a crash would, instead of aborting the
// run).
func TestStore_DeposedIsSuperseded(t *testing.T) {
	b := newBackend(t, freshPrefix(t), "a")
	ctx := testCtx(t, 4*slack)
	l, err := b.Election("e").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(l, DefaultStateName)
	if err := st.Save(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := st.Save(ctx, []byte("y")); !errors.Is(err, ErrNotLeader) || !errors.Is(err, ps.ErrSuperseded) {
		t.Fatalf("deposed Save = %v, want ErrNotLeader and ps.ErrSuperseded", err)
	}
	if err := st.Append(ctx, []byte("y")); !errors.Is(err, ErrNotLeader) || !errors.Is(err, ps.ErrSuperseded) {
		t.Fatalf("deposed Append = %v, want ErrNotLeader and ps.ErrSuperseded", err)
	}
	if d := time.Since(t0); d > slack/2 {
		t.Fatalf("deposed Save and Append took %v", d)
	}
}

// TestRunStandby_PanicAndStopTimeout: a RunFunc that panics is reported
// as an error and its leadership handed over; one that ignores its ctx
// after the leadership is lost is waited for StopTimeout, then reported
// with ErrNotLeader and ErrStopTimeout.
func TestRunStandby_PanicAndStopTimeout(t *testing.T) {
	prefix := freshPrefix(t)
	ctx := testCtx(t, 4*slack)
	a := newBackend(t, prefix, "a")
	err := RunStandby(ctx, a.Election("c"), DefaultStateName, func(context.Context, *Store, []byte) error {
		panic("boom")
	})
	if err == nil || !strings.Contains(err.Error(), "panicked: boom") {
		t.Fatalf("RunStandby of a panicking run = %v", err)
	}
	if _, ok, err := a.Election("c").Leader(ctx); ok || err != nil {
		t.Fatalf("a leader remains after the panic (%v, %v): not resigned", ok, err)
	}

	cfg := a.Config()
	cfg.StopTimeout = 300 * time.Millisecond
	b, err := NewBackend(a.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	started := make(chan *Store, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunStandby(ctx, b.Election("c"), DefaultStateName, func(_ context.Context, st *Store, _ []byte) error {
			started <- st
			<-release // ignores its ctx
			return nil
		})
	}()
	var st *Store
	select {
	case st = <-started:
	case <-time.After(slack):
		t.Fatal("run not started")
	}
	t0 := time.Now()
	if _, err := a.Client().Revoke(ctx, st.Leadership().Session().ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrStopTimeout) {
			t.Fatalf("RunStandby = %v, want ErrNotLeader and ErrStopTimeout", err)
		}
		if d := time.Since(t0); d < cfg.StopTimeout {
			t.Fatalf("returned %v after the loss, before StopTimeout %v", d, cfg.StopTimeout)
		}
	case <-time.After(testTTL + cfg.StopTimeout + slack):
		t.Fatal("RunStandby did not return after StopTimeout")
	}
}

// TestStore_TransientErrorsRetried: fenced writes that fail with a
// transient error (etcd without a leader) are retried while the
// leadership holds: Save and Append succeed, the leadership is kept, and
// the state read back is the one saved.
func TestStore_TransientErrorsRetried(t *testing.T) {
	b := newBackend(t, freshPrefix(t), "transient")
	ctx := testCtx(t, 4*slack)
	l, err := b.Election("coordinator").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(context.Background())
	st := NewStore(l, DefaultStateName)
	if err := st.Save(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	failNext(b, 3)
	if err := st.Save(ctx, []byte("second")); err != nil {
		t.Fatalf("Save with 3 transient failures: %v", err)
	}
	failNext(b, 2)
	if err := st.Append(ctx, []byte("+tail")); err != nil {
		t.Fatalf("Append with 2 transient failures: %v", err)
	}
	if l.Err() != nil {
		t.Fatalf("leadership lost after transient failures: %v", l.Err())
	}
	got, err := NewStore(l, DefaultStateName).Load(ctx)
	if err != nil || string(got) != "second+tail" {
		t.Fatalf("Load = %q, %v; want \"second+tail\"", got, err)
	}
}

// TestStore_TransientErrorsPastBoundSupersede: fenced writes that keep
// failing transiently are given up after the lease TTL: the save fails
// with ps.ErrSuperseded (a ps coordinator then stops as a crash would,
// not aborting the run), the leadership is given up, and a standby leads
// at once (the lease is revoked), not after another TTL.
func TestStore_TransientErrorsPastBoundSupersede(t *testing.T) {
	prefix := freshPrefix(t)
	b := newBackend(t, prefix, "stuck")
	ctx := testCtx(t, 4*slack)
	l, err := b.Election("coordinator").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(l, DefaultStateName)
	if err := st.Save(ctx, []byte("state")); err != nil {
		t.Fatal(err)
	}
	failNext(b, 1<<30)
	start := time.Now()
	err = st.Save(ctx, []byte("never"))
	took := time.Since(start)
	if !errors.Is(err, ps.ErrSuperseded) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Save failing for ever = %v, want ErrNotLeader and ps.ErrSuperseded", err)
	}
	if took > testTTL+slack {
		t.Fatalf("Save gave up after %v, want within the TTL %v (+ %v slack)", took, testTTL, slack)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost still open after the store gave up")
	}
	failNext(b, 0)
	standby := newBackend(t, prefix, "standby")
	wctx, cancel := context.WithTimeout(ctx, testTTL/2+slack)
	defer cancel()
	campaigned := time.Now()
	l2, err := standby.Election("coordinator").Campaign(wctx)
	if err != nil {
		t.Fatalf("standby: %v", err)
	}
	defer l2.Resign(context.Background())
	t.Logf("gave up after %v (TTL %v); standby led %v later", took.Round(time.Millisecond), testTTL, time.Since(campaigned).Round(time.Millisecond))
	got, err := NewStore(l2, DefaultStateName).Load(ctx)
	if err != nil || string(got) != "state" {
		t.Fatalf("standby's Load = %q, %v; want the last state saved", got, err)
	}
}

// TestTransient_Classification: what the store retries (etcd's errors as
// the client returns them, wrapped) and what it does not.
func TestTransient_Classification(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{ctx, fmt.Errorf("w: %w", rpctypes.ErrNoLeader), true},
		{ctx, fmt.Errorf("w: %w", rpctypes.ErrGRPCNoLeader), true},
		{ctx, rpctypes.ErrTimeout, true},
		{ctx, rpctypes.ErrLeaderChanged, true},
		{ctx, fmt.Errorf("w: %w", status.Error(codes.Unavailable, "connection refused")), true},
		{ctx, fmt.Errorf("w: %w", context.DeadlineExceeded), true},
		{done, fmt.Errorf("w: %w", rpctypes.ErrNoLeader), false},
		{ctx, fmt.Errorf("w: %w", rpctypes.ErrCompacted), false},
		{ctx, rpctypes.ErrRequestTooLarge, false},
		{ctx, fmt.Errorf("w: %w", ErrNotLeader), false},
		{ctx, ErrClosed, false},
		{ctx, errors.New("other"), false},
		{ctx, nil, false},
	} {
		if got := transient(c.ctx, c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
