package sshexec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/testhosts"
)

func TestTailBuffer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max         int
		writes      []string
		want        string
		wantDropped int64
	}{
		{"empty", 4, nil, "", 0},
		{"fits", 4, []string{"ab", "cd"}, "abcd", 0},
		{"keeps the end over writes", 4, []string{"abc", "def"}, "cdef", 2},
		{"one write larger than max", 4, []string{"abcdefgh"}, "efgh", 4},
		{"large write after small", 4, []string{"xy", "abcdefgh"}, "efgh", 6},
		{"many small writes", 3, []string{"a", "b", "c", "d", "e"}, "cde", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTailBuffer(tc.max)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			got, dropped := b.bytes()
			if string(got) != tc.want || dropped != tc.wantDropped {
				t.Errorf("got %q dropped %d, want %q dropped %d", got, dropped, tc.want, tc.wantDropped)
			}
		})
	}
}

func TestHostKeyAlgorithms(t *testing.T) {
	for _, tc := range []struct {
		keyType string
		want    []string
	}{
		{ssh.KeyAlgoED25519, []string{ssh.KeyAlgoED25519}},
		{ssh.KeyAlgoECDSA256, []string{ssh.KeyAlgoECDSA256}},
		{ssh.KeyAlgoRSA, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}},
	} {
		if got := hostKeyAlgorithms(tc.keyType); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("hostKeyAlgorithms(%s) = %v, want %v", tc.keyType, got, tc.want)
		}
	}
}

func newPublicKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	signer, _ := testhosts.SSHKey(t)
	return signer.PublicKey()
}

// TestCheckHostKey: the first key is pinned, the same key passes, another is refused naming
// the host and both fingerprints.
func TestCheckHostKey(t *testing.T) {
	ctx := context.Background()
	keys := &MemoryHostKeys{}
	e := New(nil, keys, Options{})
	first, other := newPublicKey(t), newPublicKey(t)

	if err := e.checkHostKey(ctx, "h1", nil)("h1:22", nil, first); err != nil {
		t.Fatalf("first contact: %v", err)
	}
	pinned, _ := keys.Get(ctx, "h1")
	if pinned == nil || !bytes.Equal(pinned.Marshal(), first.Marshal()) {
		t.Fatalf("first key not pinned: %v", pinned)
	}
	if err := e.checkHostKey(ctx, "h1", pinned)("h1:22", nil, first); err != nil {
		t.Errorf("pinned key refused: %v", err)
	}
	err := e.checkHostKey(ctx, "h1", pinned)("h1:22", nil, other)
	var hk *HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("other key: %v, want a *HostKeyError", err)
	}
	if hk.Host != "h1" || hk.Pinned != ssh.FingerprintSHA256(first) || hk.Offered != ssh.FingerprintSHA256(other) {
		t.Errorf("error %+v", hk)
	}
	for _, s := range []string{"h1", ssh.FingerprintSHA256(first), ssh.FingerprintSHA256(other)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if got, _ := keys.Get(ctx, "h1"); !bytes.Equal(got.Marshal(), first.Marshal()) {
		t.Errorf("a refused key replaced the pin")
	}
}

func TestParseSignerDoesNotQuoteKey(t *testing.T) {
	// A key generated here, its body cut short so it no longer parses.
	key, _ := testhosts.SSHKeyPEM(t)
	block, _ := pem.Decode(key)
	if block == nil {
		t.Fatal("the generated key is not PEM")
	}
	block.Bytes = block.Bytes[:len(block.Bytes)/2]
	junk := pem.EncodeToMemory(block)
	body := base64.StdEncoding.EncodeToString(block.Bytes)[:16]
	_, err := ParseSigner(junk)
	if err == nil {
		t.Fatal("a truncated key parsed")
	}
	if strings.Contains(err.Error(), body) {
		t.Errorf("error quotes the key: %v", err)
	}
}

// fakeKV is an in-memory KeyValueStore, a fake of the secret store.
type fakeKV struct {
	data map[string]map[string][]byte
	err  error
}

func (f *fakeKV) Get(_ context.Context, name string) (map[string][]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	d, ok := f.data[name]
	if !ok {
		return nil, fmt.Errorf("fake store: %s: %w", name, secrets.ErrNotFound)
	}
	return d, nil
}

func (f *fakeKV) Put(_ context.Context, name string, data map[string][]byte) error {
	if f.err != nil {
		return f.err
	}
	f.data[name] = data
	return nil
}

func TestStoredHostKeys(t *testing.T) {
	ctx := t.Context()
	key := newPublicKey(t)
	kv := &fakeKV{data: map[string]map[string][]byte{}}
	s := &StoredHostKeys{Store: kv, Prefix: "hostkey-"}
	if got, err := s.Get(ctx, "h1"); got != nil || err != nil {
		t.Fatalf("nothing pinned: %v, %v", got, err)
	}
	if err := s.Pin(ctx, "h1", key); err != nil {
		t.Fatal(err)
	}
	// A new store over the same entries: an agent after a restart.
	again := &StoredHostKeys{Store: kv, Prefix: "hostkey-"}
	if got, err := again.Get(ctx, "h1"); err != nil || got == nil || !bytes.Equal(got.Marshal(), key.Marshal()) {
		t.Fatalf("after restart: %v, %v", got, err)
	}
	if _, ok := kv.data["hostkey-h1"]; !ok {
		t.Errorf("entries %v, want hostkey-h1", kv.data)
	}
	kv.data["hostkey-h2"] = map[string][]byte{"host-key": []byte("garbage")}
	if _, err := s.Get(ctx, "h2"); err == nil || !strings.Contains(err.Error(), "hostkey-h2") {
		t.Errorf("corrupt entry: %v", err)
	}
	kv.err = errors.New("vault sealed")
	if _, err := s.Get(ctx, "h1"); err == nil || !strings.Contains(err.Error(), "vault sealed") {
		t.Errorf("store down: %v", err)
	}
	if err := s.Pin(ctx, "h3", key); err == nil || !strings.Contains(err.Error(), "vault sealed") {
		t.Errorf("store down, pin: %v", err)
	}
}

// TestUnreachableHost: a host nothing listens on gives an *UnreachableError naming it, which
// the BPA tells apart from a step that failed; a caller giving up is not the host's doing.
func TestUnreachableHost(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	e := New(signer, &MemoryHostKeys{}, Options{})
	target := Target{Name: "cp-0", Addr: addr}
	_, err = e.Run(t.Context(), target, Step{Name: "true", Command: "true"})
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || unreachable.Host != "cp-0" || unreachable.Addr != addr || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v, want an *UnreachableError for cp-0 at %s", err, addr)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err = e.Run(ctx, target, Step{Name: "true", Command: "true"}); errors.As(err, &unreachable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v, want context.Canceled and no *UnreachableError", err)
	}
}
