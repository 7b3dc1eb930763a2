package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconml/falcon/ps/internal/wire"
)

// pushN encodes a push of n values g to key 1 with request id (client,
// seq) (no id when client is 0).
func pushN(client, seq uint64, g float32, n int) []byte {
	cl := &Client{}
	pa := plainPush
	pa.rid = reqID{client, seq}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = g
	}
	return cl.encode(nil, wire.OpPush, []piece{{key: 1, n: n}}, n, vals, pa)
}

// initN encodes an init of key 1 with n values v.
func initN(v float32, n int) []byte {
	e := wire.NewMsg(nil, wire.OpInit)
	e.U32(1)
	e.U64(1)
	e.U32(uint32(n))
	e.Pad4()
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = v
	}
	e.F32s(vals)
	return e.B
}

// call serves req and returns the server's error (from the response
// code or the handler).
func call(s *Server, req []byte) error {
	resp, err := s.HandleRequest(context.Background(), "c", req)
	if err != nil {
		return err
	}
	_, err = wire.ParseResponse(resp, "s")
	return err
}

// value0 is key 1's first value.
func value0(t testing.TB, s *Server) float32 {
	t.Helper()
	var v []float32
	s.View(func(st *Store) { v, _ = st.Value(nil, 1) })
	if len(v) == 0 {
		t.Fatal("key 1 not held")
	}
	return v[0]
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, unmounted
// at cleanup; it skips the test unless it runs as root on Linux with
// mount allowed.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; the ENOSPC seam test covers this path everywhere")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); the ENOSPC seam test covers this path everywhere", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the file system is full and returns
// its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	for {
		if _, err := f.Write(b); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// TestServer_FullDiskTmpfs is finding 2 of issue 25 on a real full file
// system (a 256 KiB tmpfs): a push whose log record cannot be written is
// refused and changes nothing, its resend is refused while the disk is
// full (not answered as a duplicate), applied once when there is room,
// and a restart restores it.
func TestServer_FullDiskTmpfs(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	const n = 4096 // 16 KiB of values: more than a page of slack in the log's last page
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := call(s, initN(10, n)); err != nil {
		t.Fatal(err)
	}
	if err := call(s, pushN(7, 1, 1, n)); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir)
	if err := call(s, pushN(7, 2, 1, n)); err == nil {
		t.Fatal("a push whose log record could not be written was acknowledged")
	}
	if v := value0(t, s); v != 9 {
		t.Errorf("after the refused push the value is %v, want 9 (the refused push changed it)", v)
	}
	if err := call(s, pushN(7, 2, 1, n)); err == nil {
		t.Error("the resend of the refused push was acknowledged while the disk is full (answered as a duplicate, never logged)")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := call(s, pushN(7, 2, 1, n)); err != nil {
		t.Fatalf("the resend with room on the disk: %v", err)
	}
	if err := call(s, pushN(7, 2, 1, n)); err != nil {
		t.Fatal(err)
	}
	if v := value0(t, s); v != 8 {
		t.Errorf("after the resends the value is %v, want 8 (applied once)", v)
	}
	s.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatalf("restart after the failed write: %v", err)
	}
	defer r.Close()
	if v := value0(t, r); v != 8 {
		t.Errorf("after the restart the value is %v, want 8", v)
	}
}

// logOffsets returns the offset of every record of the request log b.
func logOffsets(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for off := logHeaderLen; off+recHeaderLen <= len(b); {
		offs = append(offs, off)
		off += recHeaderLen + int(binary.LittleEndian.Uint32(b[off:]))
	}
	return offs
}

