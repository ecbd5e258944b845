package setup

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"time"
)

// Options are edgefleet-kms's settings.
type Options struct {
	// Socket is the Unix socket of the KMS v2 API; the API server's EncryptionConfiguration
	// names it ("unix://<socket>").
	Socket string
	// VaultAddr is the Vault server (TLS settings come from Vault's usual environment,
	// VAULT_CACERT and the like).
	VaultAddr string
	// VaultTokenFile holds the Vault token; empty: $VAULT_TOKEN.
	VaultTokenFile string
	// VaultTimeout bounds each Vault call.
	VaultTimeout time.Duration
	// TransitMount is the mount of Vault's transit engine, TransitKey the key there.
	TransitMount, TransitKey string
	// HealthAddr serves /healthz; "0" disables it.
	HealthAddr string
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		Socket:       "/run/edgefleet-kms/kms.sock",
		VaultAddr:    os.Getenv("VAULT_ADDR"),
		VaultTimeout: 4 * time.Second,
		TransitMount: "transit",
		TransitKey:   "edgefleet-kms",
		HealthAddr:   "127.0.0.1:8090",
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Socket, "socket", o.Socket, "Unix socket of the KMS v2 API, for its owner only (mode 0600, in a directory created 0700).")
	fs.StringVar(&o.VaultAddr, "vault-addr", o.VaultAddr, "Vault server (default $VAULT_ADDR).")
	fs.StringVar(&o.VaultTokenFile, "vault-token-file", o.VaultTokenFile, "File holding the Vault token (default: $VAULT_TOKEN). The token needs the policy of docs/security.md only.")
	fs.DurationVar(&o.VaultTimeout, "vault-timeout", o.VaultTimeout, "Bound of each Vault call; keep it below the timeout of the kms provider in the API server's EncryptionConfiguration.")
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
	case o.VaultAddr == "":
		return errors.New("no Vault server: set --vault-addr or VAULT_ADDR")
	case o.VaultTimeout <= 0:
		return errors.New("--vault-timeout must be positive")
	case o.TransitMount == "":
		return errors.New("--transit-mount must not be empty")
	case o.TransitKey == "":
		return errors.New("--transit-key must not be empty")
	case o.HealthAddr == "":
		return errors.New("--health-addr must not be empty (\"0\" disables it)")
	}
	return nil
}
