package etcd

import "time"

// staleCopy returns a Leadership with l's key and revision that has not
// noticed any loss: a leader paused (or cut off) while a successor was
// elected, whose writes only etcd's transaction can refuse.
func staleCopy(l *Leadership) *Leadership {
	return &Leadership{e: l.e, s: l.s, key: l.key, rev: l.rev, lost: make(chan struct{}), stop: func() {}}
}

// renewedAt returns the start of the grant or of the last renewal that
// succeeded: the server cannot expire the lease before it plus the TTL.
func renewedAt(s *Session) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since
}

// failNext makes the next n fenced transactions of b fail
// with a transient error (etcd without a leader) before reaching etcd.
func failNext(b *Backend, n int) { b.failNext.Store(int64(n)) }
