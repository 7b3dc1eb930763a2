package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/scrypt"
)

// Secret stretching. A shared or per-peer secret is never used as it is:
// the handshake's MACs and the frame keys (auth.go) are keyed with
//
//	K = scrypt(secret, salt = "falcon/transport/v3 secret", N = 2^15, r = 8, p = 1, 32 bytes)
//
// (scrypt: Percival, RFC 7914; golang.org/x/crypto/scrypt). N = 2^15,
// r = 8, p = 1 is the cost x/crypto's documentation recommends for
// interactive logins; it takes 128·N·r bytes = 32 MiB and, measured on the
// project's 2-core Xeon VM (Go 1.26, 2026-12-05), about 68 ms of one core
// per derivation. So whoever holds a proof or a recorded handshake and
// tries a guess offline pays one scrypt per guess, about 15 guesses per
// second per core and 32 MiB each, where the bare HMAC-SHA256 allowed
// about 940,000 per second per core. The salt is fixed (the nodes share
// nothing else to salt with), so a table of scrypt outputs computed once
// for a dictionary would serve against every deployment: the length
// minimum below and a random secret, not the KDF, are what keep a secret
// out of any dictionary.
//
// A process derives each distinct secret once: keys are kept in a small
// process-wide cache keyed by SHA-256(salt | secret), so the many nodes a
// test or a one-process cluster creates share one derivation, and a
// stranger who claims one name over and over costs one derivation. At
// most kdfConcurrency derivations run at once (each holds 32 MiB). The
// acceptor derives only for the secrets PeerSecret gives the names
// dialers claim (Secret is derived by NewTCP): a PeerSecret that gives a
// secret to any name lets a stranger buy a derivation, 32 MiB and 70 ms of
// a core, with each fresh name, at most kdfConcurrency at once.
const (
	// MinSecretLen is the shortest secret (shared, or per peer) a TCP
	// transport accepts: 16 bytes, room for 128 random bits, the strength
	// of the AES keys behind the frame tags and the most any offline search
	// could be asked to beat. Shorter ones are refused with ErrWeakSecret:
	// they cannot be random enough (a word, a PIN, the 1-byte secret of
	// issue 25), and stretching multiplies the cost of a guess, it does not
	// make a small space of guesses large. Length cannot prove randomness:
	// use 32 bytes from a cryptographic random source.
	MinSecretLen = 16

	defaultScryptN = 1 << 15
	scryptR        = 8
	scryptP        = 1
	stretchedLen   = 32
	kdfSalt        = "falcon/transport/v3 secret"
	kdfCacheSize   = 256 // distinct secrets remembered per process
	kdfConcurrency = 2   // derivations at once: 2 × 32 MiB
)

// scryptN is scrypt's N: defaultScryptN, except in this package's tests
// built with the race detector (kdf_race_test.go), which makes scrypt
// about six times slower (400 ms a derivation) and checks concurrency,
// not cost.
var scryptN = defaultScryptN

// ErrWeakSecret is returned (by TCPConfig.Validate for Secret, and by a
// dial or an accepted handshake for a PeerSecret result) for a secret
// shorter than MinSecretLen.
var ErrWeakSecret = errors.New("transport: secret too short")

// checkSecret refuses a secret shorter than MinSecretLen; what names it.
func checkSecret(what string, secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: %s has %d bytes, at least %d needed (a short secret is found by guessing; use %d random bytes)",
			ErrWeakSecret, what, len(secret), MinSecretLen, 2*MinSecretLen)
	}
	return nil
}

type kdfID [sha256.Size]byte

// kdfCall is one derivation; waiters block on done.
type kdfCall struct {
	done chan struct{}
	key  []byte
	err  error
}

// kdfEntry is a cached key; trusted once this node configured the secret
// (Secret, or the PeerSecret of a peer it dials) or a peer proved it.
type kdfEntry struct {
	key     []byte
	trusted bool
}

// kdfCache holds at most kdfCacheSize stretched keys by kdfID. When full,
// it drops the oldest untrusted key, or the oldest key when all are
// trusted: names a stranger claims cannot push out the keys of members.
type kdfCache struct {
	mu       sync.Mutex
	keys     map[kdfID]*kdfEntry
	order    []kdfID // insertion order, for eviction
	inflight map[kdfID]*kdfCall
	sem      chan struct{}
}

