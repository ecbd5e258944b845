package testfleet

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/edgefleet/edgefleet/pkg/vaultref"
	"github.com/edgefleet/edgefleet/test/testvault"
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
	v, err := testvault.StartVaultIn(ctx, filepath.Join(f.Dir, "vault"))
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

// VaultEntries is the store of what Sites and Hosts reference in the Fleet's Vault, with its
// root token: tests write and read entries there as an operator would with `vault kv put|get`.
func (f *Fleet) VaultEntries() (vaultref.Store, error) {
	if f.Vault == nil {
		return nil, errors.New("testenv: the Fleet has no Vault (FleetOptions.Vault)")
	}
	return vaultref.New(f.Vault.Client, FleetVaultMount, FleetVaultPrefix), nil
}

// putVaultOnce writes the entry unless it exists: a manifest applied again keeps what it stored
// the first time, as Secrets are kept.
func (f *Fleet) putVaultOnce(ctx context.Context, ns, p string, data map[string]string) error {
	entries, err := f.VaultEntries()
	if err != nil {
		return err
	}
	if _, err := entries.Read(ctx, ns, p); !errors.Is(err, vaultref.ErrNotFound) {
		return err
	}
	_, err = entries.Write(ctx, ns, p, data)
	return err
}
