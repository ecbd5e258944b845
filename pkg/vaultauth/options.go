package vaultauth

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// The methods of Options.Method.
const (
	// MethodKubernetes logs in with Vault's Kubernetes auth method.
	MethodKubernetes = "kubernetes"
	// MethodToken uses a static token: for dev servers and tests only.
	MethodToken = "token"
)

// DefaultServiceAccountTokenFile is where Kubernetes projects a pod's ServiceAccount token.
const DefaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// Options say how a component reaches and authenticates to Vault. The component binds Addr
// and Timeout to flags of its own (their help differs); AddFlags binds the rest.
type Options struct {
	// Addr is the Vault server's URL. TLS settings come from Vault's usual environment
	// (VAULT_CACERT and the like).
	Addr string
	// Timeout bounds every call to Vault: logins, renewals and the component's own calls.
	Timeout time.Duration
	// Method is MethodKubernetes or MethodToken.
	Method string
	// TokenFile holds the static token of MethodToken; empty: $VAULT_TOKEN.
	TokenFile string
	// Role is the Vault role of MethodKubernetes, bound to the component's ServiceAccount.
	Role string
	// Mount is where Vault's Kubernetes auth method is enabled ("kubernetes": auth/kubernetes).
	Mount string
	// ServiceAccountTokenFile holds the ServiceAccount token MethodKubernetes logs in with; it is
	// read again at every login, and a change of it makes the component log in again.
	ServiceAccountTokenFile string
	// CheckInterval is how often the ServiceAccount token file is checked for a change.
	CheckInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed logins (doubling from the first).
	MinBackoff, MaxBackoff time.Duration
}

// DefaultOptions returns the production defaults: the Kubernetes auth method at
// auth/kubernetes with the projected ServiceAccount token; Addr and Role are to be set.
func DefaultOptions() Options {
	return Options{
		Timeout:                 10 * time.Second,
		Method:                  MethodKubernetes,
		Mount:                   "kubernetes",
		ServiceAccountTokenFile: DefaultServiceAccountTokenFile,
		CheckInterval:           10 * time.Second,
		MinBackoff:              time.Second,
		MaxBackoff:              time.Minute,
	}
}

// AddFlags binds the method's options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Method, "vault-auth", o.Method, "How to log in to Vault: \"kubernetes\" (Vault's Kubernetes auth method with this component's ServiceAccount token; needs --vault-role) or \"token\" (a static token from --vault-token-file or $VAULT_TOKEN, for dev servers and tests only).")
	fs.StringVar(&o.TokenFile, "vault-token-file", o.TokenFile, "With --vault-auth=token: file holding the Vault token (default: $VAULT_TOKEN). Never pass a token as an argument.")
	fs.StringVar(&o.Role, "vault-role", o.Role, "With --vault-auth=kubernetes: the Vault role bound to this component's ServiceAccount (see docs/security.md).")
	fs.StringVar(&o.Mount, "vault-k8s-mount", o.Mount, "With --vault-auth=kubernetes: path where Vault's Kubernetes auth method is enabled (auth/<mount>).")
	fs.StringVar(&o.ServiceAccountTokenFile, "vault-sa-token-file", o.ServiceAccountTokenFile, "With --vault-auth=kubernetes: file holding the ServiceAccount token to log in with (re-read at every login; a change makes the component log in again).")
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	switch {
	case o.Addr == "":
		return errors.New("no Vault server: set --vault-addr or VAULT_ADDR")
	case o.Timeout <= 0:
		return fmt.Errorf("--vault-timeout must be positive, got %s", o.Timeout)
	case o.CheckInterval <= 0 || o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff:
		return fmt.Errorf("vault auth: check interval %s and backoff %s..%s must be positive and ordered", o.CheckInterval, o.MinBackoff, o.MaxBackoff)
	}
	switch o.Method {
	case MethodKubernetes:
		switch {
		case o.Role == "":
			return errors.New("--vault-role is required with --vault-auth=kubernetes: name the Vault role bound to this component's ServiceAccount (or use --vault-auth=token with a dev server)")
		case o.Mount == "":
			return errors.New("--vault-k8s-mount must not be empty with --vault-auth=kubernetes")
		case o.ServiceAccountTokenFile == "":
			return errors.New("--vault-sa-token-file must not be empty with --vault-auth=kubernetes")
		}
	case MethodToken:
		if o.Role != "" {
			return errors.New("--vault-role is for --vault-auth=kubernetes; with --vault-auth=token the token comes from --vault-token-file or $VAULT_TOKEN")
		}
	default:
		return fmt.Errorf("--vault-auth must be %q or %q, got %q", MethodKubernetes, MethodToken, o.Method)
	}
	return nil
}
