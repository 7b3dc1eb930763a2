package ps

import "time"

// dedupWindows is a server's request-id windows (see durable.go: request
// ids make a resent push safe), one per client id. A window is used —
// moved to the front of a recency list and stamped with the time —
// whenever its client's push is applied or recognised as a duplicate.
// Windows are forgotten two ways, both checked when a client is seen for
// the first time:
//
//   - by time, when idle > 0: a window unused for longer than idle
//     (DurableConfig.DedupIdle) is forgotten. This is how a window goes
//     when its client's incarnation ends: a client id is drawn at random
//     by each Client that retries (retryState) and lives as long as that
//     Client, so once its process ends the id is never sent again. It is
//     safe: a resend of a push is sent at most ClientConfig.Retry after
//     the push was first sent, and waits at most RequestTimeout for its
//     answer; the push was first sent before it was applied, so before
//     the window was last used. Hence every resend the window could
//     still recognise reaches the server within Retry + RequestTimeout of
//     the window's last use, and one idle for longer (DedupIdle at least
//     that, with a margin for a request delayed in transit) can never be
//     needed again.
//   - by count: past limit windows (DurableConfig.DedupClients) the least
//     recently used one is evicted. This bounds memory whatever peers
//     send, and is not free: a window evicted while its client still
//     runs matters for a push of that client that is still being resent;
//     if limit other clients pushed since the window's last use, the
//     resend finds no window and is applied as a new push — that one
//     push is applied twice, the at-least-once behaviour of a server
//     without request ids; no push is lost and no other client is
//     affected, and the client's later pushes open a new window as at
//     its first push. So the bound must exceed the number of clients
//     that push to one server within one Retry — the workers of a run, a
//     few clients each — which DefaultDedupClients does by orders of
//     magnitude; a peer that invents ids (finding 9 of issue 25: 40,000
//     ids made 40,000 windows) costs the server at most limit windows,
//     and only a peer that invents more than limit ids within one Retry
//     can turn a member's resend into a second application (a member
//     could as well push that gradient twice).
//
// Zero value: not usable; newDedupWindows makes one.
type dedupWindows struct {
	limit int
	idle  time.Duration    // 0: windows are not forgotten by time
	now   func() time.Time // time.Now; tests set it
	m     map[uint64]*dedupEntry
	// root is the sentinel of the recency list: root.next is the most
	// recently used window, root.prev the least.
	root dedupEntry
}

// dedupEntry is one client's window and its place in the recency list.
type dedupEntry struct {
	ClientWindow
	used       time.Time // last use; zero when idle is 0
	prev, next *dedupEntry
}

func newDedupWindows(limit int, idle time.Duration) *dedupWindows {
	if limit <= 0 {
		limit = DefaultDedupClients
	}
	d := &dedupWindows{limit: limit, idle: idle, now: time.Now, m: map[uint64]*dedupEntry{}}
	d.root.prev, d.root.next = &d.root, &d.root
	return d
}

// len is the number of windows held.
func (d *dedupWindows) len() int { return len(d.m) }

// use returns client's window moved to the front of the recency list, or
// nil when none is held.
func (d *dedupWindows) use(client uint64) *ClientWindow {
	e := d.m[client]
	if e == nil {
		return nil
	}
	d.unlink(e)
	d.pushFront(e)
	if d.idle > 0 {
		e.used = d.now()
	}
	return &e.ClientWindow
}

// add returns client's window, opened (empty) at the front of the
// recency list if none was held, evicting the least recently used window
// when the set is full.
func (d *dedupWindows) add(client uint64) *ClientWindow {
	if w := d.use(client); w != nil {
		return w
	}
	var now time.Time
	if d.idle > 0 {
		now = d.now()
		for e := d.root.prev; e != &d.root && now.Sub(e.used) > d.idle; e = d.root.prev {
			d.unlink(e)
			delete(d.m, e.Client)
		}
	}
	var e *dedupEntry
	if len(d.m) >= d.limit {
		e = d.root.prev // least recently used: reused for the new client
		d.unlink(e)
		delete(d.m, e.Client)
		*e = dedupEntry{}
	} else {
		e = new(dedupEntry)
	}
	e.Client, e.used = client, now
	d.m[client] = e
	d.pushFront(e)
	return &e.ClientWindow
}

// restore loads windows from a checkpoint, in their order, as used now;
// past limit the first ones are evicted (a checkpoint keeps no recency).
func (d *dedupWindows) restore(ws []ClientWindow) {
	for _, w := range ws {
		*d.add(w.Client) = w
	}
}

// appendTo appends a copy of every window to dst, most recently used
// first.
func (d *dedupWindows) appendTo(dst []ClientWindow) []ClientWindow {
	for e := d.root.next; e != &d.root; e = e.next {
		dst = append(dst, e.ClientWindow)
	}
	return dst
}

func (d *dedupWindows) unlink(e *dedupEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (d *dedupWindows) pushFront(e *dedupEntry) {
	e.prev, e.next = &d.root, d.root.next
	d.root.next.prev = e
	d.root.next = e
}
