package transit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/kms/pkg/service"
)

// fakeVault is a fake of Vault's transit engine holding one key "k" at mount "transit" with
// versions versions (none: the key does not exist). Its ciphertexts are "vault:v<N>:" and the
// plaintext, base64 twice: no encryption, only the shapes of Vault's answers. err, when set, is
// what every call returns; answer, when set, replaces the answer of the path it names.
type fakeVault struct {
	versions  int
	err       error
	answer    map[string]*vaultapi.Secret
	deadlines []bool
}

func (f *fakeVault) ReadWithContext(ctx context.Context, path string) (*vaultapi.Secret, error) {
	return f.call(ctx, path, nil)
}

func (f *fakeVault) WriteWithContext(ctx context.Context, path string, data map[string]any) (*vaultapi.Secret, error) {
	return f.call(ctx, path, data)
}

func (f *fakeVault) call(ctx context.Context, path string, data map[string]any) (*vaultapi.Secret, error) {
	_, ok := ctx.Deadline()
	f.deadlines = append(f.deadlines, ok)
	if f.err != nil {
		return nil, f.err
	}
	if a, ok := f.answer[path]; ok {
		return a, nil
	}
	if f.versions == 0 {
		return nil, nil // Vault answers 404 with no error for a missing key's read
	}
	switch path {
	case "transit/keys/k":
		return &vaultapi.Secret{Data: map[string]any{"latest_version": json.Number(strconv.Itoa(f.versions))}}, nil
	case "transit/encrypt/k":
		ct := "vault:v" + strconv.Itoa(f.versions) + ":" + base64.StdEncoding.EncodeToString([]byte(data["plaintext"].(string)))
		return &vaultapi.Secret{Data: map[string]any{"ciphertext": ct}}, nil
	case "transit/decrypt/k":
		_, encoded, _ := strings.Cut(strings.TrimPrefix(data["ciphertext"].(string), "vault:v"), ":")
		pt, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			return nil, errors.New("fake: bad ciphertext")
		}
		return &vaultapi.Secret{Data: map[string]any{"plaintext": string(pt)}}, nil
	}
	return nil, errors.New("fake: unexpected path " + path)
}

