package transit

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/kms/pkg/service"

	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestWithVault runs the service against a real Vault dev server: what the fake answers is
// what Vault answers, and a rotation shows in the key ID.
func TestWithVault(t *testing.T) {
	ctx := t.Context()
	vault := testvault.StartVault(t)
	if err := vault.TransitKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	s := New(vault.Client.Logical(), testvault.TransitMount, "k", 5*time.Second)
	plaintext := randomBytes(t)

	first, err := s.Encrypt(ctx, "uid-1", plaintext)
	if err != nil {
		t.Fatal(err)
	}
	if first.KeyID != "transit/k:v1" || !strings.HasPrefix(string(first.Ciphertext), "vault:v1:") || bytes.Contains(first.Ciphertext, plaintext) {
		t.Fatalf("first encryption: key ID %q, ciphertext %q; want transit/k:v1, vault:v1:…", first.KeyID, first.Ciphertext)
	}
	if _, err := vault.Client.Logical().WriteWithContext(ctx, "transit/keys/k/rotate", nil); err != nil {
		t.Fatal(err)
	}
	status, err := s.Status(ctx)
	if err != nil || status.KeyID != "transit/k:v2" {
		t.Fatalf("status after rotation = %+v, %v; want key ID transit/k:v2", status, err)
	}
	second, err := s.Encrypt(ctx, "uid-2", plaintext)
	if err != nil || second.KeyID != "transit/k:v2" || !strings.HasPrefix(string(second.Ciphertext), "vault:v2:") {
		t.Fatalf("encryption after rotation = %+v, %v; want key ID transit/k:v2, vault:v2:…", second, err)
	}
	for _, enc := range []*service.EncryptResponse{first, second} {
		got, err := s.Decrypt(ctx, "uid-3", &service.DecryptRequest{Ciphertext: enc.Ciphertext, KeyID: enc.KeyID})
		if err != nil || !bytes.Equal(got, plaintext) {
			t.Fatalf("decrypt under %s: %v (same bytes: %v)", enc.KeyID, err, bytes.Equal(got, plaintext))
		}
	}

	missing := New(vault.Client.Logical(), testvault.TransitMount, "missing", 5*time.Second)
	if _, err := missing.Status(ctx); err == nil || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("status of a missing key: %v, want an error saying there is no such key", err)
	}
}
