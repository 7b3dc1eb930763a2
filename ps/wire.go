package ps

import (
	"github.com/falconml/falcon/ps/internal/codec"
	"github.com/falconml/falcon/ps/internal/wire"
)

// # Hostile input
//
// (This part of the package documentation sits beside the code it
// describes; the package doc in doc.go is the map. The wire format is
// documented in ps/internal/wire.)
//
// No message ends a process. Every decoder checks counts and lengths
// against what exists before it allocates: a pull may name at most the
// values its server holds (resolved against the store before the reply is
// grown), a push or init at most the values it carries, a batch size read
// from the wire at most 2^24 samples. A panic while a role serves a message
// (a bug, or a policy's) is recovered: the request is answered with an
// error wrapping ErrRemote, one line goes to the role's logger (WithLogger;
// slog.Default() otherwise) with the stack, and a panic inside the
// coordinator's step aborts the run with an error that names it. The fuzz
// targets FuzzServerRequest, FuzzCoordinatorRequest, FuzzWorkerMessage,
// FuzzClientResponse, FuzzCheckpointDecode and FuzzRequestLogReplay (a
// server's request log at start) cover every decoder; they fail on a
// recovered panic too, and CI fuzzes each under a memory limit (.ci/fuzz).
//
// # Performance
//
// BenchmarkPairedPushPull alternates a Push+Pull of n float32 values per
// worker with its ceiling inside one loop — copy() of the same bytes
// in-process, a raw TCP stream of them over loopback — and reports both and
// their ratio:
//
//	go test -run '^$' -bench PairedPushPull -benchtime 500ms -count 5 ./ps
//
// In-process, with the bulk paths, a push is lent (header plus a byte view
// of the caller's gradients, transport.RequestAppendV; the server is a
// transport.VectorHandler) and applied from the caller's memory by the SGD
// kernel, and a pull is one copy from the server's values into the
// caller's slice: one pass of SGD (reads weights and gradients, writes
// weights) and one copy against the ceiling's two copies. Over TCP the
// same request is written with one writev from the caller's memory and
// the pulled values are read from the socket straight into the caller's
// slice. Measured side by side on a loaded 2-core VM (median of 5, 1e6
// values, one worker): 23 GB/s in-process, 0.85 of the copy ceiling;
// 2.3 GB/s over loopback TCP, 0.65 of a raw TCP stream. Values that fit in
// L2 (1e5) reach only about 0.35 of a copy, which runs at cache speed.
//
// The cost of refusing non-finite values is measured in package ps/store.

type (
	encoder = codec.Encoder
	decoder = codec.Decoder
	op      = wire.Op
)
