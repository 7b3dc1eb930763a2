package ps

import (
	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps/event"
)

// emitCause emits the event a worker's request reports (its clock done,
// its transferred range pushed, its leaving) once the core has accepted it
// and before the coordinator carries out the orders the policy answered
// with, so that an observer sees EvClockDone before the EvRelease it
// caused.
func (c *Coordinator) emitCause(ev epsp.Event) {
	switch ev.Kind {
	case epsp.EventClock:
		c.opts.emit(event.Event{Kind: event.ClockDone, Node: "coordinator", Worker: ev.Worker, Clock: ev.Clock})
	case epsp.EventTransferDone:
		c.opts.emit(event.Event{Kind: event.TransferDone, Node: "coordinator", Worker: ev.Worker, Result: ev.Transfer})
	case epsp.EventLeave:
		c.opts.emit(event.Event{Kind: event.Leave, Node: "coordinator", Worker: ev.Worker})
	}
}
