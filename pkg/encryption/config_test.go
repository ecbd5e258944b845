package encryption

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

func TestWriteConfig(t *testing.T) {
	secretbox, err := SecretboxProvider("key-1")
	if err != nil {
		t.Fatal(err)
	}
	kms := KMSProvider("edgefleet-vault", "/run/edgefleet-kms/kms.sock", 5*time.Second)
	path := filepath.Join(t.TempDir(), "encryption-config.yaml")
	if err := WriteConfig(path, kms, secretbox); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: the file may hold a key", st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != "apiserver.config.k8s.io/v1" || cfg.Kind != "EncryptionConfiguration" {
		t.Errorf("type %s/%s, want apiserver.config.k8s.io/v1 EncryptionConfiguration", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Resources) != 1 || len(cfg.Resources[0].Resources) != 1 || cfg.Resources[0].Resources[0] != "secrets" {
		t.Fatalf("resources %+v, want secrets only", cfg.Resources)
	}
	p := cfg.Resources[0].Providers
	if len(p) != 3 || p[0].KMS == nil || p[1].Secretbox == nil || p[2].Identity == nil {
		t.Fatalf("providers %s, want kms, secretbox, identity", data)
	}
	if k := p[0].KMS; k.APIVersion != "v2" || k.Name != "edgefleet-vault" || k.Endpoint != "unix:///run/edgefleet-kms/kms.sock" || k.Timeout.Duration != 5*time.Second {
		t.Errorf("kms provider %+v", k)
	}
	if err := WriteConfig(path); err == nil {
		t.Error("a configuration without providers was written")
	}
}

func TestSecretboxProviderMakesANewKeyEachTime(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		p, err := SecretboxProvider("key-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Secretbox.Keys) != 1 || p.Secretbox.Keys[0].Name != "key-1" {
			t.Fatalf("keys %+v, want one named key-1", p.Secretbox.Keys)
		}
		key, err := base64.StdEncoding.DecodeString(p.Secretbox.Keys[0].Secret)
		if err != nil || len(key) != 32 {
			t.Fatalf("key of %d bytes (%v), want 32 in base64", len(key), err)
		}
		if seen[string(key)] {
			t.Fatal("the same key twice")
		}
		seen[string(key)] = true
	}
}

func TestSecretboxKeys(t *testing.T) {
	key, err := NewSecretboxKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSecretboxKey()
	if err != nil {
		t.Fatal(err)
	}
	kept, next := apiserverv1.Key{Name: "kept-1", Secret: key}, apiserverv1.Key{Name: "kept-2", Secret: other}
	p, err := Secretbox(kept)
	if err != nil || p.Secretbox == nil || len(p.Secretbox.Keys) != 1 || p.Secretbox.Keys[0] != kept {
		t.Fatalf("Secretbox of a kept key: %+v, %v", p, err)
	}
	// The first key encrypts: the order is kept.
	p, err = Secretbox(next, kept)
	if err != nil || p.Secretbox == nil || !slices.Equal(p.Secretbox.Keys, []apiserverv1.Key{next, kept}) {
		t.Fatalf("Secretbox of two keys: %+v, %v; want them in the order given", p, err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(make([]byte, 16))} {
		if _, err := Secretbox(next, apiserverv1.Key{Name: "kept-1", Secret: bad}); err == nil || !strings.Contains(err.Error(), "secretbox key kept-1: want 32 bytes") {
			t.Errorf("Secretbox with key %q: %v, want an error naming the key", bad, err)
		}
	}
	for _, tc := range []struct {
		keys []apiserverv1.Key
		want string
	}{
		{nil, "no key"},
		{[]apiserverv1.Key{{Secret: key}}, "a key has no name"},
		{[]apiserverv1.Key{kept, {Name: "kept-1", Secret: other}}, "two keys named kept-1"},
	} {
		if _, err := Secretbox(tc.keys...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Secretbox(%d keys): %v, want %q", len(tc.keys), err, tc.want)
		}
	}
}
