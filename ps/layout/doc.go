// Package layout places keys on servers: a Partitioner cuts each key's
// value into Segments, one per server at most (Modulo, the default: key
// mod the number of servers; KeyRange, ps-lite's ranges of the key space;
// Hash, the keys mixed first), and Fingerprint names a layout (the
// partitioner over a number of servers) by one 64-bit hash, which a
// checkpoint's header carries so that a server never restores state cut
// for another layout.
//
// It is pure (no I/O, no state): every client and server of a cluster
// computes the same placement. It imports nothing of ps; ps uses it, and
// ps.Reshard moves checkpoints from one layout to another.
//
// The partitioners are plain values: a zero Modulo or Hash places every
// key whole on server 0 (Servers 0 counts as 1), a KeyRange without
// Servers is refused by its Validate, and a zero MaxSegment never splits
// a key.
package layout