var stretchCache = newKDFCache()

func newKDFCache() *kdfCache {
	return &kdfCache{
		keys:     make(map[kdfID]*kdfEntry),
		inflight: make(map[kdfID]*kdfCall),
		sem:      make(chan struct{}, kdfConcurrency),
	}
}

func secretID(secret []byte) kdfID {
	h := sha256.New()
	h.Write([]byte(kdfSalt))
	h.Write(secret)
	return kdfID(h.Sum(nil))
}

// stretch returns K for secret (see above), from the process's cache or
// by deriving it (once however many callers ask at once); a derivation
// waits for a free slot until ctx ends. trusted marks the key as one this
// node configured (see kdfEntry); a key derived for a name a connecting
// peer claimed is cached untrusted, so a repeated claim costs no new
// derivation, and trust(secret) marks it once the peer has proved it.
func stretch(ctx context.Context, secret []byte, trusted bool) ([]byte, error) {
	return stretchCache.stretch(ctx, secret, trusted)
}

func (c *kdfCache) stretch(ctx context.Context, secret []byte, trusted bool) ([]byte, error) {
	id := secretID(secret)
	for {
		c.mu.Lock()
		if e, ok := c.keys[id]; ok {
			e.trusted = e.trusted || trusted
			c.mu.Unlock()
			return e.key, nil
		}
		call := c.inflight[id]
		if call == nil {
			call = &kdfCall{done: make(chan struct{})}
			c.inflight[id] = call
			c.mu.Unlock()
			call.key, call.err = c.derive(ctx, secret)
			c.mu.Lock()
			delete(c.inflight, id)
			if call.err == nil {
				c.addLocked(id, call.key, trusted)
			}
			c.mu.Unlock()
			close(call.done)
			return call.key, call.err
		}
		c.mu.Unlock()
		select {
		case <-call.done:
			// Cached now, or the deriving caller's ctx ended: look again.
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// trust marks the cached key of secret as trusted (a peer proved it),
// adding key when it is no longer cached.
func trust(secret, key []byte) { stretchCache.trust(secret, key) }

func (c *kdfCache) trust(secret, key []byte) {
	id := secretID(secret)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.keys[id]; ok {
		e.trusted = true
		return
	}
	c.addLocked(id, key, true)
}

func (c *kdfCache) addLocked(id kdfID, key []byte, trusted bool) {
	if len(c.order) >= kdfCacheSize {
		i := 0
		for j, o := range c.order {
			if !c.keys[o].trusted {
				i = j
				break
			}
		}
		delete(c.keys, c.order[i])
		c.order = append(c.order[:i], c.order[i+1:]...)
	}
	c.keys[id] = &kdfEntry{key: key, trusted: trusted}
	c.order = append(c.order, id)
}

func (c *kdfCache) derive(ctx context.Context, secret []byte) ([]byte, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	k, err := scrypt.Key(secret, []byte(kdfSalt), scryptN, scryptR, scryptP, stretchedLen)
	if err != nil {
		return nil, fmt.Errorf("transport: stretching the secret: %w", err)
	}
	return k, nil
}

// handshakeKey returns the raw secret a connection with peer must prove
// and its stretched key K, both nil when no secret is configured. An error
// refuses the peer: no secret for it (PeerSecret gave none), one shorter
// than MinSecretLen (ErrWeakSecret), or ctx ended during the derivation.
// trusted says whether this node chose peer (it dials it) or peer is a
// name a connecting peer claims (see stretch).
func (t *TCP) handshakeKey(ctx context.Context, peer NodeID, trusted bool) (secret, key []byte, err error) {
	secret, ok := t.secretFor(peer)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no secret for peer %q", ErrUnauthorized, peer)
	}
	if len(secret) == 0 {
		return nil, nil, nil
	}
	if t.key != nil && bytes.Equal(secret, t.cfg.Secret) {
		return secret, t.key, nil // stretched by NewTCP
	}
	if err := checkSecret(fmt.Sprintf("the secret for peer %q", peer), secret); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	key, err = stretch(ctx, secret, trusted)
	if err != nil {
		return nil, nil, err
	}
	return secret, key, nil
}
