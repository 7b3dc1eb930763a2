package ps

import (
	"errors"
	"strings"
	"testing"
)

// An abort carries its cause and a shutdown its note to the node, which
// reports them; a note longer than maxCtlNote is cut by the sender and
// refused as a control message by the receiver.
func TestCtlNote(t *testing.T) {
	h := newCtlHandler(nil)
	if _, err, ok := h.control(CoordinatorNode, ctlNote(ctlAbort, "ps: peer lost: worker worker-1")); !ok || err != nil {
		t.Fatalf("abort: ok %v, %v", ok, err)
	}
	<-h.aborted
	if err := h.abortErr(); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "worker-1") {
		t.Errorf("abortErr %v, want ErrAborted naming worker-1", err)
	}
	// a later notice does not replace the first one's note
	h.control(CoordinatorNode, ctlNote(ctlShutdown, "other"))
	if err := h.abortErr(); !strings.Contains(err.Error(), "worker-1") {
		t.Errorf("after a second notice: %v", err)
	}
	if h := newCtlHandler(nil); !strings.Contains(h.abortErr().Error(), "coordinator's log") {
		t.Errorf("no note: %v", h.abortErr())
	}
	long := strings.Repeat("x", 3*maxCtlNote)
	if m := ctlNote(ctlAbort, long); len(m) != len(ctlMagic)+1+maxCtlNote {
		t.Errorf("a long note is %d bytes on the wire, want it cut to %d", len(m)-len(ctlMagic)-1, maxCtlNote)
	}
	if _, _, ok := parseCtl(append(ctlMsg(ctlAbort), long...)); ok {
		t.Error("an over-long note parsed as a control message")
	}
	// a note from anyone but the coordinator ends nothing
	h2 := newCtlHandler(nil)
	if _, err, _ := h2.control("worker-0", ctlNote(ctlAbort, "x")); !errors.Is(err, ErrRejected) {
		t.Errorf("abort from worker-0: %v", err)
	}
}
