// Package transport moves bytes between named nodes of a Falcon cluster.
//
// # Overview
//
// A [Transport] offers two kinds of traffic between nodes named by
// [NodeID]: request/response calls ([Transport.Request]), correlated by an
// id the transport assigns, and one-way messages ([Transport.Send]).
// Incoming traffic is served by the node's [Handler]. Two implementations
// pass the same conformance suite, [github.com/falconml/falcon/transport/transporttest.Run]:
//
//   - [InmemNetwork] and its [Inmem] nodes run in one process, with fault
//     seams driven by one seeded random source: [InmemNetwork.Disconnect],
//     [InmemNetwork.Partition], [InmemNetwork.SetDropRate],
//     [InmemNetwork.SetDelay] (fixed plus uniform jitter) and
//     [InmemNetwork.Kill]. Every package's tests use it.
//   - [TCP] speaks a small framed protocol over TCP, optionally inside TLS
//     (mutual, with one certificate per node proving its name:
//     [TCPConfig.CertIdentity]) and behind a shared-secret or per-pair-key
//     handshake that, without TLS, also keys a tag on every frame.
//
// Each message body may be compressed with a [Codec] (none, an LZ4 block,
// a snappy block) that a [CompressionPolicy] picks per message: [Never],
// [Always], [AboveSize], or a learning policy (package fvdf) that also
// implements [CompressionObserver] to see each outcome. A compressed body
// that is not smaller than the raw one is sent raw. [Compress] and
// [Decompress] are the codecs themselves; Decompress never allocates more
// than the declared decoded size, refuses sizes above a maximum
// ([ErrFrameTooLarge]) and refuses input that cannot decode to exactly the
// declared size ([ErrCorruptFrame]).
//
// Optional interfaces, found by type assertion, are implemented by both
// transports: [RequestAppender] reads a response into a caller's reused
// buffer (call it on any Transport with [RequestAppend]), [VectorRequester]
// sends a request given in pieces without joining them ([RequestAppendV]),
// and [StatsReporter] counts frames and raw and wire bytes in each
// direction, the traffic a compression policy saves. On the serving side a
// Handler may also be an [AppendHandler] (it writes its response into a
// buffer the transport offers) and a [VectorHandler] (it reads a request in
// pieces); with both, an in-process request and its response are never
// copied.
//
// # Ordering and concurrency
//
// All Transport methods are safe for concurrent use, and many callers may
// have requests in flight to one peer at once: TCP multiplexes them on one
// connection per peer and matches responses by correlation id.
//
// One-way messages from one sender to one receiver are handled in the
// order they were sent, one at a time ([Handler.HandleMessage] is called
// sequentially per sender), as long as the link stays up; a message sent
// just before a connection breaks may be lost. Requests are delivered in
// order too but handled concurrently, each in its own goroutine (TCP bounds
// them per connection with [TCPConfig.MaxConcurrentRequests]).
//
// Ownership of bytes (see [Handler]): a request body is borrowed and
// read-only, valid until the handler returns (TCP reuses pooled buffers,
// Inmem passes the caller's own buffer); a response is handed over to the
// transport, which may give it to the caller as it is, and may alias its
// request; a one-way message is always copied, since the sender goes on at
// once. The caller owns what Request returns and may reuse req as soon as
// Request returns. [AppendHandler] lets a handler write its response into
// a buffer the transport offers (the caller's dst on Inmem, a pooled one on
// TCP). The context a handler gets ends when its transport closes, when
// the caller gives up (the caller returns ctx.Err() at once — on Inmem
// after waiting for a handler still using the caller's buffers — and TCP
// sends the peer a cancel frame, best effort) or, for TCP, when the
// connection the request came on dies; a response produced after that is
// dropped.
//
// Failures, checked with errors.Is: [ErrClosed] after Close;
// [ErrUnknownPeer] for a name with no address or that never joined;
// [ErrUnreachable] when a peer cannot be reached, has crashed, or its
// connection broke with the call in flight (such calls fail promptly, not
// at their deadline); [ErrUnauthorized] when the handshake fails (a frame
// that fails its tag kills its connection: calls in flight on it fail with
// ErrUnreachable wrapping ErrUnauthorized); [ErrHandshakeVersion] when
// the peer speaks another handshake version; [ErrWeakSecret] (from
// [TCPConfig.Validate], or with ErrUnauthorized for a per-peer secret)
// for a secret shorter than [MinSecretLen];
// [ErrFrameTooLarge] for a body over the maximum; a [*RemoteError] when the
// peer's handler returned an error.
//
// # TCP wire format
//
// A connection starts with a handshake (below), then carries frames in both
// directions. Every frame is a 20-byte header and a body; integers are
// big-endian:
//
//	offset size field
//	0      4    length: bytes after this field = 16 + len(body)
//	4      1    kind: 1 request, 2 response, 3 error, 4 one-way message, 5 cancel
//	5      1    codec of the body: 0 none, 1 LZ4 block, 2 snappy block
//	6      2    reserved, zero
//	8      8    correlation id: nonzero for request/response/error/cancel, 0 for one-way
//	16     4    raw length: the body's length after decoding
//	20     ...  body
//
// The dialer sends requests and one-way messages; the acceptor answers each
// request with a response or an error frame (body: the handler's error
// text, uncompressed) carrying the request's id. A dialer whose caller
// gave up on a request sends a cancel frame (kind 5, empty body) with its
// id, and the acceptor cancels that handler's context. A receiver checks the
// header before reading the body: a length or raw length above
// [TCPConfig.MaxFrameSize], an unknown kind or codec, nonzero reserved
// bytes, an id that does not fit the kind, or a raw length the codec
// cannot produce from that many bytes (LZ4 expands at most about 255x,
// snappy about 21x) is refused before any allocation and the connection is
// closed. The codec then decodes into exactly the raw length.
//
// On an authenticated stream (a secret, no TLS; see below) the same frames
// carry tags: the 20-byte header is followed by its 16-byte tag, and the
// body by one 16-byte tag after each record of 256 KiB (the last record
// shorter), so a body of n bytes takes n + 16·⌈n/262144⌉ bytes. The length
// field still counts the header and the body only. A receiver checks a
// header's tag before it parses the header, and each record's tag as the
// record arrives, before anything decodes it.
//
// Writes are serialized per connection: small frames are copied with their
// header into one write, large ones go out as a two-element writev. Reads
// go through a 64 KiB bufio.Reader; bodies land in pooled buffers on the
// serving side, and in a fresh slice the caller owns on the calling side.
//
// # Handshake and security
//
// Before any frame, the dialer sends a hello ("FLCN", version 3, flags,
// its node name, a 32-byte random nonce) and the acceptor answers with a
// status byte and its own hello (its name and nonce, nothing keyed). With
// [TCPConfig.Secret] set, the dialer then proves the secret with
// HMAC-SHA256 over both hellos; only once that proof has checked does the
// acceptor answer with a status byte and its own proof (role-tagged, so
// neither proof can be replayed as the other), which the dialer checks. A
// wrong proof gets the refusal status and the connection closed. A peer
// without the secret, with a different one, or with a mismatched setting
// is refused with [ErrUnauthorized] and cannot get a single frame to the
// handler. The dialer also checks, before it proves anything, that the
// node answering at an address has the name it dialed (under
// [TCPConfig.CertIdentity], in its certificate as well as its hello). A
// hello of another version is answered with a status that carries the
// acceptor's version,
// and both sides fail with [ErrHandshakeVersion] naming both ("transport:
// peer speaks handshake v2, we speak v3"); an acceptor of version 1 or 2
// answers a version 3 hello as malformed. The handshake protocol is ours
// (no published spec), built from standard parts; handshake.go has its
// layout.
//
// Who proves first. A stranger who connects gets the acceptor's name and
// nonce and nothing that would test a guess of the secret offline
// (version 2 sent the acceptor's proof right after the stranger's hello).
// The dialer's proof, in turn, goes to whoever answers at the address it
// dials, so a party that can take over a configured address (or sit on
// the path to it) could collect one proof per dial and guess the secret
// offline. That is accepted: a node dials only the addresses its
// configuration names, taking one over needs a foothold on the cluster's
// network or name service, TLS ([TCPConfig.TLS]) with a verified server
// certificate authenticates the acceptor before any proof is sent, and
// every guess costs a scrypt
// derivation (below), as does a guess from a handshake recorded on the
// path, which was always possible without TLS.
//
// Secrets. A secret must have at least [MinSecretLen] (16) bytes, or
// [TCPConfig.Validate] refuses it with [ErrWeakSecret] (a per-peer secret
// that short refuses its peer with the same error): 16 bytes hold 128
// random bits, the strength of the AES keys behind the frame tags, and a
// secret any shorter cannot be random enough to resist guessing.
// Neither the MACs nor the frame keys use the secret as it is: it is
// stretched first with scrypt (RFC 7914, golang.org/x/crypto/scrypt),
// N = 2^15, r = 8, p = 1, a 32-byte key, salted with the fixed label
// "falcon/transport/v3 secret". One derivation takes 32 MiB and about
// 68 ms of one core of the project's 2-core Xeon VM (Go 1.26,
// 2026-12-05), so an offline guess costs that much, about 15 guesses per
// second per core where the bare HMAC-SHA256 allowed about 940,000. The
// salt is fixed, so a dictionary's scrypt outputs, once computed, serve
// against every deployment: length and randomness keep a secret out of
// dictionaries, the KDF only makes each guess dear; use 32 random bytes. A
// process derives each distinct secret once (a cache of 256 keys; NewTCP
// derives [TCPConfig.Secret], about 70 ms the first time), at most two at
// a time; keys derived for names that connecting peers claimed but did
// not prove are the first to leave the cache. The acceptor derives a key
// only for a secret [TCPConfig.PeerSecret] gives a claimed name, so a
// PeerSecret that answers any name lets a stranger buy one derivation per
// fresh name.
//
// With a secret and without TLS, the handshake also keys the wire: both
// sides derive one AES-256 key per direction with HKDF-SHA256 (RFC 5869)
// from the stretched secret, salted with a hash of both hellos (both names, both
// nonces), and every frame header and body record carries a GMAC tag
// (AES-GCM with an empty plaintext, NIST SP 800-38D) whose nonce is a
// per-direction counter of tags, never sent and never reused. So the
// bytes of an authenticated connection come from the peer that proved the
// secret in its handshake, in the order it sent them: a frame injected by
// a relay that forwarded a genuine handshake, or replayed, reordered,
// dropped, modified or reflected back, fails its tag; the connection is
// dropped and nothing of it reaches the handler. Bodies are authenticated,
// not encrypted: use TLS ([TCPConfig.TLS]) against eavesdroppers. Under
// TLS the frames carry no tags of their own (TLS authenticates its
// records) and the secret's proofs cover the TLS session's exporter value
// (RFC 9266 tls-exporter), so a proof made inside one TLS session is
// worth nothing in another.
//
// Trust model. The from a [Handler] is given, for every request and
// message, is the name the connection's peer claimed in its hello, bound
// to the connection and every frame on it. What that name is worth
// depends on what the peer proved:
//
//   - Nothing (no secret, no TLS): the name is taken on trust, and nothing
//     on the wire is checked.
//   - A shared secret ([TCPConfig.Secret]) proves membership only: the
//     peer is one of the nodes given the secret, and any of them can claim
//     any name, so any member can claim any role (a worker can send what
//     only the coordinator may send). It separates members from strangers,
//     not members from each other (see Secrets above for its strength).
//   - Keys per pair of nodes ([TCPConfig.PeerSecret] with [PairKeys],
//     minted by the operator with [MintPairKeys]) prove identity: the key
//     of a and b is held by a, b and the operator only, so the acceptor b
//     knows the dialer is a. A node cannot derive another pair's key.
//     ([NodeSecret], from which every holder of the master derived every
//     key, is deprecated: it proves nothing.)
//   - Mutual TLS with one certificate per node ([TCPConfig.CertIdentity],
//     [IdentityTLS]) proves identity: the name is a DNS SAN of the peer's
//     certificate, issued by the operator's CA; an acceptor refuses a
//     hello claiming a name the dialer's certificate does not carry, and
//     a dialer refuses an acceptor whose certificate does not carry the
//     name it dialed. TLS alone, with one certificate shared by all nodes
//     or without CertIdentity, proves membership only, like a secret.
//
// A secret may be combined with TLS: it then adds membership to what TLS
// proves. A node that joins later needs its credentials: under mutual
// TLS only its own certificate, issued by the CA the cluster trusts (for
// example by cert-manager, one Certificate per pod, dnsNames holding the
// node name), and no other node changes; under pair keys a key with every
// peer it talks to, which the operator must mint and add to each of those
// peers' key files too (and the peers must reload them). Mutual TLS is
// therefore the recommended way to prove identity; pair keys suit small
// fixed clusters without a CA.
//
// Exhaustion. An accepted connection has [TCPConfig.HandshakeTimeout]
// (3 s by default) from its accept to finish TLS and the handshake. The
// accept loop never waits for a handshake to finish: at most
// [TCPConfig.MaxPendingHandshakesPerSource] (16 by default) connections
// from one source (an IPv4 address, an IPv6 /64) may be in their
// handshake at once, and one more from that source is closed as soon as
// it is accepted; at most [TCPConfig.MaxPendingHandshakes] (64 by
// default) may be in all, and one more closes the oldest pending. So idle
// strangers hold few descriptors, each briefly, and a member's fresh
// connection is accepted and its handshake served at once (measured by a
// test: a member completes a request while 500 idle strangers, from one
// source or from ten, are connected; before this, 200 idle strangers made
// the member's dial run out its 5 s). [TCPConfig.HandshakeFailed], when
// set, is told the cause of each accepted connection closed before its
// handshake completed (refused, another version, out of time, over a
// bound): the acceptor's only view of them. A flood from many sources
// can still close members' handshakes as the oldest pending, if 64 new
// connections arrive within one handshake's round trips. Without a
// secret anyone who sends a hello is a peer, and peers' connections are
// not capped. Once a frame header has arrived, its body must arrive
// within [TCPConfig.BodyTimeout] (30 s by default) plus one second per
// MiB declared, or the connection is dropped, so a peer that declares a
// large body and stalls frees its buffer and the callers waiting on it.
// An authenticated peer may still have MaxConcurrentRequests
// frames of MaxFrameSize in flight, and an idle connection between frames
// is not timed.
//
// # Reconnection and Close
//
// A connection that dies (peer crash, network cut, corrupt frame) fails
// the calls in flight on it and is replaced by a fresh dial on the next
// call. After a failed dial, calls to that peer fail at once with the dial
// error for [TCPConfig.ReconnectBackoff], doubling per consecutive failure
// up to MaxReconnectBackoff. Close stops the listener, closes every
// connection, cancels the handlers' context and returns only once every
// goroutine the transport started has ended, handlers included (a handler
// must honour its ctx).
//
// # Performance
//
// Benchmarks in bench_test.go measure a request carrying 1e3, 1e5 and 1e6
// float32 values (4 KB, 400 KB, 4 MB of N(0, 0.01²) gradient bytes) and
// its echo, over Inmem and TCP on 127.0.0.1, with codecs none and lz4,
// against two ceilings: copy() of the payload and a raw TCP stream echo
// of it with no framing. BenchmarkPairedTCPvsRaw alternates transport and
// raw round trips iteration by iteration and reports their ratio, which is
// robust to a shared, loaded machine:
//
//	go test -run '^$' -bench 'Paired|Request|Ceiling' -benchtime 1s ./transport
//
// With a secret (no TLS), the benchmark runs the same Request and
// RequestAppend over a second node pair whose frames carry tags, and
// reports auth/off and auth-append/append (authenticated over
// unauthenticated throughput) and the µs authentication adds to a round
// trip. GMAC authenticates about 12-14 GB/s on one core of the project's
// machine, and a round trip tags and checks each byte twice (once per side
// per direction), so on loopback, where moving a byte costs about as much
// as hashing it, authentication costs far more than on a real network;
// the writer tags and writes one record at a time and the reader checks
// each record as it arrives, so the two sides' work overlaps where a core
// is free. Protocol for the figures (fixed before they were taken): the
// command below with -benchtime 1s -count 5, each count one paired sample;
// per size the median of the five auth/off, auth-append/append and
// auth-added-µs/op values with a 95 % percentile-bootstrap interval of the
// median (10,000 resamples); "meets the goal" only where the whole
// interval does (auth/off >= 0.9 at 4 MB, added <= 5 µs at 4 KB).
// Measured 2026-12-01 on the 2-core Xeon VM while other jobs ran (load
// average 3-5), medians [95 % interval]:
//
//	size   auth/off            auth-append/append  auth-added-µs/op
//	4 KB   0.815 [0.766,0.827] 0.871 [0.843,0.937]    1.46 [0.71,1.77]
//	400 KB 0.696 [0.488,0.876] 0.621 [0.402,0.904]     104 [31,235]
//	4 MB   0.714 [0.666,0.780] 0.692 [0.660,0.718]    1456 [1245,1674]
//
// The 4 KB goal is met (about 1.5 µs added); the 4 MB goal is not: on
// this loaded machine the cores have no idle time to hide the four GMAC
// passes of a round trip (4 × 4 MB at about 13 GB/s is 1.2 ms, nearly all
// of the 1.46 ms added).
//
// The TCP hot path writes header and body (or the pieces of a
// RequestAppendV) with one system call (copied together below 16 KiB, a
// writev above), reads through a 64 KiB buffer that large bodies bypass
// (they are read straight into their destination), and keeps request
// bodies, AppendHandler responses and compression scratch in pooled
// buffers; the remaining gap to the raw stream is the goroutine hand-offs
// that multiplexing needs and, for Request, allocating (and zeroing) each
// response, which the caller owns: RequestAppend avoids it. A bigger read
// buffer would not help large bodies (it would add a copy), and pooling
// Request's responses is impossible since the caller keeps them.
//
// Inmem copies nothing without compression: the handler borrows the
// caller's request (or its pieces), and the response is handed to the
// caller as it is, or written by an AppendHandler straight into the
// caller's dst. With compression, bodies travel in pooled buffers and a
// body that does not shrink is lent rather than copied.
//
// # Usage
//
// In tests, an in-process network:
//
//	net := transport.NewInmemNetwork(transport.WithRand(rand.New(rand.NewPCG(1, 2))))
//	defer net.Close()
//	srv, _ := net.Join("server", handler)
//	wrk, _ := net.Join("worker", transporttest.Echo{})
//	net.SetDelay(time.Millisecond, 500*time.Microsecond)
//	resp, err := wrk.Request(ctx, "server", req)
//
// Across processes, TCP:
//
//	cfg := transport.DefaultTCPConfig()
//	cfg.ID = "worker-3"
//	cfg.ListenAddr = "10.0.0.7:7000"
//	cfg.Peers = map[transport.NodeID]string{"server-0": "10.0.0.2:7000"}
//	cfg.Secret = sharedSecret
//	cfg.Compression = transport.AboveSize(64<<10, transport.CodecLZ4)
//	t, err := transport.NewTCP(cfg, handler)
//	...
//	defer t.Close()
//	resp, err := t.Request(ctx, "server-0", req)
//
// To test a Transport of your own, call [github.com/falconml/falcon/transport/transporttest.Run] with a factory
// that builds connected nodes.
package transport
