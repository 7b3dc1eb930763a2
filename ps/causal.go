package ps

import "github.com/falconml/falcon/epsp"

// emitCause emits the event a worker's request reports (its clock done,
// its transferred range pushed, its leaving) once the core has accepted it
// and before the coordinator carries out the orders the policy answered
// with, so that an observer sees EvClockDone before the EvRelease it
// caused.
func (c *Coordinator) emitCause(ev epsp.Event) {
	switch ev.Kind {
	case epsp.EventClock:
		c.opts.emit(Event{Kind: EvClockDone, Node: "coordinator", Worker: ev.Worker, Clock: ev.Clock})
	case epsp.EventTransferDone:
		c.opts.emit(Event{Kind: EvTransferDone, Node: "coordinator", Worker: ev.Worker, Result: ev.Transfer})
	case epsp.EventLeave:
		c.opts.emit(Event{Kind: EvLeave, Node: "coordinator", Worker: ev.Worker})
	}
}
