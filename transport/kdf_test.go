package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/crypto/scrypt"
)

// A secret shorter than MinSecretLen is refused with ErrWeakSecret, the
// message giving the reason; one of exactly MinSecretLen bytes is
// accepted.
func TestTCPConfig_WeakSecretRefused(t *testing.T) {
	for _, n := range []int{1, MinSecretLen - 1, MinSecretLen, 2 * MinSecretLen} {
		c := TCPConfig{ID: "a", Secret: bytes.Repeat([]byte{'k'}, n)}
		err := c.Validate()
		if n < MinSecretLen {
			if !errors.Is(err, ErrWeakSecret) || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("has %d bytes, at least %d", n, MinSecretLen))) {
				t.Errorf("Validate with a %d-byte secret = %v; want ErrWeakSecret naming both lengths", n, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Validate with a %d-byte secret = %v", n, err)
		}
	}
	if MinSecretLen != 16 {
		t.Errorf("MinSecretLen = %d; the docs state 16", MinSecretLen)
	}
}

// A per-peer secret shorter than MinSecretLen refuses that peer (the dial
// fails with ErrWeakSecret and ErrUnauthorized), and a long one of the
// same shape connects.
func TestTCP_WeakPeerSecretRefused(t *testing.T) {
	long := []byte("falcon test secret")
	srv, err := NewTCP(TCPConfig{ID: "srv", PeerSecret: func(NodeID) []byte { return long }}, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		secret []byte
		ok     bool
	}{{[]byte("short"), false}, {long, true}} {
		cli, err := NewTCP(TCPConfig{ID: "cli", PeerSecret: func(NodeID) []byte { return tc.secret },
			Peers: map[NodeID]string{"srv": srv.Addr().String()}}, &countingHandler{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Request(ctx, "srv", []byte("x"))
		cancel()
		cli.Close()
		if tc.ok && err != nil {
			t.Fatalf("request with a %d-byte peer secret: %v", len(tc.secret), err)
		}
		if !tc.ok && (!errors.Is(err, ErrWeakSecret) || !errors.Is(err, ErrUnauthorized)) {
			t.Fatalf("request with a %d-byte peer secret: %v; want ErrWeakSecret and ErrUnauthorized", len(tc.secret), err)
		}
	}
}

// The stretched key is scrypt with the parameters doc.go and kdf.go
// state, and differs per secret.
func TestStretch_IsScryptWithStatedParameters(t *testing.T) {
	secret := []byte("falcon test secret")
	if defaultScryptN != 32768 || scryptR != 8 || scryptP != 1 || stretchedLen != 32 {
		t.Fatalf("scrypt N=%d r=%d p=%d, %d bytes; the docs state N=32768, r=8, p=1, 32 bytes", defaultScryptN, scryptR, scryptP, stretchedLen)
	}
	n := 32768
	if scryptN != defaultScryptN {
		n = scryptN
		t.Logf("race detector build: N lowered to %d (kdf_race_test.go)", n)
	}
	want, err := scrypt.Key(secret, []byte("falcon/transport/v3 secret"), n, 8, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	got := testKey(t, secret)
	if !bytes.Equal(got, want) {
		t.Fatalf("stretch = %x, want scrypt(N=32768, r=8, p=1) = %x", got, want)
	}
	if other := testKey(t, []byte("relay test secret")); bytes.Equal(other, got) {
		t.Fatal("two secrets stretch to one key")
	}
}

// The process-wide cache holds at most kdfCacheSize keys. When full it
// drops the oldest untrusted key (one derived for a name a connecting
// peer claimed but did not prove), so strangers' claims cannot push out
// the keys of members; with none untrusted, the oldest.
func TestStretchCache_BoundedStrangersFirst(t *testing.T) {
	c := newKDFCache()
	id := func(i int) kdfID { return secretID([]byte(fmt.Sprint(i))) }
	// A trusted key, then untrusted ones up to the bound.
	c.addLocked(id(0), []byte{0}, true)
	for i := 1; i < kdfCacheSize; i++ {
		c.addLocked(id(i), []byte{byte(i)}, false)
	}
	for i := kdfCacheSize; i < kdfCacheSize+10; i++ {
		c.addLocked(id(i), []byte{byte(i)}, false)
	}
	if len(c.keys) != kdfCacheSize || len(c.order) != kdfCacheSize {
		t.Fatalf("cache holds %d keys (%d in order), want %d", len(c.keys), len(c.order), kdfCacheSize)
	}
	if _, ok := c.keys[id(0)]; !ok {
		t.Fatal("the trusted key was dropped while untrusted ones were kept")
	}
	for i := 1; i <= 10; i++ {
		if _, ok := c.keys[id(i)]; ok {
			t.Fatalf("untrusted key %d, among the oldest, was kept", i)
		}
	}
	if _, ok := c.keys[id(kdfCacheSize+9)]; !ok {
		t.Fatal("the newest key was dropped")
	}
	// All trusted: the oldest goes.
	for _, e := range c.keys {
		e.trusted = true
	}
	c.addLocked(id(-1), []byte{1}, true)
	if _, ok := c.keys[id(0)]; ok || len(c.keys) != kdfCacheSize {
		t.Fatalf("with every key trusted the oldest was kept (%d keys)", len(c.keys))
	}
}

// A claimed name's key is cached untrusted, so a repeated claim costs no
// new derivation, and trusted once proved.
func TestStretch_ClaimedKeyCachedUntrusted(t *testing.T) {
	c := newKDFCache()
	secret := []byte("falcon test secret")
	k, err := c.stretch(context.Background(), secret, false)
	if err != nil {
		t.Fatal(err)
	}
	e := c.keys[secretID(secret)]
	if e == nil || !bytes.Equal(e.key, k) || e.trusted {
		t.Fatalf("cache entry %+v after a claim; want the key, untrusted", e)
	}
	c.sem <- struct{}{} // no derivation can run now
	c.sem <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if k2, err := c.stretch(ctx, secret, false); err != nil || !bytes.Equal(k2, k) {
		t.Fatalf("a repeated claim = %v; want the cached key without a derivation", err)
	}
	<-c.sem
	<-c.sem
	c.trust(secret, k)
	if !c.keys[secretID(secret)].trusted {
		t.Fatal("trust did not mark the key trusted")
	}
}
