package testfleet

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/test/internal/proc"
)

// LocalController is a site's bin/local-controller run by a Fleet.
type LocalController struct {
	// CacheURL serves the site cache (HTTPS); MetricsURL the controller's metrics.
	CacheURL, MetricsURL string
	// CacheDir is the site cache's directory; it outlives a restart of the controller.
	CacheDir string
	// CacheCAFile holds the CA of the site cache's serving certificate, which CacheCertFile
	// and CacheKeyFile hold (RenewSiteCacheCertificate replaces them).
	CacheCAFile, CacheCertFile, CacheKeyFile string
	// Log is the controller's log file.
	Log string
}

// LocalController returns where the site's local controller runs, as StartLocalController
// would start it; the URLs once it has been started (its ports are kept across restarts).
func (f *Fleet) LocalController(site string) LocalController {
	pki := filepath.Join(f.Dir, site+"-cache-pki")
	lc := LocalController{
		CacheDir:      filepath.Join(f.Dir, site+"-cache"),
		CacheCAFile:   filepath.Join(pki, "ca.crt"),
		CacheCertFile: filepath.Join(pki, "tls.crt"),
		CacheKeyFile:  filepath.Join(pki, "tls.key"),
		Log:           filepath.Join(f.Dir, site+"-local-controller.log"),
	}
	if ports := f.localPorts[site]; ports != nil {
		lc.MetricsURL = "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
		lc.CacheURL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	}
	return lc
}

// SiteCacheClient is an HTTP client of the site's cache as the site's admin: the admin
// kubeconfig's client certificate, the cache's CA.
func (f *Fleet) SiteCacheClient(site string) (*http.Client, error) {
	cp, ok := f.Sites[site]
	if !ok {
		return nil, fmt.Errorf("no site control plane %q", site)
	}
	return restconfig.HTTPClient(cp.Config, f.LocalController(site).CacheCAFile, time.Minute)
}

// RenewSiteCacheCertificate issues the site cache a new serving certificate (and key) from its
// CA, made on first use, replacing the files in place as a renewal does; the running cache
// serves it once it notices. It returns the new certificate's serial number.
func (f *Fleet) RenewSiteCacheCertificate(site string) (*big.Int, error) {
	lc := f.LocalController(site)
	if err := os.MkdirAll(filepath.Dir(lc.CacheCAFile), 0o700); err != nil {
		return nil, err
	}
	caKeyFile := strings.TrimSuffix(lc.CacheCAFile, ".crt") + ".key"
	var ca certs.KeyPair
	crtPEM, crtErr := os.ReadFile(lc.CacheCAFile)
	keyPEM, keyErr := os.ReadFile(caKeyFile)
	if crtErr == nil && keyErr == nil {
		cert, err := certs.DecodeCert(crtPEM)
		if err != nil {
			return nil, err
		}
		key, err := certs.DecodeKey(keyPEM)
		if err != nil {
			return nil, err
		}
		ca = certs.KeyPair{Cert: cert, Key: key}
	} else {
		var err error
		if ca, err = certs.NewCA(site+" site cache CA", time.Now()); err != nil {
			return nil, err
		}
		if err := writeKeyPair(lc.CacheCAFile, caKeyFile, ca); err != nil {
			return nil, err
		}
	}
	leaf, err := certs.Issue(certs.Leaf{CommonName: site + " site cache", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, time.Now())
	if err != nil {
		return nil, err
	}
	if err := writeKeyPair(lc.CacheCertFile, lc.CacheKeyFile, leaf); err != nil {
		return nil, err
	}
	return leaf.Cert.SerialNumber, nil
}

// ensureSiteCacheCertificate makes the site cache's CA and certificate unless they exist:
// before the local controller serves with them or the BPA trusts the CA, whichever starts first.
func (f *Fleet) ensureSiteCacheCertificate(site string) error {
	if _, err := os.Stat(f.LocalController(site).CacheCertFile); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, err := f.RenewSiteCacheCertificate(site); err != nil {
		return fmt.Errorf("site cache certificate of %s: %w", site, err)
	}
	return nil
}

// writeKeyPair writes p's key, then its certificate, each through a file renamed into place.
func writeKeyPair(crtFile, keyFile string, p certs.KeyPair) error {
	keyPEM, err := certs.EncodeKey(p.Key)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		path string
		b    []byte
	}{{keyFile, keyPEM}, {crtFile, certs.EncodeCert(p.Cert)}} {
		if err := os.WriteFile(w.path+".new", w.b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(w.path+".new", w.path); err != nil {
			return err
		}
	}
	return nil
}

// StartLocalController starts bin/local-controller for a site, with the site control plane's
// admin kubeconfig, and waits until it is ready: the site's BPA makes its hosts nodes. The site
// cache serves HTTPS with a certificate of its own CA (made on first start, kept across
// restarts) and takes client certificates of the site API server's client CA. A restart keeps
// the ports: the site cache's URL, which Metal3's image URLs and the BPA's package URLs name,
// stays the same (a provisioned host whose image URL changed would be provisioned again).
func (f *Fleet) StartLocalController(ctx context.Context, site string, args ...string) (LocalController, error) {
	return f.startLocalController(ctx, site, "local-controller", args)
}

// StartSimulatedLocalController is StartLocalController of bin/local-controller-simulated
// (`make test-bins`): machines' nodes are registered by sitesim.NodeSimulator, no host touched.
func (f *Fleet) StartSimulatedLocalController(ctx context.Context, site string, args ...string) (LocalController, error) {
	return f.startLocalController(ctx, site, "local-controller-simulated", args)
}

func (f *Fleet) startLocalController(ctx context.Context, site, binary string, args []string) (LocalController, error) {
	cp, ok := f.Sites[site]
	if !ok {
		return LocalController{}, fmt.Errorf("no site control plane %q", site)
	}
	if err := f.StopLocalController(site); err != nil {
		return LocalController{}, err
	}
	for _, ns := range []string{sitev1.InfoNamespace, sitev1.HostsNamespace} {
		if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return LocalController{}, fmt.Errorf("create namespace %s on %s: %w", ns, site, err)
		}
	}
	ports := f.localPorts[site]
	if ports == nil {
		var err error
		if ports, err = proc.FreePorts(3); err != nil {
			return LocalController{}, err
		}
		f.localPorts[site] = ports
	}
	lc := f.LocalController(site)
	health := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := f.ensureSiteCacheCertificate(site); err != nil {
		return lc, err
	}
	p, err := proc.Start(site+" local controller", filepath.Join(f.root, "bin", binary), append(append(leaderElection(),
		"--kubeconfig", f.SiteKubeconfig(site),
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--cache-bind-address", "127.0.0.1:"+strconv.Itoa(ports[2]),
		"--cache-dir", lc.CacheDir,
		"--cache-tls-cert-file", lc.CacheCertFile,
		"--cache-tls-key-file", lc.CacheKeyFile,
		"--cache-client-ca-file", cp.ClientCAFile()),
		args...), nil, lc.Log)
	if err != nil {
		return lc, err
	}
	f.locals[site] = p
	if err := p.WaitReady(ctx, health+"/readyz"); err != nil {
		return lc, errors.Join(err, f.StopLocalController(site))
	}
	return lc, nil
}