func randomBytes(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeyIDFollowsRotation(t *testing.T) {
	ctx := t.Context()
	vault := &fakeVault{versions: 1}
	s := New(vault, "transit", "k", time.Minute)
	plaintext := randomBytes(t)

	status, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status.KeyID != "transit/k:v1" || status.Healthz != "ok" || status.Version != "v2" {
		t.Fatalf("status = %+v, want key ID transit/k:v1, healthz ok, version v2", status)
	}
	old, err := s.Encrypt(ctx, "uid-1", plaintext)
	if err != nil {
		t.Fatal(err)
	}
	if old.KeyID != status.KeyID {
		t.Fatalf("Encrypt's key ID %q is not Status's %q", old.KeyID, status.KeyID)
	}

	vault.versions = 2 // the key is rotated
	if status, err = s.Status(ctx); err != nil || status.KeyID != "transit/k:v2" {
		t.Fatalf("status after rotation = %+v, %v; want key ID transit/k:v2", status, err)
	}
	current, err := s.Encrypt(ctx, "uid-2", plaintext)
	if err != nil || current.KeyID != "transit/k:v2" {
		t.Fatalf("Encrypt after rotation = %+v, %v; want key ID transit/k:v2", current, err)
	}
	for _, enc := range []*service.EncryptResponse{old, current} {
		got, err := s.Decrypt(ctx, "uid-3", &service.DecryptRequest{Ciphertext: enc.Ciphertext, KeyID: enc.KeyID})
		if err != nil {
			t.Fatalf("decrypt under %s: %v", enc.KeyID, err)
		}
		if !bytes.Equal(got, plaintext) {
			t.Fatalf("decrypt under %s gave other bytes", enc.KeyID)
		}
	}
}

func TestErrorsNameTheKeyAndNeverCarryPlaintext(t *testing.T) {
	plaintext := randomBytes(t)
	encoded := base64.StdEncoding.EncodeToString(plaintext)
	good := []byte("vault:v1:" + base64.StdEncoding.EncodeToString([]byte(encoded)))
	answer := func(path string, data map[string]any) map[string]*vaultapi.Secret {
		return map[string]*vaultapi.Secret{path: {Data: data}}
	}
	encrypt := func(s *Service) error { _, err := s.Encrypt(t.Context(), "uid-9", plaintext); return err }
	decrypt := func(ct []byte, keyID string) func(*Service) error {
		return func(s *Service) error {
			_, err := s.Decrypt(t.Context(), "uid-9", &service.DecryptRequest{Ciphertext: ct, KeyID: keyID})
			return err
		}
	}
	status := func(s *Service) error { _, err := s.Status(t.Context()); return err }
	for _, tc := range []struct {
		name  string
		vault *fakeVault
		call  func(*Service) error
		want  string
	}{
		{"encrypt: Vault fails", &fakeVault{versions: 1, err: errors.New("connection refused")}, encrypt,
			"encrypt (request uid-9) with Vault transit key transit/k: connection refused"},
		{"encrypt: no ciphertext", &fakeVault{versions: 1, answer: answer("transit/encrypt/k", nil)}, encrypt,
			"vault's answer has no ciphertext"},
		{"encrypt: no version in the ciphertext", &fakeVault{versions: 1, answer: answer("transit/encrypt/k", map[string]any{"ciphertext": "vault:x:abc"})}, encrypt,
			`does not start with "vault:v<version>:"`},
		{"decrypt: Vault fails", &fakeVault{versions: 1, err: errors.New("permission denied")}, decrypt(good, "transit/k:v1"),
			"decrypt (request uid-9, key ID transit/k:v1) with Vault transit key transit/k: permission denied"},
		{"decrypt: key ID of another key", &fakeVault{versions: 1}, decrypt(good, "transit/other:v1"),
			"the ciphertext is of key ID transit/k:v1: was it encrypted with another transit key?"},
		{"decrypt: key ID of another version", &fakeVault{versions: 2}, decrypt(good, "transit/k:v2"),
			"the ciphertext is of key ID transit/k:v1"},
		{"decrypt: not a transit ciphertext", &fakeVault{versions: 1}, decrypt(plaintext, "transit/k:v1"),
			`does not start with "vault:v<version>:"`},
		{"decrypt: plaintext not base64", &fakeVault{versions: 1, answer: answer("transit/decrypt/k", map[string]any{"plaintext": "%%" + encoded})}, decrypt(good, "transit/k:v1"),
			"vault's plaintext is not base64"},
		{"status: Vault fails", &fakeVault{versions: 1, err: errors.New("context deadline exceeded")}, status,
			"read Vault transit key transit/k: context deadline exceeded"},
		{"status: no such key", &fakeVault{}, status,
			"read Vault transit key transit/k: no such key (create it: vault write -f transit/keys/k)"},
		{"status: no latest version", &fakeVault{versions: 1, answer: answer("transit/keys/k", map[string]any{"name": "k"})}, status,
			"vault's answer has no latest_version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(New(tc.vault, "transit", "k", time.Minute))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), encoded) || bytes.Contains([]byte(err.Error()), plaintext) {
				t.Errorf("error %q carries the plaintext", err)
			}
		})
	}
}

func TestEveryVaultCallHasADeadline(t *testing.T) {
	vault := &fakeVault{versions: 1}
	s := New(vault, "transit", "k", time.Minute)
	ctx := context.Background() // no deadline of its own
	if _, err := s.Status(ctx); err != nil {
		t.Fatal(err)
	}
	enc, err := s.Encrypt(ctx, "uid", randomBytes(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decrypt(ctx, "uid", &service.DecryptRequest{Ciphertext: enc.Ciphertext, KeyID: enc.KeyID}); err != nil {
		t.Fatal(err)
	}
	if len(vault.deadlines) != 3 || slices.Contains(vault.deadlines, false) {
		t.Errorf("calls with a deadline: %v, want 3 calls, all with one", vault.deadlines)
	}
}
