package encryption_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	kmsapi "k8s.io/kms/apis/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// transitKey is the Vault transit key of the tests' KMS plugins.
const transitKey = "edgefleet-kms"

// TestSecretsAtRest writes a Secret with a value made for the test through a real API server
// and reads what etcd holds: under the secretbox fallback and under KMS v2 through
// edgefleet-kms and Vault it starts with the provider's prefix and the value is neither in it
// nor anywhere in etcd's files; without encryption (the control) the same checks find the
// value in clear, so they can fail.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// providers returns the control plane's encryption providers.
		providers func(t *testing.T) []apiserverv1.ProviderConfiguration
		// prefix starts what etcd holds; empty: the value is there in clear.
		prefix string
	}{
		{"no encryption (the control)", func(*testing.T) []apiserverv1.ProviderConfiguration { return nil }, ""},
		{"secretbox", func(t *testing.T) []apiserverv1.ProviderConfiguration {
			p, err := encryption.SecretboxProvider("key-1")
			if err != nil {
				t.Fatal(err)
			}
			return []apiserverv1.ProviderConfiguration{p}
		}, "k8s:enc:secretbox:v1:key-1:"},
		{"KMS v2 through Vault transit", func(t *testing.T) []apiserverv1.ProviderConfiguration {
			plugin := testvault.StartKMSPlugin(t, testvault.StartVault(t), transitKey)
			return []apiserverv1.ProviderConfiguration{plugin.Provider()}
		}, "k8s:enc:kms:v2:edgefleet-vault:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := controlplane.StartT(t, controlplane.Options{Name: "encryption", Encryption: tc.providers(t)})
			ns := cp.Namespace(t)
			value := randomValue(t)
			writeSecret(t, cp, ns, "s", value)
			readBack(t, cp, ns, "s", value)

			stored := storedSecret(t, cp, ns, "s")
			files, err := cp.EtcdFilesContaining([]byte(value))
			if err != nil {
				t.Fatal(err)
			}
			if tc.prefix == "" {
				if !bytes.Contains(stored, []byte(value)) || len(files) == 0 {
					t.Fatalf("without encryption the value was not found in clear (in the stored Secret: %v, in etcd's files: %v): the check cannot fail",
						bytes.Contains(stored, []byte(value)), files)
				}
				return
			}
			if !bytes.HasPrefix(stored, []byte(tc.prefix)) {
				t.Errorf("etcd holds %q…, want it to start with %q", truncate(stored), tc.prefix)
			}
			if bytes.Contains(stored, []byte(value)) {
				t.Error("the value is in clear in what etcd holds")
			}
			if len(files) > 0 {
				t.Errorf("the value is in clear in etcd's files %v", files)
			}
		})
	}
}

// TestReencryptPageByPage switches secretbox on over more Secrets than one list call returns:
// Reencrypt rewrites every one of them.
func TestReencryptPageByPage(t *testing.T) {
	t.Parallel()
	cp := controlplane.StartT(t, controlplane.Options{Name: "reencrypt-pages"})
	ns := cp.Namespace(t)
	n := encryption.ReencryptPageSize + 1
	for i := range n {
		writeSecret(t, cp, ns, fmt.Sprintf("s-%d", i), "in clear")
	}
	box, err := encryption.SecretboxProvider("key-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.SetEncryption(box); err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := encryption.Reencrypt(t.Context(), meta, ns); err != nil || res != (encryption.Result{Rewritten: n}) {
		t.Fatalf("Reencrypt = %+v, %v; want all %d Secrets rewritten", res, err, n)
	}
	stored, err := cp.Stored(t.Context(), "/registry/secrets/"+ns+"/")
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range stored {
		if !bytes.HasPrefix(value, []byte("k8s:enc:secretbox:v1:key-1:")) {
			t.Errorf("%s is not under key-1: %q…", key, truncate(value))
		}
	}
	if len(stored) != n {
		t.Errorf("etcd holds %d Secrets of the namespace, want %d", len(stored), n)
	}
}

