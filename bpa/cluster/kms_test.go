package cluster_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// kmsBed is a cluster's KMS on a test bed, set up as an operator sets up a site's: Vault's
// Kubernetes auth method reviewing the tokens of a control plane that stands for the site's
// cluster, the cluster's transit key, the plugin's role bound to its ServiceAccount there with
// a policy of that key alone, and a token of that ServiceAccount (what the BPA mints).
type kmsBed struct {
	vault *testvault.Vault
	site  *controlplane.ControlPlane
	ns    string
	sa    string
	spec  *cluster.KMS
}

// clusterKMS sets up the KMS of the cluster named name in vault, which the hosts reach.
func clusterKMS(t *testing.T, vault *testvault.Vault, name string) *kmsBed {
	t.Helper()
	ctx := t.Context()
	b := &kmsBed{vault: vault, site: controlplane.StartT(t, controlplane.Options{Name: "site"}), sa: "edgefleet-kms-" + name}
	b.ns = b.site.Namespace(t)
	if err := vault.KubernetesAuth(ctx, b.site, b.ns); err != nil {
		t.Fatal(err)
	}
	key := "edgefleet-kms-" + name
	if err := vault.TransitKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := vault.KubernetesRole(ctx, "edgefleet-kms", b.ns, b.sa, key, encryption.TransitPolicy(testvault.TransitMount, key), time.Hour, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(vault.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	b.spec = &cluster.KMS{
		KMSValues: packages.KMSValues{VaultAddr: vault.Addr, AuthMount: "kubernetes", Role: "edgefleet-kms", TransitMount: testvault.TransitMount, TransitKey: key},
		VaultCA:   ca,
		Token:     []byte(b.token(t)),
	}
	return b
}

// token is a new token of the plugin's ServiceAccount.
func (b *kmsBed) token(t *testing.T) string {
	t.Helper()
	token, err := b.site.ServiceAccountToken(t.Context(), b.ns, b.sa)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// kmsPrefix starts what the API servers store in etcd through the KMS plugin.
const kmsPrefix = "k8s:enc:kms:v2:" + pki.KMSProviderName + ":"

// testSecret is a Secret of the test in the cluster of cs, and its value.
type testSecret struct{ name, value string }

// createSecret creates a Secret with a random value in the cluster of cs.
func createSecret(t *testing.T, cs kubernetes.Interface, when string) testSecret {
	t.Helper()
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	value := "kms-test-" + hex.EncodeToString(raw)
	secret, err := cs.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kms-"}, StringData: map[string]string{"value": value},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: create a Secret: %v", when, err)
	}
	return testSecret{name: secret.Name, value: value}
}

// storedUnder checks that the etcd of control-plane host h holds s under prefix, that its
// value is in no file of the host's disk, and that it reads back.
func (s testSecret) storedUnder(t *testing.T, cs kubernetes.Interface, h *testhosts.Host, prefix, when string) {
	t.Helper()
	ctx := t.Context()
	stored, err := etcdctl(ctx, h, "get", "/registry/secrets/default/"+s.name, "--print-value-only")
	if err != nil {
		t.Fatalf("%s: etcdctl get: %v: %s", when, err, stored)
	}
	if !strings.HasPrefix(stored, prefix) || strings.Contains(stored, s.value) {
		t.Errorf("%s: etcd holds Secret %s as %.40q…, want it under %s", when, s.name, stored, prefix)
	}
	if files, err := testutil.FilesContaining(filepath.Join(h.Dir, "upper"), []byte(s.value)); err != nil || len(files) > 0 {
		t.Errorf("%s: the Secret's value in clear in %v (%v)", when, files, err)
	}
	got, err := cs.CoreV1().Secrets("default").Get(ctx, s.name, metav1.GetOptions{})
	if err != nil || string(got.Data["value"]) != s.value {
		t.Errorf("%s: Secret %s reads back %v", when, s.name, err)
	}
}

// secretsEncrypted creates a Secret in the cluster of cs and checks that the etcd of
// control-plane host h holds it through the KMS plugin, its value in clear nowhere.
func (b *kmsBed) secretsEncrypted(t *testing.T, cs kubernetes.Interface, h *testhosts.Host, when string) {
	t.Helper()
	createSecret(t, cs, when).storedUnder(t, cs, h, kmsPrefix, when)
}

// moveToKMS gives the KMS to spec, a cluster built with a secretbox key, and runs it until its
// Secrets have moved to the plugin: one run per phase (AddNew, UseNew with the sweep, DropOld).
// A Secret written before the move is under the secretbox key, then through the plugin once
// the sweep ran, and reads back at every step; each run restarts the API server with its
// phase's configuration, and the run after the last does nothing.
func (b *kmsBed) moveToKMS(t *testing.T, bu *cluster.BringUp, spec *cluster.Spec, cs kubernetes.Interface, h *testhosts.Host) {
	t.Helper()
	old := createSecret(t, cs, "before the move")
	old.storedUnder(t, cs, h, "k8s:enc:secretbox:v1:bpa-1:", "before the move")
	spec.KMS = b.spec
	for i, want := range []struct {
		after  pki.SecretEncryption
		prefix string
	}{
		// Each run rolls the phase's configuration out, then moves to the next phase.
		{pki.SecretEncryption{MovingToKMS: true, Phase: pki.RotationUseNew, Key: pki.KMSProviderName, Reencrypted: "bpa-1"}, "k8s:enc:secretbox:v1:bpa-1:"},
		{pki.SecretEncryption{MovingToKMS: true, Phase: pki.RotationDropOld, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, kmsPrefix},
		{pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, kmsPrefix},
	} {
		res, err := bu.Run(t.Context(), *spec)
		if err != nil {
			t.Fatalf("move run %d: %v", i+1, err)
		}
		if res.SecretEncryption != want.after {
			t.Fatalf("after move run %d: %+v, want %+v", i+1, res.SecretEncryption, want.after)
		}
		if swept := res.Reencrypted != nil; swept != (i == 1) {
			t.Errorf("move run %d: the sweep ran %v, want only in UseNew's run (%+v)", i+1, swept, res.Reencrypted)
		}
		// The phase's configuration reached the API server, restarted for it.
		if !slices.ContainsFunc(res.Ran(), func(r string) bool { return strings.HasPrefix(r, h.Name+"/kube-apiserver: ") }) {
			t.Errorf("move run %d: kube-apiserver on %s not restarted (ran %v)", i+1, h.Name, res.Ran())
		}
		old.storedUnder(t, cs, h, want.prefix, fmt.Sprintf("after move run %d", i+1))
	}
	// Moved: the next run does nothing.
	res, err := bu.Run(t.Context(), *spec)
	if err != nil || len(res.Ran()) != 0 || res.Files != 0 || res.Reencrypted != nil {
		t.Errorf("a run after the move: %v, ran %v, wrote %d files, re-encrypted %+v; want nothing done", err, res.Ran(), res.Files, res.Reencrypted)
	}
}

// renewToken runs spec again with a new token of the plugin's ServiceAccount (which spec keeps)
// and checks that control-plane host h has it, mode 0600, and that the plugin logged in with
// it, unrestarted.
func (b *kmsBed) renewToken(t *testing.T, bu *cluster.BringUp, spec *cluster.Spec, h *testhosts.Host) {
	t.Helper()
	ctx := t.Context()
	pid := func() string {
		out, err := h.Exec(ctx, "systemctl", "show", "-p", "MainPID", "--value", "edgefleet-kms.service")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	logins := func() int {
		out, err := h.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "edgefleet-kms.service")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(out), "logged in to Vault")
	}
	before, loginsBefore := pid(), logins()
	if loginsBefore == 0 {
		t.Fatalf("the plugin on %s never logged in to Vault", h.Name)
	}
	renewed := *b.spec
	renewed.Token = []byte(b.token(t))
	spec.KMS = &renewed
	if _, err := bu.Run(ctx, *spec); err != nil {
		t.Fatalf("run with a new token: %v", err)
	}
	out, err := h.Exec(ctx, "stat", "-c", "%a", "/etc/edgefleet/kms-plugin/token")
	if err != nil || strings.TrimSpace(string(out)) != "600" {
		t.Errorf("the token file's mode: %q %v, want 600", out, err)
	}
	if got, err := os.ReadFile(filepath.Join(h.Dir, "upper", "etc", "edgefleet", "kms-plugin", "token")); err != nil || string(got) != string(renewed.Token) {
		t.Fatalf("the host's token is not the new one (%v)", err)
	}
	testutil.WaitFor(t, time.Minute, "the plugin logged in again with the new token", func() (bool, string) {
		n := logins()
		return n > loginsBefore, fmt.Sprintf("%d log-ins, %d before the new token", n, loginsBefore)
	})
	if after := pid(); after != before {
		t.Errorf("the plugin was restarted for its new token: PID %s → %s", before, after)
	}
}
