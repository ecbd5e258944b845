package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// Where a Fleet's global controller keeps what Sites and Hosts reference in Vault
// (FleetOptions.Vault), and the Vault role it logs in with.
const (
	FleetVaultMount  = "secret"
	FleetVaultPrefix = "edgefleet/global"
	fleetVaultRole   = "global-controller"
	// fleetControllerServiceAccount is the global controller's ServiceAccount, as deployed.
	fleetControllerServiceAccount = "edgefleet-global-controller"
)

// startVault starts the Fleet's Vault dev server and sets it up as docs/security.md tells an
// operator to: the Kubernetes auth method reviewing the global cluster's tokens, and a role bound
// to the global controller's ServiceAccount with vaultref.Policy alone. The controller logs in
// with a token of that ServiceAccount (1 hour) in a file of Dir.
func (f *Fleet) startVault(ctx context.Context) error {
	v, err := StartVaultIn(ctx, filepath.Join(f.Dir, "vault"))
	if err != nil {
		return err
	}
	f.Vault = v
	f.stops = append(f.stops, v.Stop)
	if err := v.KubernetesAuth(ctx, f.Global, "edgefleet-system"); err != nil {
		return err
	}
	if err := v.KubernetesRole(ctx, fleetVaultRole, "edgefleet-system", fleetControllerServiceAccount, "edgefleet-global",
		vaultref.Policy(FleetVaultMount, FleetVaultPrefix), 20*time.Minute, time.Hour); err != nil {
		return err
	}
	f.vaultTokenFile, err = f.Global.ServiceAccountTokenFile(ctx, "edgefleet-system", fleetControllerServiceAccount, f.Dir)
	return err
}

// vaultArgs are the global controller's flags for the Fleet's Vault; none without one.
func (f *Fleet) vaultArgs() []string {
	if f.Vault == nil {
		return nil
	}
	return []string{"--vault-addr", f.Vault.Addr, "--vault-role", fleetVaultRole, "--vault-sa-token-file", f.vaultTokenFile,
		"--vault-mount", FleetVaultMount, "--vault-prefix", FleetVaultPrefix}
}

// PutVault writes the entry a reference of namespace ns with this path names, as an operator
// would with `vault kv put`, with the Fleet's root token.
func (f *Fleet) PutVault(ctx context.Context, ns, p string, data map[string]string) error {
	if f.Vault == nil {
		return errors.New("testenv: the Fleet has no Vault (FleetOptions.Vault)")
	}
	entry := make(map[string]any, len(data))
	for k, v := range data {
		entry[k] = v
	}
	if _, err := f.Vault.Client.KVv2(FleetVaultMount).Put(ctx, path.Join(FleetVaultPrefix, ns, p), entry); err != nil {
		return fmt.Errorf("testenv: vault kv put %s/%s: %w", ns, p, err)
	}
	return nil
}

// ReadVault reads such an entry with the root token.
func (f *Fleet) ReadVault(ctx context.Context, ns, p string) (map[string]any, error) {
	if f.Vault == nil {
		return nil, errors.New("testenv: the Fleet has no Vault (FleetOptions.Vault)")
	}
	s, err := f.Vault.Client.KVv2(FleetVaultMount).Get(ctx, path.Join(FleetVaultPrefix, ns, p))
	if err != nil {
		return nil, err
	}
	return s.Data, nil
}

// putVaultOnce is PutVault unless the entry exists: a manifest applied again keeps what it
// stored the first time, as Secrets are kept.
func (f *Fleet) putVaultOnce(ctx context.Context, ns, p string, data map[string]string) error {
	_, err := f.ReadVault(ctx, ns, p)
	if err == nil {
		return nil
	}
	if !errors.Is(err, vaultapi.ErrSecretNotFound) {
		return err
	}
	return f.PutVault(ctx, ns, p, data)
}

// NewBMCPassword makes a BMC password at random and records it for the sweep.
func (f *Fleet) NewBMCPassword(host string) (string, error) {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return "", err
	}
	s := hex.EncodeToString(pw)
	f.record("the BMC password of host "+host, []byte(s))
	return s, nil
}
