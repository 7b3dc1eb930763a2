package pstest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/falconml/falcon/ps"
)

// TestCoordinatorStore checks that a ps.CoordinatorStore keeps what the
// coordinator relies on; call it from a test of any implementation:
//
//	func TestMyStore(t *testing.T) {
//		pstest.TestCoordinatorStore(t, func(t *testing.T) ps.CoordinatorStore { return newMyStore(t) })
//	}
//
// newStore returns a new, empty store each time (one per subtest); it
// cleans up with t.Cleanup. The checks: an empty store loads (nil, nil);
// a saved state loads back byte for byte, and a second Save replaces it
// whole (longer or shorter); a state of MaxCoordinatorState/64 bytes
// round-trips; the store neither keeps the caller's slice nor hands out
// its own (changing either after the call changes nothing stored);
// concurrent Saves each leave one whole state, never a mix; a Load or a
// Save whose context is already done returns an error or completes, and a
// Save answered with an error leaves the previous state or the new one
// whole; a ps.CoordinatorAppender's Appends add to the state, and a Save
// replaces what they added. Each call is bounded by 30 s.
func TestCoordinatorStore(t *testing.T, newStore func(t *testing.T) ps.CoordinatorStore) {
	t.Helper()
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return c
	}
	load := func(t *testing.T, s ps.CoordinatorStore) []byte {
		t.Helper()
		b, err := s.Load(ctx(t))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return b
	}
	save := func(t *testing.T, s ps.CoordinatorStore, b []byte) {
		t.Helper()
		if err := s.Save(ctx(t), b); err != nil {
			t.Fatalf("Save(%d bytes): %v", len(b), err)
		}
	}
	t.Run("EmptyLoadsNil", func(t *testing.T) {
		s := newStore(t)
		if b := load(t, s); b != nil {
			t.Fatalf("empty store: Load = %d bytes %q, want nil", len(b), clip(b))
		}
	})
	t.Run("RoundTripAndReplace", func(t *testing.T) {
		s := newStore(t)
		for i, want := range [][]byte{pattern(1, 100), pattern(2, 5000), pattern(3, 7), {0}} {
			save(t, s, want)
			if got := load(t, s); !bytes.Equal(got, want) {
				t.Fatalf("Save %d of %d bytes: Load gives %d bytes %q", i, len(want), len(got), clip(got))
			}
			// twice: a Load changes nothing
			if got := load(t, s); !bytes.Equal(got, want) {
				t.Fatalf("Save %d: second Load gives %d bytes", i, len(got))
			}
		}
	})
	t.Run("Large", func(t *testing.T) {
		s := newStore(t)
		want := pattern(4, ps.MaxCoordinatorState/64)
		save(t, s, want)
		if got := load(t, s); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes saved, %d loaded (equal prefix: %d)", len(want), len(got), commonPrefix(got, want))
		}
	})
	t.Run("NoAliasing", func(t *testing.T) {
		s := newStore(t)
		b := pattern(5, 64)
		want := bytes.Clone(b)
		save(t, s, b)
		for i := range b {
			b[i] = ^b[i] // the caller reuses its buffer
		}
		got := load(t, s)
		if !bytes.Equal(got, want) {
			t.Fatal("changing the slice given to Save changed the stored state")
		}
		for i := range got {
			got[i] = 0 // the caller changes what Load gave
		}
		if got := load(t, s); !bytes.Equal(got, want) {
			t.Fatal("changing the slice Load returned changed the stored state")
		}
	})
	t.Run("ConcurrentSavesStayWhole", func(t *testing.T) {
		s := newStore(t)
		const n = 8
		states := make([][]byte, n)
		for i := range states {
			states[i] = pattern(byte(10+i), 1000+100*i)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range states {
			wg.Go(func() { errs[i] = s.Save(ctx(t), states[i]) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		if ok == 0 {
			t.Fatalf("every concurrent Save failed: %v", errs)
		}
		got := load(t, s)
		if !isOneOf(got, states) {
			t.Fatalf("after concurrent Saves Load gives %d bytes, none of the saved states", len(got))
		}
	})
	t.Run("Append", func(t *testing.T) {
		s := newStore(t)
		ap, ok := s.(ps.CoordinatorAppender)
		if !ok {
			t.Skip("not a ps.CoordinatorAppender")
		}
		a, b, c := pattern(30, 100), pattern(31, 7), pattern(32, 50)
		save(t, s, a)
		for _, tail := range [][]byte{b, c} {
			if err := ap.Append(ctx(t), tail); err != nil {
				t.Fatalf("Append(%d bytes): %v", len(tail), err)
			}
		}
		want := append(append(bytes.Clone(a), b...), c...)
		if got := load(t, s); !bytes.Equal(got, want) {
			t.Fatalf("Save then two Appends: Load gives %d bytes, want %d", len(got), len(want))
		}
		save(t, s, c) // a Save replaces what the appends made
		if got := load(t, s); !bytes.Equal(got, c) {
			t.Fatalf("Save after Appends: Load gives %d bytes, want %d", len(got), len(c))
		}
	})
	t.Run("DoneContext", func(t *testing.T) {
		s := newStore(t)
		old := pattern(20, 300)
		save(t, s, old)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		nw := pattern(21, 400)
		err := s.Save(done, nw)
		got := load(t, s)
		switch {
		case err == nil && !bytes.Equal(got, nw):
			t.Fatalf("Save with a done context returned nil, but Load gives %d bytes, not the new state", len(got))
		case err != nil && !isOneOf(got, [][]byte{old, nw}):
			t.Fatalf("Save with a done context failed (%v) and left %d bytes, neither state", err, len(got))
		}
		if b, err := s.Load(done); err == nil && !isOneOf(b, [][]byte{old, nw}) {
			t.Fatalf("Load with a done context returned %d bytes, no saved state", len(b))
		}
	})
}

// pattern returns n bytes that differ from every other pattern's.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	if n > 0 {
		b[0] = seed
	}
	return b
}

func isOneOf(b []byte, set [][]byte) bool {
	for _, s := range set {
		if bytes.Equal(b, s) {
			return true
		}
	}
	return false
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func clip(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x…", b[:16])
	}
	return fmt.Sprintf("%x", b)
}