// TestKMSKeyRotation rotates the transit key: the plugin's key ID changes, the API server
// takes a new data encryption key under the new key version, Reencrypt stores the Secrets
// written before under it, and they read back.
func TestKMSKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	vault := testvault.StartVault(t)
	plugin := testvault.StartKMSPlugin(t, vault, transitKey)
	cp := controlplane.StartT(t, controlplane.Options{Name: "kms-rotation", Encryption: []apiserverv1.ProviderConfiguration{plugin.Provider()}})
	ns := cp.Namespace(t)
	meta, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	values := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("old-%d", i)
		values[name] = randomValue(t)
		writeSecret(t, cp, ns, name, values[name])
		if stored := storedSecret(t, cp, ns, name); !bytes.Contains(stored, []byte("vault:v1:")) {
			t.Fatalf("Secret %s is not under the transit key's version 1: %q…", name, truncate(stored))
		}
	}
	if res, err := encryption.Reencrypt(ctx, meta, ns); err != nil || res != (encryption.Result{Current: 3}) {
		t.Fatalf("Reencrypt before a rotation = %+v, %v; want 3 current, none rewritten", res, err)
	}

	if got := pluginKeyID(t, plugin); got != "transit/edgefleet-kms:v1" {
		t.Fatalf("plugin's key ID %q, want transit/edgefleet-kms:v1", got)
	}
	if _, err := vault.Client.Logical().WriteWithContext(ctx, "transit/keys/"+transitKey+"/rotate", nil); err != nil {
		t.Fatal(err)
	}
	if got := pluginKeyID(t, plugin); got != "transit/edgefleet-kms:v2" {
		t.Fatalf("plugin's key ID after the rotation %q, want transit/edgefleet-kms:v2", got)
	}

	// The API server asks for the key ID every minute, and when its health is checked once
	// the last answer is 20s old: ask for its health and write until a write uses version 2.
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 3*time.Minute, "the API server writes under the rotated key", func() (bool, string) {
		_, _ = kube.Discovery().RESTClient().Get().AbsPath("/healthz/kms-providers").DoRaw(ctx)
		value := randomValue(t)
		writeSecret(t, cp, ns, "canary", value)
		values["canary"] = value
		stored := storedSecret(t, cp, ns, "canary")
		return bytes.Contains(stored, []byte("vault:v2:")), fmt.Sprintf("%q…", truncate(stored))
	})

	res, err := encryption.Reencrypt(ctx, meta, ns)
	if err != nil || res != (encryption.Result{Rewritten: 3, Current: 1}) {
		t.Fatalf("Reencrypt after the rotation = %+v, %v; want the 3 old Secrets rewritten, the canary current", res, err)
	}
	for name, value := range values {
		stored := storedSecret(t, cp, ns, name)
		if !bytes.Contains(stored, []byte("vault:v2:")) || bytes.Contains(stored, []byte("vault:v1:")) {
			t.Errorf("Secret %s is not under version 2 alone: %q…", name, truncate(stored))
		}
		readBack(t, cp, ns, name, value)
	}
	if res, err := encryption.Reencrypt(ctx, meta, ns); err != nil || res != (encryption.Result{Current: 4}) {
		t.Errorf("Reencrypt run again = %+v, %v; want 4 current, none rewritten", res, err)
	}
}

