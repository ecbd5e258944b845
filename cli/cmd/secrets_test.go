package cmd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// TestSecretsReencrypt switches encryption on where Secrets were stored in clear, then rotates
// the secretbox key, running 'edgefleet secrets reencrypt' after each: what etcd holds follows
// the current key, the namespace flag limits the run, and the Secrets read back.
func TestSecretsReencrypt(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "reencrypt"})
	ns, other := cp.Namespace(t), cp.Namespace(t)
	values := map[client.ObjectKey]string{}
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: "a"}, {Namespace: ns, Name: "b"}, {Namespace: other, Name: "c"}} {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		values[key] = hex.EncodeToString(raw)
		s := &corev1.Secret{Data: map[string][]byte{"value": []byte(values[key])}}
		s.Namespace, s.Name = key.Namespace, key.Name
		if err := cp.Client.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	// stored checks how etcd holds each Secret: starting with prefix, or in clear when prefix
	// is empty.
	stored := func(key client.ObjectKey, prefix string) {
		t.Helper()
		etcdKey := "/registry/secrets/" + key.Namespace + "/" + key.Name
		got, err := cp.Stored(t.Context(), etcdKey)
		if err != nil {
			t.Fatal(err)
		}
		inClear := bytes.Contains(got[etcdKey], []byte(values[key]))
		if prefix == "" && !inClear || prefix != "" && (inClear || !bytes.HasPrefix(got[etcdKey], []byte(prefix))) {
			t.Errorf("Secret %s in etcd: in clear %v, starts with %q; want prefix %q (empty: in clear)", key, inClear, got[etcdKey][:min(len(got[etcdKey]), 30)], prefix)
		}
	}
	reencrypt := func(want string, args ...string) {
		t.Helper()
		out, err := runAs(t, kubeconfigOf(t, cp), append([]string{"secrets", "reencrypt"}, args...)...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("secrets reencrypt %v: %v\n%s\nwant %q", args, err, out, want)
		}
	}
	provider := func(name string) apiserverv1.ProviderConfiguration {
		p, err := encryption.SecretboxProvider(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	key1, key2 := provider("key-1"), provider("key-2")

	if err := cp.SetEncryption(key1); err != nil {
		t.Fatal(err)
	}
	stored(client.ObjectKey{Namespace: ns, Name: "a"}, "") // switching on rewrites nothing
	reencrypt("2 Secrets stored again, 0 under the current key already", "-n", ns)
	stored(client.ObjectKey{Namespace: ns, Name: "a"}, "k8s:enc:secretbox:v1:key-1:")
	stored(client.ObjectKey{Namespace: ns, Name: "b"}, "k8s:enc:secretbox:v1:key-1:")
	stored(client.ObjectKey{Namespace: other, Name: "c"}, "")

	if err := cp.SetEncryption(key2, key1); err != nil {
		t.Fatal(err)
	}
	reencrypt("3 Secrets stored again, 0 under the current key already")
	reencrypt("0 Secrets stored again, 3 under the current key already")
	for key, value := range values {
		stored(key, "k8s:enc:secretbox:v1:key-2:")
		var s corev1.Secret
		if err := cp.Client.Get(t.Context(), key, &s); err != nil || string(s.Data["value"]) != value {
			t.Errorf("Secret %s does not read back (%v)", key, err)
		}
	}
}