// StopLocalController stops a site's local controller (SIGTERM, then SIGKILL after 10s).
func (f *Fleet) StopLocalController(site string) error {
	defer delete(f.locals, site)
	return f.locals[site].Stop()
}

// KillLocalController kills a site's local controller with SIGKILL, as a crash would.
func (f *Fleet) KillLocalController(site string) error {
	defer delete(f.locals, site)
	return f.locals[site].Kill()
}

// ConnectSite gives a site its own credentials for the global artifact API: a ServiceAccount
// site-<name> in edgefleet-system on the global cluster, bound to ClusterRole edgefleet-site,
// whose token goes with apiURL into the site's Secret sitev1.GlobalAPISecretName.
func (f *Fleet) ConnectSite(ctx context.Context, site, apiURL string) error {
	cp, ok := f.Sites[site]
	if !ok {
		return fmt.Errorf("no site control plane %q", site)
	}
	const ns = "edgefleet-system"
	sa := "site-" + site
	c := f.Global.Client
	if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})); err != nil {
		return fmt.Errorf("create ServiceAccount %s/%s: %w", ns, sa, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-site"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, binding)); err != nil {
		return fmt.Errorf("bind %s: %w", sa, err)
	}
	cs, err := kubernetes.NewForConfig(f.Global.Config)
	if err != nil {
		return err
	}
	ttl := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of %s: %w", sa, err)
	}
	if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sitev1.HostsNamespace}})); err != nil {
		return fmt.Errorf("create namespace %s on %s: %w", sitev1.HostsNamespace, site, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.HostsNamespace, Name: sitev1.GlobalAPISecretName}}
	secret.Data = map[string][]byte{sitev1.GlobalAPIURLKey: []byte(apiURL), sitev1.GlobalAPITokenKey: []byte(tr.Status.Token)}
	if err := cp.Client.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret %s/%s on %s: %w", secret.Namespace, secret.Name, site, err)
	}
	return nil
}
