package cluster_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// kmsBed is a cluster's KMS on a test bed, set up as an operator sets up a site's: Vault's
// Kubernetes auth method reviewing the tokens of a control plane that stands for the site's
// cluster, the cluster's transit key, the plugin's role bound to its ServiceAccount there with
// a policy of that key alone, and a token of that ServiceAccount (what the BPA mints).
type kmsBed struct {
	vault *testenv.Vault
	site  *testenv.ControlPlane
	ns    string
	sa    string
	spec  *cluster.KMS
}

// clusterKMS sets up the KMS of the cluster named name in vault, which the hosts reach.
func clusterKMS(t *testing.T, vault *testenv.Vault, name string) *kmsBed {
	t.Helper()
	ctx := t.Context()
	b := &kmsBed{vault: vault, site: testenv.StartT(t, testenv.Options{Name: "site"}), sa: "edgefleet-kms-" + name}
	b.ns = b.site.Namespace(t)
	if err := vault.KubernetesAuth(ctx, b.site, b.ns); err != nil {
		t.Fatal(err)
	}
	key := "edgefleet-kms-" + name
	if err := vault.TransitKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := vault.KubernetesRole(ctx, "edgefleet-kms", b.ns, b.sa, key, encryption.TransitPolicy(testenv.TransitMount, key), time.Hour, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(vault.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	b.spec = &cluster.KMS{
		KMSValues: packages.KMSValues{VaultAddr: vault.Addr, AuthMount: "kubernetes", Role: "edgefleet-kms", TransitMount: testenv.TransitMount, TransitKey: key},
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

// secretsEncrypted creates a Secret in the cluster of cs and checks that the etcd of
// control-plane host h holds it under the KMS plugin's provider, that its value is in no file
// of the host's disk, and that it reads back.
func (b *kmsBed) secretsEncrypted(t *testing.T, cs kubernetes.Interface, h *testenv.Host, when string) {
	t.Helper()
	ctx := t.Context()
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	value := "kms-test-" + hex.EncodeToString(raw)
	secret, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kms-"}, StringData: map[string]string{"value": value},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: create a Secret: %v", when, err)
	}
	stored, err := etcdctl(ctx, h, "get", "/registry/secrets/default/"+secret.Name, "--print-value-only")
	if err != nil {
		t.Fatalf("%s: etcdctl get: %v: %s", when, err, stored)
	}
	if prefix := "k8s:enc:kms:v2:" + pki.KMSProviderName + ":"; !strings.HasPrefix(stored, prefix) || strings.Contains(stored, value) {
		t.Errorf("%s: etcd holds %.40q…, want it under %s", when, stored, prefix)
	}
	if files, err := testenv.FilesContaining(filepath.Join(h.Dir, "upper"), []byte(value)); err != nil || len(files) > 0 {
		t.Errorf("%s: the Secret's value in clear in %v (%v)", when, files, err)
	}
	got, err := cs.CoreV1().Secrets("default").Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil || string(got.Data["value"]) != value {
		t.Errorf("%s: the Secret reads back %v", when, err)
	}
}

// renewToken runs spec again with a new token of the plugin's ServiceAccount (which spec keeps)
// and checks that control-plane host h has it, mode 0600, and that the plugin logged in with
// it, unrestarted.
func (b *kmsBed) renewToken(t *testing.T, bu *cluster.BringUp, spec *cluster.Spec, h *testenv.Host) {
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
	testenv.WaitFor(t, time.Minute, "the plugin logged in again with the new token", func() (bool, string) {
		n := logins()
		return n > loginsBefore, fmt.Sprintf("%d log-ins, %d before the new token", n, loginsBefore)
	})
	if after := pid(); after != before {
		t.Errorf("the plugin was restarted for its new token: PID %s → %s", before, after)
	}
}
