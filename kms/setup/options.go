package setup

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/edgefleet/edgefleet/pkg/vaultauth"
)

// Options are edgefleet-kms's settings.
type Options struct {
	// Socket is the Unix socket of the KMS v2 API; the API server's EncryptionConfiguration
	// names it ("unix://<socket>").
	Socket string
	// Vault is the Vault server and how the plugin logs in to it; Vault.Timeout bounds each
	// Vault call.
	Vault vaultauth.Options
	// TransitMount is the mount of Vault's transit engine, TransitKey the key there.
	TransitMount, TransitKey string
	// HealthAddr serves /healthz; "0" disables it.
	HealthAddr string
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	vault := vaultauth.DefaultOptions()
	vault.Addr = os.Getenv("VAULT_ADDR")
	vault.Timeout = 4 * time.Second
	return Options{
		Socket:       "/run/edgefleet-kms/kms.sock",
		Vault:        vault,
		TransitMount: "transit",
		TransitKey:   "edgefleet-kms",
		HealthAddr:   "127.0.0.1:8090",
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Socket, "socket", o.Socket, "Unix socket of the KMS v2 API, for its owner only (mode 0600, in a directory created 0700).")
	fs.StringVar(&o.Vault.Addr, "vault-addr", o.Vault.Addr, "Vault server (default $VAULT_ADDR). The plugin's token needs the policy of docs/security.md only.")
	fs.DurationVar(&o.Vault.Timeout, "vault-timeout", o.Vault.Timeout, "Bound of each Vault call; keep it below the timeout of the kms provider in the API server's EncryptionConfiguration.")
	o.Vault.AddFlags(fs)
	fs.StringVar(&o.TransitMount, "transit-mount", o.TransitMount, "Mount of Vault's transit engine.")
	fs.StringVar(&o.TransitKey, "transit-key", o.TransitKey, "Transit key wrapping the API server's data encryption keys.")
	fs.StringVar(&o.HealthAddr, "health-addr", o.HealthAddr, "Address of the /healthz endpoint (\"0\" disables it).")
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	switch {
	case o.Socket == "":
		return errors.New("--socket must not be empty")
	case !filepath.IsAbs(o.Socket):
		return errors.New("--socket must be an absolute path")
	case o.TransitMount == "":
		return errors.New("--transit-mount must not be empty")
	case o.TransitKey == "":
		return errors.New("--transit-key must not be empty")
	case o.HealthAddr == "":
		return errors.New("--health-addr must not be empty (\"0\" disables it)")
	}
	return o.Vault.Validate()
}
