package setup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/edgefleet/edgefleet/pkg/enroll"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
)

// EnrollOptions are the settings of `local-controller enroll`, run at a bootstrap machine's
// first boot.
type EnrollOptions struct {
	// Kubeconfig is the site cluster's admin kubeconfig (it never leaves the machine).
	Kubeconfig string
	// GlobalURL, CAFile, TokenFile: where the global controller is, the CA its certificate must
	// chain to (only it is trusted), and the enrollment token (a file only its owner may read).
	GlobalURL, CAFile, TokenFile string
	// Site is namespace/name of the Site on the global cluster; Machine this machine's name.
	Site, Machine string
	// SiteServer is the URL the global controller reaches this site's API server at.
	SiteServer string
	// AccessManifest is the path of deploy/rbac/site/global-access.yaml.
	AccessManifest string
	// CredentialTTL is the lifetime of the credential handed to the global controller.
	CredentialTTL time.Duration
	// Deadline bounds the whole enrollment, retries included.
	Deadline time.Duration
}

// DefaultEnrollOptions returns the defaults of `local-controller enroll`.
func DefaultEnrollOptions() EnrollOptions {
	host, _ := os.Hostname()
	return EnrollOptions{
		Machine:        host,
		AccessManifest: "/usr/share/edgefleet/site-access.yaml",
		CredentialTTL:  365 * 24 * time.Hour,
		Deadline:       time.Hour,
	}
}

// AddFlags binds the options to flags.
func (o *EnrollOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Admin kubeconfig of the site's cluster (empty: in-cluster config).")
	fs.StringVar(&o.GlobalURL, "global-url", o.GlobalURL, "https:// URL of the global controller's API.")
	fs.StringVar(&o.CAFile, "global-ca-file", o.CAFile, "PEM CA the global controller's certificate must chain to; nothing else is trusted.")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "File with the enrollment token, readable by its owner only (never pass a token as an argument).")
	fs.StringVar(&o.Site, "site", o.Site, "namespace/name of the Site on the global cluster.")
	fs.StringVar(&o.Machine, "machine", o.Machine, "Name of this machine in events (default: the host name).")
	fs.StringVar(&o.SiteServer, "site-server", o.SiteServer, "URL at which the global controller reaches this site's API server (default: the kubeconfig's).")
	fs.StringVar(&o.AccessManifest, "site-access-manifest", o.AccessManifest, "deploy/rbac/site/global-access.yaml, applied as shipped.")
	fs.DurationVar(&o.CredentialTTL, "credential-ttl", o.CredentialTTL, "Lifetime of the ServiceAccount token handed to the global controller.")
	fs.DurationVar(&o.Deadline, "deadline", o.Deadline, "Give up when not enrolled after this long (retries included).")
}

// RunEnroll enrolls the site, unless it did already.
func RunEnroll(ctx context.Context, o EnrollOptions) error {
	ns, name, ok := strings.Cut(o.Site, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--site must be namespace/name, got %q", o.Site)
	}
	if o.GlobalURL == "" || o.CAFile == "" || o.TokenFile == "" {
		return errors.New("--global-url, --global-ca-file and --token-file are required")
	}
	token, err := readToken(o.TokenFile)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.CAFile)
	if err != nil {
		return fmt.Errorf("--global-ca-file: %w", err)
	}
	manifest, err := os.ReadFile(o.AccessManifest)
	if err != nil {
		return fmt.Errorf("--site-access-manifest: %w", err)
	}
	cfg, err := restconfig.Load(o.Kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	log := ctrl.Log.WithName("enroll")
	got, err := enroll.Enroll(ctx, cfg, enroll.Options{
		GlobalURL: o.GlobalURL, CA: ca, Token: token, Namespace: ns, Site: name, Machine: o.Machine,
		SiteServer: o.SiteServer, AccessManifest: manifest, CredentialTTL: o.CredentialTTL,
		RequestTimeout: 30 * time.Second, RetryDelay: 2 * time.Second, MaxRetryDelay: time.Minute, Log: log,
	})
	if err != nil {
		return err
	}
	log.Info("Enrolled", "site", got.Namespace+"/"+got.Site, "secret", got.Secret, "vaultEntry", got.VaultEntry, "cluster", got.Fingerprint)
	return nil
}

// readToken reads the token file, refusing one that others than its owner may read.
func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s has mode %v: make it readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return token, nil
}
