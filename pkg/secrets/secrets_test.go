package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"site-a.host-1.ssh", true},
		{"kubeconfig-site-a", true},
		{"", false},
		{"Site-A", false},
		{"site/a", false},
		{"../etc", false},
		{"-leading", false},
		{strings.Repeat("a", 254), false},
	} {
		if err := secrets.ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// testStore checks the Store contract on a real backend.
func testStore(t *testing.T, s secrets.Store) {
	ctx := t.Context()
	key := randomBytes(t, 64) // binary, like a raw key
	first := map[string][]byte{"ssh-privatekey": key, "user": []byte("root\n")}

	if _, err := s.Get(ctx, "site-a.host-1.ssh"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get before Put: %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, "site-a.host-1.ssh", first); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "site-a.host-1.ssh")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got["ssh-privatekey"], key) || string(got["user"]) != "root\n" {
		t.Fatalf("Get = %d keys, want what was put", len(got))
	}
	// Put replaces the whole secret.
	if err := s.Put(ctx, "site-a.host-1.ssh", map[string][]byte{"password": []byte("p2")}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, "site-a.host-1.ssh")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["password"]) != "p2" {
		t.Errorf("after the second Put: keys %d, password %q", len(got), got["password"])
	}
	// Other names are other secrets.
	if _, err := s.Get(ctx, "site-a.host-2.ssh"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Get of another name: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "site-a.host-1.ssh"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "site-a.host-1.ssh"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "site-a.host-1.ssh"); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	// Bad input changes nothing and names the problem.
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"Bad/Name", map[string][]byte{"k": []byte("v")}, "invalid secret name"},
		{"ok-name", nil, "no data"},
		{"ok-name", map[string][]byte{"bad key": []byte("v")}, "invalid key"},
	} {
		err := s.Put(ctx, tc.name, tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Put(%q): %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := s.Get(ctx, "ok-name"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("a refused Put wrote something: %v", err)
	}
}

// TestVault runs the contract against a real Vault dev server, then checks where the data
// lives (KV v2 under the prefix), that Delete removes every version, and that neither the root
// token nor a secret reaches the server's log.
func TestVault(t *testing.T) {
	v := testvault.StartVault(t)
	s := secrets.NewVault(v.Client, "secret", "edgefleet")
	testStore(t, s)

	ctx := t.Context()
	value := randomBytes(t, 32)
	if err := s.Put(ctx, "bmc.host-1", map[string][]byte{"password": value}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "bmc.host-1", map[string][]byte{"password": []byte("second")}); err != nil {
		t.Fatal(err)
	}
	meta, err := v.Client.KVv2("secret").GetMetadata(ctx, "edgefleet/bmc.host-1")
	if err != nil {
		t.Fatalf("the secret is not at secret/edgefleet/bmc.host-1: %v", err)
	}
	if meta.CurrentVersion != 2 {
		t.Errorf("current version %d, want 2", meta.CurrentVersion)
	}
	if err := s.Delete(ctx, "bmc.host-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.KVv2("secret").GetVersion(ctx, "edgefleet/bmc.host-1", 1); err == nil {
		t.Errorf("version 1 survived Delete")
	}

	// Vault's dev mode prints its unseal key (and, with a generated root token, that too): wait
	// for the banner (printed after the server answers), which went through the filter.
	var log []byte
	testutil.Eventually(t, 30*time.Second, func() error {
		var err error
		if log, err = os.ReadFile(v.Log); err != nil {
			return err
		}
		if !bytes.Contains(log, []byte("Unseal Key: [redacted]")) {
			return fmt.Errorf("no redacted Unseal Key line in %s yet", v.Log)
		}
		return nil
	})
	if bytes.Contains(log, []byte(v.Client.Token())) {
		t.Errorf("the root token is in %s", v.Log)
	}
	if bytes.Contains(log, value) {
		t.Errorf("a secret is in %s", v.Log)
	}
}

// TestKubernetes runs the contract against Secrets of a real API server, and checks that the
// store leaves Secrets it did not write alone.
func TestKubernetes(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "secrets"})
	ns := cp.Namespace(t)
	s := secrets.NewKubernetes(cp.Client, ns)
	testStore(t, s)

	ctx := context.Background()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string][]byte{"k": []byte("theirs")}}
	if err := cp.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "someone-elses", map[string][]byte{"k": []byte("mine")}); err == nil || !strings.Contains(err.Error(), "not written by this store") {
		t.Errorf("Put over a foreign Secret: %v", err)
	}
	if _, err := s.Get(ctx, "someone-elses"); err == nil {
		t.Errorf("Get of a foreign Secret succeeded")
	}
	if err := s.Delete(ctx, "someone-elses"); err == nil {
		t.Errorf("Delete of a foreign Secret succeeded")
	}
	got := &corev1.Secret{}
	if err := cp.Client.Get(ctx, objectKey(ns, "someone-elses"), got); err != nil || string(got.Data["k"]) != "theirs" {
		t.Errorf("the foreign Secret changed: %v %q", err, got.Data["k"])
	}

	// What Put writes: an Opaque Secret with the label.
	if err := s.Put(ctx, "kubeconfig.site-a", map[string][]byte{"value": []byte("apiVersion: v1")}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Get(ctx, objectKey(ns, "kubeconfig.site-a"), got); err != nil {
		t.Fatal(err)
	}
	if got.Type != corev1.SecretTypeOpaque || got.Labels[secrets.ManagedByLabel] != "true" {
		t.Errorf("Secret type %q labels %v", got.Type, got.Labels)
	}
}

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func TestVaultPolicy(t *testing.T) {
	for _, tc := range []struct{ mount, prefix, want string }{
		{"secret", "edgefleet/site-a", `path "secret/data/edgefleet/site-a/*" { capabilities = ["create", "read", "update"] }
path "secret/metadata/edgefleet/site-a/*" { capabilities = ["delete"] }
`},
		{"/kv/", "/edgefleet/bpa/", `path "kv/data/edgefleet/bpa/*" { capabilities = ["create", "read", "update"] }
path "kv/metadata/edgefleet/bpa/*" { capabilities = ["delete"] }
`},
	} {
		if got := secrets.VaultPolicy(tc.mount, tc.prefix); got != tc.want {
			t.Errorf("VaultPolicy(%q, %q) =\n%s\nwant\n%s", tc.mount, tc.prefix, got, tc.want)
		}
	}
}