// TestKMSVaultOutage freezes Vault: the API server writes on with its last data encryption key
// (encrypted) for at most the 3 minutes Kubernetes allows, then refuses writes rather than
// storing anything in clear, and writes again once Vault answers.
func TestKMSVaultOutage(t *testing.T) {
	t.Parallel()
	vault := testvault.StartVault(t)
	plugin := testvault.StartKMSPlugin(t, vault, transitKey)
	cp := controlplane.StartT(t, controlplane.Options{Name: "kms-outage", Encryption: []apiserverv1.ProviderConfiguration{plugin.Provider()}})
	ns := cp.Namespace(t)
	before := randomValue(t)
	writeSecret(t, cp, ns, "before", before)

	if err := vault.Pause(); err != nil {
		t.Fatal(err)
	}
	var refused, lastStored string
	testutil.WaitFor(t, 6*time.Minute, "a write refused while Vault does not answer", func() (bool, string) {
		value := randomValue(t)
		err := cp.Client.Create(t.Context(), secret(ns, "during", value))
		if err == nil {
			if stored := storedSecret(t, cp, ns, "during"); !bytes.HasPrefix(stored, []byte("k8s:enc:kms:v2:")) || bytes.Contains(stored, []byte(value)) {
				t.Fatalf("a Secret written while Vault does not answer is not encrypted: %q…", truncate(stored))
			}
			lastStored = value
			deleteSecret(t, cp, ns, "during")
			return false, "written, encrypted with the API server's last data key"
		}
		refused = value
		t.Logf("write refused: %v", err)
		return true, ""
	})
	key := "/registry/secrets/" + ns + "/during"
	if stored, err := cp.Stored(t.Context(), key); err != nil || stored[key] != nil {
		t.Fatalf("the refused Secret is in etcd (%q…, %v)", truncate(stored[key]), err)
	}
	if files, err := cp.EtcdFilesContaining([]byte(refused)); err != nil || len(files) > 0 {
		t.Fatalf("the refused value is in clear in etcd's files %v (%v)", files, err)
	}
	readBack(t, cp, ns, "before", before) // reads go on: the API server keeps the data keys it unwrapped
	t.Logf("writes went on %v while Vault did not answer", lastStored != "")

	if err := vault.Resume(); err != nil {
		t.Fatal(err)
	}
	after := randomValue(t)
	testutil.Eventually(t, 2*time.Minute, func() error {
		return cp.Client.Create(t.Context(), secret(ns, "after", after))
	})
	readBack(t, cp, ns, "after", after)
	if stored := storedSecret(t, cp, ns, "after"); !bytes.HasPrefix(stored, []byte("k8s:enc:kms:v2:")) {
		t.Errorf("the Secret written after Vault came back is not encrypted: %q…", truncate(stored))
	}
}

// pluginKeyID asks the plugin's socket for its status, as the API server does.
func pluginKeyID(t *testing.T, plugin *testvault.KMSPlugin) string {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+plugin.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	status, err := kmsapi.NewKeyManagementServiceClient(conn).Status(ctx, &kmsapi.StatusRequest{})
	if err != nil {
		t.Fatalf("status of the KMS plugin: %v", err)
	}
	return status.KeyId
}

func randomValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func secret(ns, name, value string) *corev1.Secret {
	s := &corev1.Secret{Data: map[string][]byte{"value": []byte(value)}}
	s.Namespace, s.Name = ns, name
	return s
}

// writeSecret creates the Secret or replaces its value.
func writeSecret(t *testing.T, cp *controlplane.ControlPlane, ns, name, value string) {
	t.Helper()
	s := secret(ns, name, value)
	if err := cp.Client.Get(t.Context(), client.ObjectKeyFromObject(s), &corev1.Secret{}); err == nil {
		err = cp.Client.Update(t.Context(), s)
		if err != nil {
			t.Fatalf("update Secret %s/%s: %v", ns, name, err)
		}
		return
	}
	if err := cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create Secret %s/%s: %v", ns, name, err)
	}
}

func deleteSecret(t *testing.T, cp *controlplane.ControlPlane, ns, name string) {
	t.Helper()
	if err := cp.Client.Delete(t.Context(), secret(ns, name, "")); err != nil {
		t.Fatalf("delete Secret %s/%s: %v", ns, name, err)
	}
}

// readBack fails the test unless the API server gives the Secret's value back.
func readBack(t *testing.T, cp *controlplane.ControlPlane, ns, name, value string) {
	t.Helper()
	var got corev1.Secret
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
		t.Fatalf("read Secret %s/%s: %v", ns, name, err)
	}
	if string(got.Data["value"]) != value {
		t.Fatalf("Secret %s/%s reads back other bytes", ns, name)
	}
}

// storedSecret is what etcd holds for the Secret, read straight from etcd.
func storedSecret(t *testing.T, cp *controlplane.ControlPlane, ns, name string) []byte {
	t.Helper()
	key := "/registry/secrets/" + ns + "/" + name
	stored, err := cp.Stored(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if stored[key] == nil {
		t.Fatalf("etcd holds nothing at %s", key)
	}
	return stored[key]
}

// truncate is the start of what etcd holds, enough to show its prefix and no more.
func truncate(b []byte) string {
	return strings.ToValidUTF8(string(b[:min(len(b), 48)]), "?")
}
