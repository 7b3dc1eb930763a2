package transport

import "sync/atomic"

// Stats counts a transport's traffic since it started. A frame is one
// request, response, error reply or one-way message. Raw bytes are body
// bytes before compression, wire bytes after (TCP adds a 20-byte header
// per frame, and on an authenticated stream a 16-byte tag after the
// header and after each 256 KiB of body, not counted here), so WireBytesSent/RawBytesSent is the
// compression ratio achieved and RawBytesSent-WireBytesSent the traffic
// saved.
type Stats struct {
	FramesSent        uint64
	RawBytesSent      uint64
	WireBytesSent     uint64
	FramesReceived    uint64
	RawBytesReceived  uint64
	WireBytesReceived uint64
}

// StatsReporter is an optional interface of transports that count their
// traffic; Inmem and TCP implement it. Stats is safe for concurrent use.
type StatsReporter interface {
	Stats() Stats
}

var (
	_ StatsReporter = (*Inmem)(nil)
	_ StatsReporter = (*TCP)(nil)
)

type counters struct {
	framesSent, rawSent, wireSent atomic.Uint64
	framesRecv, rawRecv, wireRecv atomic.Uint64
}

func (c *counters) sent(raw, wire int) {
	c.framesSent.Add(1)
	c.rawSent.Add(uint64(raw))
	c.wireSent.Add(uint64(wire))
}

func (c *counters) received(raw, wire int) {
	c.framesRecv.Add(1)
	c.rawRecv.Add(uint64(raw))
	c.wireRecv.Add(uint64(wire))
}

func (c *counters) snapshot() Stats {
	return Stats{
		FramesSent:        c.framesSent.Load(),
		RawBytesSent:      c.rawSent.Load(),
		WireBytesSent:     c.wireSent.Load(),
		FramesReceived:    c.framesRecv.Load(),
		RawBytesReceived:  c.rawRecv.Load(),
		WireBytesReceived: c.wireRecv.Load(),
	}
}
