package ps

import (
	"fmt"
	"slices"
)

// Reshard moves the checkpoints of a cluster (old[i] taken on server i,
// keys placed by from) onto servers servers placed by to, for a restart
// with more or fewer servers. Every key's value and optimizer state is
// joined from its segments in from's order and cut again at to's
// segments; versions (steps) go with every segment. No value is computed,
// so the resharded state is bit-for-bit the old one.
//
// The checkpoints must hold no pending gradients (take them at a flush
// boundary, e.g. ServerConfig.CheckpointEvery under a barrier policy):
// a half-accumulated clock is not moved. The request-id windows of every
// client are merged (the highest sequence seen anywhere wins), so a
// retried push stays refused as a duplicate wherever it lands.
//
// Headers: the checkpoints must be of one run; one taken in a cluster
// (a non-zero Layout) must be server i's (ServerNode(i)) under from's
// layout (LayoutHash(from, len(old))), else ErrCheckpointMismatch. The
// new checkpoints keep the run id and name server i (ServerNode(i)) under
// to's layout, so written as <Dir>/server-<i>.ckpt they restore into a
// cluster of the new layout and the same run (DurableConfig.RunID).
func Reshard(old []*Checkpoint, from, to Partitioner, servers int) ([]*Checkpoint, error) {
	if len(old) == 0 || servers <= 0 {
		return nil, fmt.Errorf("ps: reshard of %d checkpoints onto %d servers", len(old), servers)
	}
	ref := old[0]
	flushed := -1
	type part struct {
		ck  *Checkpoint
		off int // of the key's value in ck.Values
		n   int
		k   CheckpointKey
	}
	parts := map[uint64]map[int]part{} // key → old server → its segment
	windows := map[uint64]ClientWindow{}
	fromHash := LayoutHash(from, len(old))
	for s, ck := range old {
		if ck.RunID != ref.RunID {
			return nil, fmt.Errorf("ps: reshard: %w: server %d's is of run %q, server 0's of run %q", ErrCheckpointMismatch, s, ck.RunID, ref.RunID)
		}
		if name := string(ServerNode(s)); ck.Layout != 0 && (ck.Server != name || ck.Layout != fromHash) {
			return nil, fmt.Errorf("ps: reshard: %w: checkpoint %d was taken on %q under layout %016x; the old layout's server %d is %q under %016x",
				ErrCheckpointMismatch, s, ck.Server, ck.Layout, s, name, fromHash)
		}
		if ck.Optimizer != ref.Optimizer || ck.Slots != ref.Slots {
			return nil, fmt.Errorf("ps: reshard: server %d ran %s, server 0 %s", s, ck.Optimizer, ref.Optimizer)
		}
		if len(ck.Pending) > 0 {
			return nil, fmt.Errorf("ps: reshard: server %d holds gradients of %d unflushed clocks; take the checkpoints at a flush boundary", s, len(ck.Pending))
		}
		if err := ck.Validate(); err != nil {
			return nil, err
		}
		flushed = max(flushed, ck.Flushed)
		off := 0
		for _, k := range ck.Keys {
			if parts[k.Key] == nil {
				parts[k.Key] = map[int]part{}
			}
			parts[k.Key][s] = part{ck: ck, off: off, n: k.Len, k: k}
			off += k.Len
		}
		for _, w := range ck.Clients {
			if have, ok := windows[w.Client]; !ok || w.Max > have.Max {
				windows[w.Client] = w
			} else if w.Max == have.Max {
				have.Window |= w.Window
				windows[w.Client] = have
			}
		}
	}
	out := make([]*Checkpoint, servers)
	toHash := LayoutHash(to, servers)
	for i := range out {
		out[i] = &Checkpoint{RunID: ref.RunID, Server: string(ServerNode(i)), Layout: toHash,
			Optimizer: ref.Optimizer, Slots: ref.Slots, Flushed: flushed}
	}
	keys := make([]uint64, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slots := ref.Slots
	var segs []Segment
	for _, key := range keys {
		ps := parts[key]
		n := 0
		for _, p := range ps {
			n += p.n
		}
		segs = from.Locate(segs[:0], key, n)
		if err := checkSegments(segs, key, n, len(old)); err != nil {
			return nil, err
		}
		vals := make([]float32, n)
		state := make([]float32, n*slots)
		var steps int64 = -1
		for _, sg := range segs {
			p, ok := ps[sg.Server]
			if !ok || p.n != sg.Len {
				return nil, fmt.Errorf("ps: reshard: key %d: segment [%d,%d) should be on server %d, which holds %d values of it",
					key, sg.Off, sg.Off+sg.Len, sg.Server, p.n)
			}
			if steps >= 0 && p.k.Steps != steps {
				return nil, fmt.Errorf("ps: reshard: key %d has %d steps on one server, %d on server %d", key, steps, p.k.Steps, sg.Server)
			}
			steps = p.k.Steps
			copy(vals[sg.Off:], p.ck.Values[p.off:p.off+p.n])
			for k := range slots {
				base := p.off*slots + k*p.n
				copy(state[k*n+sg.Off:], p.ck.State[base:base+p.n])
			}
		}
		if len(segs) != len(ps) {
			return nil, fmt.Errorf("ps: reshard: key %d is on %d servers, the old partitioner places it on %d", key, len(ps), len(segs))
		}
		segs = to.Locate(segs[:0], key, n)
		if err := checkSegments(segs, key, n, servers); err != nil {
			return nil, err
		}
		for _, sg := range segs {
			ck := out[sg.Server]
			ck.Keys = append(ck.Keys, CheckpointKey{Key: key, Len: sg.Len, Steps: steps})
			ck.Values = append(ck.Values, vals[sg.Off:sg.Off+sg.Len]...)
			for k := range slots {
				ck.State = append(ck.State, state[k*n+sg.Off:k*n+sg.Off+sg.Len]...)
			}
		}
	}
	clients := make([]uint64, 0, len(windows))
	for c := range windows {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	for _, ck := range out {
		for _, c := range clients {
			ck.Clients = append(ck.Clients, windows[c])
		}
	}
	return out, nil
}

// LayoutHash fingerprints a layout (the partitioner p over servers
// servers) by what it does: FNV-1a, 64 bits (Fowler, Noll and Vo), over
// servers and the segments p returns for a fixed set of probes — the
// keys 0…255, 64 keys i·0x9E3779B97F4A7C15 spread over the key space by
// the golden-ratio multiplier (Knuth's multiplicative hashing) and
// 2⁶⁴−1, each of length 1, and the keys 0, 1, 7 and 2⁶³ at every length
// 2^k+1, k = 4…24, which finds any split threshold (MaxSegment) up to
// 16 Mi values. Any deterministic
// Partitioner can be fingerprinted, whatever its fields. Two layouts that
// place every probe alike hash alike: the hash tells layouts apart that
// differ in the number of servers, the placement of small keys or the
// split of long ones, not ones that differ only on keys or lengths no
// probe has.
func LayoutHash(p Partitioner, servers int) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= prime
			v >>= 8
		}
	}
	mix(uint64(servers))
	var segs []Segment
	probe := func(key uint64, n int) {
		segs = p.Locate(segs[:0], key, n)
		mix(key)
		mix(uint64(n))
		mix(uint64(len(segs)))
		for _, s := range segs {
			mix(uint64(s.Off))
			mix(uint64(s.Len))
			mix(uint64(s.Server))
		}
	}
	for k := range uint64(256) {
		probe(k, 1)
	}
	for i := range uint64(64) {
		probe(i*0x9E3779B97F4A7C15, 1)
	}
	probe(1<<64-1, 1)
	for k := 4; k <= 24; k++ {
		for _, key := range []uint64{0, 1, 7, 1 << 63} {
			probe(key, 1<<k+1)
		}
	}
	return h
}
