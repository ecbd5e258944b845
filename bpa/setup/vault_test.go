package setup

import (
	"errors"
	"net/http"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestSecretStoreWithKubernetesAuth makes the BPA's secret store with Vault's Kubernetes auth
// method against a real API server and a real Vault dev server: the BPA of site-a keeps its
// SSH key under its prefix and may not touch site-b's.
func TestSecretStoreWithKubernetesAuth(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "bpa"})
	v := testvault.StartVault(t)
	ctx := t.Context()
	ns := cp.Namespace(t)
	if err := v.KubernetesAuth(ctx, cp, ns); err != nil {
		t.Fatal(err)
	}
	if err := v.KubernetesRole(ctx, "bpa-site-a", ns, "bpa", "edgefleet-bpa-site-a", secrets.VaultPolicy("secret", "edgefleet/site-a"), time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	saFile, err := cp.ServiceAccountTokenFile(ctx, ns, "bpa", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.VaultPrefix = "edgefleet/site-a"
	opts.Vault.Addr, opts.Vault.Role, opts.Vault.ServiceAccountTokenFile = v.Addr, "bpa-site-a", saFile
	store, _, err := secretStore(ctx, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	made, err := ensureSSHKey(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ensureSSHKey(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if string(ssh.MarshalAuthorizedKey(made.PublicKey())) != string(ssh.MarshalAuthorizedKey(again.PublicKey())) {
		t.Error("the SSH key read back is not the one made")
	}
	if _, err := v.Client.KVv2("secret").Get(ctx, "edgefleet/site-a/"+SSHKeySecret); err != nil {
		t.Errorf("the SSH key is not under site-a's prefix: %v", err)
	}

	opts.VaultPrefix = "edgefleet/site-b"
	other, _, err := secretStore(ctx, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var re *vaultapi.ResponseError
	if _, err := ensureSSHKey(ctx, other); !errors.As(err, &re) || re.StatusCode != http.StatusForbidden {
		t.Errorf("site-a's BPA making a key under site-b's prefix: %v, want 403", err)
	}
}
