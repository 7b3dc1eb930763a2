package ps

import (
	"fmt"
	"slices"

	"github.com/falconml/falcon/ps/layout"
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
			return nil, fmt.Errorf("ps: reshard: server %d holds gradients of unflushed clock %d (%d pending buffers); take the checkpoints at a flush boundary", s, ck.Pending[0].Clock, len(ck.Pending))
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
		if err := layout.CheckSegments(segs, key, n, len(old)); err != nil {
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
		if err := layout.CheckSegments(segs, key, n, servers); err != nil {
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
