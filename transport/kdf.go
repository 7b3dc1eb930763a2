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
// test or a one-process cluster creates share one derivation. At most
// kdfConcurrency derivations run at once (each holds 32 MiB).
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

// kdfCache holds stretched keys by kdfID, first in first out.
type kdfCache struct {
	mu       sync.Mutex
	keys     map[kdfID][]byte
	order    []kdfID // insertion order, for eviction
	inflight map[kdfID]*kdfCall
	sem      chan struct{}
}

var stretchCache = &kdfCache{
	keys:     make(map[kdfID][]byte),
	inflight: make(map[kdfID]*kdfCall),
	sem:      make(chan struct{}, kdfConcurrency),
}

func secretID(secret []byte) kdfID {
	h := sha256.New()
	h.Write([]byte(kdfSalt))
	h.Write(secret)
	return kdfID(h.Sum(nil))
}

// stretch returns K for secret (see above), from the cache or by
// deriving it; a derivation waits for a free slot until ctx ends. With
// rememberKey false a derived key is not added to the cache (see remember),
// so a peer that has proved nothing cannot evict the keys of members.
func stretch(ctx context.Context, secret []byte, rememberKey bool) ([]byte, error) {
	id := secretID(secret)
	c := stretchCache
	c.mu.Lock()
	if k, ok := c.keys[id]; ok {
		c.mu.Unlock()
		return k, nil
	}
	call := c.inflight[id]
	if call == nil {
		call = &kdfCall{done: make(chan struct{})}
		c.inflight[id] = call
		c.mu.Unlock()
		call.key, call.err = c.derive(ctx, secret)
		c.mu.Lock()
		delete(c.inflight, id)
		if call.err == nil && rememberKey {
			c.addLocked(id, call.key)
		}
		c.mu.Unlock()
		close(call.done)
		return call.key, call.err
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		if call.err != nil { // the deriving caller's ctx ended: try ours
			return stretch(ctx, secret, rememberKey)
		}
		if rememberKey {
			remember(secret, call.key)
		}
		return call.key, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// remember adds a key stretch derived with remember false, once the
// secret has been proved by a peer.
func remember(secret, key []byte) {
	id := secretID(secret)
	c := stretchCache
	c.mu.Lock()
	if _, ok := c.keys[id]; !ok {
		c.addLocked(id, key)
	}
	c.mu.Unlock()
}

func (c *kdfCache) addLocked(id kdfID, key []byte) {
	if len(c.order) >= kdfCacheSize {
		delete(c.keys, c.order[0])
		c.order = append(c.order[:0], c.order[1:]...)
	}
	c.keys[id] = key
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
// rememberKey says whether a derived key goes into the process's cache at
// once (a peer this node dials) or only once the peer has proved it (see
// remember).
func (t *TCP) handshakeKey(ctx context.Context, peer NodeID, rememberKey bool) (secret, key []byte, err error) {
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
	key, err = stretch(ctx, secret, rememberKey)
	if err != nil {
		return nil, nil, err
	}
	return secret, key, nil
}
