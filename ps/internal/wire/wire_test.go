package wire

import (
	"errors"
	"testing"

	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/store"
)

// TestErrorCodesRoundTrip: every sentinel with a code comes back from an
// error response as itself under errors.Is; any other error as ErrRemote.
func TestErrorCodesRoundTrip(t *testing.T) {
	for _, e := range []error{store.ErrUnknownKey, store.ErrLengthMismatch, store.ErrUnsortedKeys, codec.ErrMalformed, codec.ErrWireVersion, ErrRejected, ErrClosed, ErrAborted, ErrServerUnavailable, ErrStartTimeout} {
		_, err := ParseResponse(ErrResponse(e), "peer")
		if !errors.Is(err, e) {
			t.Errorf("%v came back as %v", e, err)
		}
	}
	for c, e := range codeErrors {
		if e == nil {
			continue
		}
		if got := CodeOf(e); got != Code(c) {
			t.Errorf("%v has code %d, want %d", e, got, c)
		}
		if _, err := ParseResponse(ErrResponse(e), "peer"); !errors.Is(err, e) {
			t.Errorf("code %d: %v came back as %v", c, e, err)
		}
	}
	_, err := ParseResponse(ErrResponse(errors.New("boom")), "peer")
	if !errors.Is(err, ErrRemote) {
		t.Errorf("unknown error came back as %v", err)
	}
}