// loggedServer writes a log holding an init of key 1 to 10 and three
// pushes of −1 (value 7) and returns its config and path.
func loggedServer(t testing.TB) (ServerConfig, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(s, initN(10, 1)); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := call(s, pushN(5, seq, 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if v := value0(t, s); v != 7 {
		t.Fatalf("value %v, want 7", v)
	}
	s.Close()
	return cfg, filepath.Join(dir, "s.log.0")
}

// TestReplay_FlippedLengthBitRefused is finding 5 of issue 25: bit 20 of
// the first push record's length field flipped makes the length point past the
// end of the log; complete records follow, so this is damage, not a torn
// tail: the start is refused naming the record's offset, and the log is
// left as it was.
func TestReplay_FlippedLengthBitRefused(t *testing.T) {
	cfg, path := loggedServer(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := logOffsets(t, b)[1] // the first push
	b[off+2] ^= 1 << 4         // bit 20 of the little-endian u32
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewServer("s", cfg)
	if err == nil {
		v := value0(t, r)
		r.Close()
		fi, _ := os.Stat(path)
		t.Fatalf("the start succeeded with value %v (want a refusal; 7 was acknowledged), log cut from %d to %d bytes", v, len(b), fi.Size())
	}
	if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "offset "+itoa(off)) {
		t.Fatalf("err %v, want ErrCorruptCheckpoint naming offset %d", err, off)
	}
	if got, _ := os.ReadFile(path); len(got) != len(b) {
		t.Fatalf("the refused start changed the log from %d to %d bytes", len(b), len(got))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestServer_DedupWindowsBounded is finding 9 of issue 25: 40,000
// distinct request-id clients leave at most DedupClients windows, and a
// client that keeps pushing among them still has its resends recognised.
func TestServer_DedupWindowsBounded(t *testing.T) {
	s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(s, initN(0, 1)); err != nil {
		t.Fatal(err)
	}
	const legit = 1 << 63
	seq, want := uint64(0), float32(0)
	for id := uint64(1); id <= 40000; id++ {
		if err := call(s, pushN(id, 1, -1, 1)); err != nil {
			t.Fatal(err)
		}
		want++
		if id%1000 == 0 { // the legit client pushes, then resends its last push
			seq++
			want++
			for range 2 {
				if err := call(s, pushN(legit, seq, -1, 1)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if v := value0(t, s); v != want {
		t.Errorf("value %v, want %v (the legit client's resends applied once)", v, want)
	}
	bound := DefaultDedupClients
	if n := s.dur.windows.len(); n > bound {
		t.Errorf("%d dedup windows after 40000 client ids, want at most %d", n, bound)
	}
}

// fullDisk is a log file on a disk with room bytes left: a write past it
// writes what fits and fails with ENOSPC, as write(2) does. With
// noTruncate, cutting the file back fails too.
type fullDisk struct {
	*os.File
	room       int
	noTruncate bool
	noSync     bool // Sync fails with EIO
}

func (f *fullDisk) Sync() error {
	if f.noSync {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= f.room {
		f.room -= len(p)
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:f.room])
	f.room = 0
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func (f *fullDisk) Truncate(size int64) error {
	if f.noTruncate {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Truncate(size)
}

// TestServer_FullDiskRefusesAndResendApplies is finding 2 of issue 25
// through the log file seam (runs everywhere; TestServer_FullDiskTmpfs
// is the same on a real full tmpfs): a push whose record fits only in
// part is refused with ErrLogFailed and changes no value; its resend is
// refused while the disk is full, not answered as a duplicate; with room
// again it is logged and applied once; a restart restores it, and starts
// (the partial record was cut back).
func TestServer_FullDiskRefusesAndResendApplies(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := call(s, initN(10, 4)); err != nil {
		t.Fatal(err)
	}
	if err := call(s, pushN(7, 1, 1, 4)); err != nil {
		t.Fatal(err)
	}
	disk := &fullDisk{File: s.dur.log.(*os.File), room: 20} // less than a record
	s.dur.log = disk
	path := filepath.Join(dir, "s.log.0")
	before, _ := os.ReadFile(path)
	for range 2 { // the push, then its resend
		err := call(s, pushN(7, 2, 1, 4))
		if !errors.Is(err, ErrLogFailed) || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("push on a full disk: err %v, want ErrLogFailed naming ENOSPC", err)
		}
		if v := value0(t, s); v != 9 {
			t.Fatalf("after the refused push the value is %v, want 9", v)
		}
		if after, _ := os.ReadFile(path); len(after) != len(before) {
			t.Fatalf("the refused push left %d bytes in the log", len(after)-len(before))
		}
	}
	disk.room = 1 << 20
	for range 2 { // the resend with room, then a resend of it
		if err := call(s, pushN(7, 2, 1, 4)); err != nil {
			t.Fatal(err)
		}
	}
	if v := value0(t, s); v != 8 {
		t.Fatalf("after the resends the value is %v, want 8 (applied once)", v)
	}
	s.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatalf("restart after the failed write: %v", err)
	}
	defer r.Close()
	if v := value0(t, r); v != 8 {
		t.Errorf("after the restart the value is %v, want 8", v)
	}
	if err := call(r, pushN(7, 2, 1, 4)); err != nil || value0(t, r) != 8 {
		t.Errorf("a resend after the restart: err %v, value %v; want it recognised (8)", err, value0(t, r))
	}
}

// TestServer_LogUncuttableStopsWrites: when the partial record of a
// failed write cannot be cut off either, the server refuses every later
// update with ErrLogFailed saying why (pulls still served), and a restart
// cuts the torn tail and restores every acknowledged update.
func TestServer_LogUncuttableStopsWrites(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := call(s, initN(10, 1)); err != nil {
		t.Fatal(err)
	}
	s.dur.log = &fullDisk{File: s.dur.log.(*os.File), room: 20, noTruncate: true}
	if err := call(s, pushN(7, 1, 1, 1)); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("err %v, want ErrLogFailed", err)
	}
	s.dur.log.(*fullDisk).room = 1 << 20 // room again: the torn record still blocks
	err = call(s, pushN(7, 2, 1, 1))
	if !errors.Is(err, ErrLogFailed) || !strings.Contains(err.Error(), "could not be cut off") {
		t.Fatalf("err %v, want ErrLogFailed saying the log could not be cut back", err)
	}
	if v := value0(t, s); v != 10 {
		t.Fatalf("value %v, want 10", v)
	}
	s.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v := value0(t, r); v != 10 {
		t.Fatalf("after the restart the value is %v, want 10", v)
	}
	if err := call(r, pushN(7, 1, 1, 1)); err != nil || value0(t, r) != 9 {
		t.Fatalf("the restarted server takes updates again: err %v, value %v (want 9)", err, value0(t, r))
	}
}

// TestServer_RefusedUpdateNotLoggedNorMarked: a push the store refuses
// (an unknown key) after its record was written has the record cut off
// and its id left unmarked, so once the key exists its resend is applied
// (not answered as a duplicate); the log replays cleanly.
func TestServer_RefusedUpdateNotLoggedNorMarked(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(dir, "s.log.0")
	before, _ := os.ReadFile(path)
	if err := call(s, pushN(7, 1, 1, 1)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("push to a key never initialised: err %v, want ErrUnknownKey", err)
	}
	if after, _ := os.ReadFile(path); len(after) != len(before) {
		t.Fatalf("the refused push left %d bytes in the log", len(after)-len(before))
	}
	if err := call(s, initN(10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := call(s, pushN(7, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if v := value0(t, s); v != 9 {
		t.Fatalf("the resend after the refusal: value %v, want 9 (applied, the refusal was not marked)", v)
	}
	s.Close()
	r, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v := value0(t, r); v != 9 {
		t.Fatalf("after the restart the value is %v, want 9", v)
	}
}

// restartValue starts a server on cfg's directory and returns key 1's
// first value, or the start's error.
func restartValue(t *testing.T, cfg ServerConfig) (float32, error) {
	t.Helper()
	r, err := NewServer("s", cfg)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return value0(t, r), nil
}

// TestReplay_TornTailCut: the last record cut short (a write torn by a
// crash) is cut off and the start restores every record before it; the
// log ends where the torn record began, so the next record follows a
// complete one.
func TestReplay_TornTailCut(t *testing.T) {
	for _, into := range []string{"header", "header only", "body", "last byte"} {
		cfg, path := loggedServer(t)
		b, _ := os.ReadFile(path)
		last := logOffsets(t, b)[3]
		keep := map[string]int{"header": last + 5, "header only": last + recHeaderLen,
			"body": last + recHeaderLen + 1, "last byte": len(b) - 1}[into]
		if err := os.WriteFile(path, b[:keep], 0o644); err != nil {
			t.Fatal(err)
		}
		if v, err := restartValue(t, cfg); err != nil || v != 8 {
			t.Fatalf("torn in its %s: value %v, err %v; want 8 (the torn third push cut off)", into, v, err)
		}
		if fi, _ := os.Stat(path); fi.Size() != int64(last) {
			t.Fatalf("torn in its %s: log of %d bytes after the start, want %d", into, fi.Size(), last)
		}
	}
}

// TestReplay_DamagedLastRecordCut: a last record whose body fails its
// checksum (a power loss left its pages unwritten) is taken as torn: no
// complete record follows it.
func TestReplay_DamagedLastRecordCut(t *testing.T) {
	cfg, path := loggedServer(t)
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 1
	os.WriteFile(path, b, 0o644)
	if v, err := restartValue(t, cfg); err != nil || v != 8 {
		t.Fatalf("value %v, err %v; want 8", v, err)
	}
}

// TestReplay_ZeroTailCut: a tail of zeros after the last record (a power
// loss after the file grew) is cut off: zeros fail the length checksum
// and no complete record follows.
func TestReplay_ZeroTailCut(t *testing.T) {
	cfg, path := loggedServer(t)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append(b, make([]byte, 5000)...), 0o644)
	if v, err := restartValue(t, cfg); err != nil || v != 7 {
		t.Fatalf("value %v, err %v; want 7", v, err)
	}
	if got, _ := os.ReadFile(path); len(got) != len(b) {
		t.Fatalf("log of %d bytes after the start, want %d", len(got), len(b))
	}
}

// TestReplay_DamagedRecordBeforeCompleteRefused: a flipped bit in the body
// or the length checksum of a record with complete records after it
// refuses the start naming the record's offset; the log is left as it was.
func TestReplay_DamagedRecordBeforeCompleteRefused(t *testing.T) {
	for _, at := range []int{5, recHeaderLen + 3} { // the length's checksum; the body
		cfg, path := loggedServer(t)
		b, _ := os.ReadFile(path)
		off := logOffsets(t, b)[2]
		b[off+at] ^= 0x40
		os.WriteFile(path, b, 0o644)
		_, err := restartValue(t, cfg)
		if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "offset "+itoa(off)) {
			t.Fatalf("byte %d of the record at %d flipped: err %v, want ErrCorruptCheckpoint naming offset %d", at, off, err, off)
		}
		if got, _ := os.ReadFile(path); len(got) != len(b) {
			t.Fatalf("the refused start changed the log from %d to %d bytes", len(b), len(got))
		}
	}
}

// TestReplay_OldFormatRefused: a log written by an earlier build (format
// 1: no file header; format 2: no sender-tagged records) or of a later
// format is refused with both versions named, and left as it was.
func TestReplay_OldFormatRefused(t *testing.T) {
	cfg, path := loggedServer(t)
	// format 1: length u32, CRC-32C of the body u32, body
	body := pushN(5, 9, 1, 1)
	old := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	old = binary.LittleEndian.AppendUint32(old, crc32Of(body))
	old = append(old, body...)
	later := binary.LittleEndian.AppendUint32([]byte(logMagic), logVersion+1)
	// format 2: as 3, without sender-tagged records
	v2 := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte(logMagic), 2), 7)
	v2 = appendLogRecord(v2, logSeed(7), body, nil)
	this := fmt.Sprintf("format %d", logVersion)
	for _, c := range []struct {
		b    []byte
		want []string
	}{{old, []string{"format 1", this}}, {old[:6], []string{"format 1", this}}, {later, []string{fmt.Sprintf("format %d", logVersion+1), this}},
		{v2, []string{"format 2", this}}} {
		os.WriteFile(path, c.b, 0o644)
		_, err := restartValue(t, cfg)
		if !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("a log of %d bytes: err %v, want ErrCorruptCheckpoint", len(c.b), err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("err %q does not name %q", err, w)
			}
		}
		if got, _ := os.ReadFile(path); len(got) != len(c.b) {
			t.Fatal("the refused log was changed")
		}
	}
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// fileSeed is the checksums' seed of the log b.
func fileSeed(b []byte) uint32 { return logSeed(binary.LittleEndian.Uint32(b[len(logMagic)+4:])) }

// TestReplay_TornFileHeader: a log torn while its header was written
// (a crash right after it was created) is started again, and the updates
// after the restart are logged and replayed.
func TestReplay_TornFileHeader(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	path := filepath.Join(dir, "s.log.0")
	os.WriteFile(path, []byte(logMagic[:5]), 0o644)
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(s, initN(3, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v, err := restartValue(t, cfg); err != nil || v != 3 {
		t.Fatalf("value %v, err %v; want 3", v, err)
	}
}

// TestReplay_StreamsRecords: the replay holds one record in memory at a
// time, not the log: restarting from a 32 MiB log allocates far less than
// the log (the earlier replay read it whole), and a record whose length
// passes its checksum but runs past the end of the file is not allocated.
func TestReplay_StreamsRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n, pushes = 2048, 4096 // 8 KiB a record, 32 MiB
	if err := call(s, initN(0, n)); err != nil {
		t.Fatal(err)
	}
	req := pushN(0, 0, 1e-3, n)
	for range pushes {
		if err := call(s, req); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := filepath.Join(dir, "s.log.0")
	// a torn record claiming 1 GiB, its length's checksum intact
	b, _ := os.ReadFile(path)
	h := binary.LittleEndian.AppendUint32(nil, 1<<30)
	h = binary.LittleEndian.AppendUint32(h, crc32.Update(fileSeed(b), castagnoli, h))
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(append(h, 1, 2, 3, 4, 5, 6))
	f.Close()
	fi, _ := os.Stat(path)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := NewServer("s", cfg)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(fi.Size())/4 {
		t.Fatalf("replaying a %d-byte log allocated %d bytes, want under a quarter of it", fi.Size(), got)
	}
	t.Logf("replaying a %d-byte log allocated %d bytes", fi.Size(), after.TotalAlloc-before.TotalAlloc)
	if st := r.store.Steps(1); st != pushes {
		t.Fatalf("%d steps replayed, want %d", st, pushes)
	}
}

// TestServer_DedupEvictsLeastRecentlyUsed: with DedupClients 3 a fourth
// client evicts the window used least recently (a resend counts as a
// use): the others' resends are still recognised; the evicted client's
// late resend is applied again, the at-least-once behaviour dedup.go
// describes. A checkpoint restores at most the bound; a negative bound is
// refused.
func TestServer_DedupEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, DedupClients: 3}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := call(s, initN(0, 1)); err != nil {
		t.Fatal(err)
	}
	push := func(client uint64) {
		t.Helper()
		if err := call(s, pushN(client, 1, -1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []uint64{1, 2, 3, 1, 4} { // 1 resent: 2 is the least recently used
		push(c)
	}
	if v := value0(t, s); v != 4 {
		t.Fatalf("value %v, want 4", v)
	}
	for _, c := range []uint64{1, 3, 4} {
		push(c)
	}
	if v := value0(t, s); v != 4 {
		t.Fatalf("resends of the clients held: value %v, want 4 (recognised)", v)
	}
	if n := s.dur.windows.len(); n != 3 {
		t.Fatalf("%d windows, want 3", n)
	}
	push(2) // evicted: its late resend is applied again
	if v := value0(t, s); v != 5 {
		t.Fatalf("the evicted client's resend: value %v, want 5", v)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	small := cfg
	small.Durable.DedupClients = 2
	r, err := NewServer("s", small)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := r.dur.windows.len(); n != 2 {
		t.Fatalf("%d windows restored under a bound of 2", n)
	}
	bad := cfg
	bad.Durable.DedupClients = -1
	if _, err := NewServer("t", bad); err == nil {
		t.Fatal("a negative DedupClients was accepted")
	}
}

// TestServer_DedupIdleForgetsEndedClients: with DedupIdle a window unused
// for longer (a client whose process ended) is forgotten when a new
// client comes, while a window used within DedupIdle still recognises
// its client's resend. A Cluster with Retry sets DedupIdle.
func TestServer_DedupIdleForgetsEndedClients(t *testing.T) {
	s, err := NewServer("s", ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{DedupIdle: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	s.dur.windows.now = func() time.Time { return now }
	if err := call(s, initN(0, 1)); err != nil {
		t.Fatal(err)
	}
	push := func(client uint64) {
		t.Helper()
		if err := call(s, pushN(client, 1, -1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	push(1) // ends here
	now = now.Add(30 * time.Second)
	push(2)
	now = now.Add(31*time.Second + time.Nanosecond) // client 1 idle 61 s, client 2 31 s
	push(3)
	if n := s.dur.windows.len(); n != 2 {
		t.Fatalf("%d windows, want 2 (client 1's forgotten)", n)
	}
	push(2) // a resend within DedupIdle
	if v := value0(t, s); v != 3 {
		t.Fatalf("value %v, want 3 (client 2's resend recognised)", v)
	}
	cc := ClusterConfig{Retry: 5 * time.Second}
	if got := cc.serverConfig().Durable.DedupIdle; got != 70*time.Second {
		t.Fatalf("a Cluster with Retry 5 s gives its servers DedupIdle %v, want 70 s", got)
	}
}

// TestReplay_RefusedRecordSkipped: a server killed between writing the
// record of an update the store then refused and cutting it off leaves
// an intact record that the store refuses again at the restart: it is
// skipped (it changed nothing) and the start succeeds, with the records
// after it replayed.
func TestReplay_RefusedRecordSkipped(t *testing.T) {
	cfg, path := loggedServer(t)
	pa := plainPush
	pa.rid = reqID{5, 9}
	unknown := (&Client{}).encode(nil, wire.OpPush, []piece{{key: 2, n: 1}}, 1, []float32{1}, pa) // key 2: never initialised
	b, _ := os.ReadFile(path)
	b = appendLogRecord(b, fileSeed(b), unknown, nil)
	os.WriteFile(path, b, 0o644)
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatalf("start with a refused record in the log: %v", err)
	}
	if v := value0(t, s); v != 7 {
		t.Fatalf("value %v, want 7", v)
	}
	if err := call(s, pushN(5, 4, 1, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v, err := restartValue(t, cfg); err != nil || v != 6 {
		t.Fatalf("second restart: value %v, err %v; want 6", v, err)
	}
}

// TestReplay_ForgedRecordInValuesIgnored: a push whose values hold bytes
// forged as a complete log record (checksums from salt 0, or unsalted: a
// client does not know the log's salt) and whose own record is torn by a
// crash is cut as a torn tail — the forged record does not pass as a
// complete record following it, which would refuse the start.
func TestReplay_ForgedRecordInValuesIgnored(t *testing.T) {
	var forged []byte
	for seq := uint64(1); ; seq++ {
		forged = forged[:0]
		for _, seed := range []uint32{logSeed(0), 0} {
			forged = appendLogRecord(forged, seed, pushN(99, seq, -1000, 1), nil)
		}
		for len(forged)%4 != 0 {
			forged = append([]byte{0}, forged...)
		}
		finite := true
		for i := 0; i < len(forged); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(forged[i:]))
			finite = finite && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
		}
		if finite {
			break
		}
	}
	vals := make([]float32, len(forged)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(forged[4*i:]))
	}
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(s, initN(0, len(vals))); err != nil {
		t.Fatal(err)
	}
	pa := plainPush
	if err := call(s, (&Client{}).encode(nil, wire.OpPush, []piece{{key: 1, n: len(vals)}}, len(vals), vals, pa)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, "s.log.0")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-1], 0o644); err != nil { // the crash tore the push's last byte
		t.Fatal(err)
	}
	if v, err := restartValue(t, cfg); err != nil || v != 0 {
		t.Fatalf("value %v, err %v; want the torn push cut (0)", v, err)
	}
}

// TestServer_LogSyncFailureStopsWrites: with LogSync, an fsync that fails
// refuses its update (the value is unchanged, the record cut off) and
// every later one, saying why — after a failed fsync the file's contents
// are unknown — until a checkpoint starts a new log; a restart restores
// the acknowledged updates.
func TestServer_LogSyncFailureStopsWrites(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Store: StoreConfig{Optimizer: SGD{LR: 1}}, Durable: DurableConfig{Dir: dir, Log: true, LogSync: true}}
	s, err := NewServer("s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := call(s, initN(10, 1)); err != nil {
		t.Fatal(err)
	}
	disk := &fullDisk{File: s.dur.log.(*os.File), room: 1 << 20, noSync: true}
	s.dur.log = disk
	for seq := uint64(1); seq <= 2; seq++ {
		err := call(s, pushN(7, seq, 1, 1))
		if !errors.Is(err, ErrLogFailed) || !strings.Contains(err.Error(), "fsync failed") {
			t.Fatalf("push %d: err %v, want ErrLogFailed naming the failed fsync", seq, err)
		}
	}
	if v := value0(t, s); v != 10 {
		t.Fatalf("value %v, want 10", v)
	}
	// a checkpoint holds every applied update and starts a new log
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := call(s, pushN(7, 3, 1, 1)); err != nil {
		t.Fatalf("after a checkpoint started a new log: %v", err)
	}
	s.Close()
	if v, err := restartValue(t, cfg); err != nil || v != 9 {
		t.Fatalf("restart: value %v, err %v; want 9", v, err)
	}
}
