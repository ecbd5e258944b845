package testenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// LocalController is a site's bin/local-controller run by a Fleet.
type LocalController struct {
	// CacheURL serves the site cache; MetricsURL the controller's metrics.
	CacheURL, MetricsURL string
	// CacheDir is the site cache's directory; it outlives a restart of the controller.
	CacheDir string
	// Log is the controller's log file.
	Log string
}

// LocalController returns where the site's local controller runs, as StartLocalController
// would start it.
func (f *Fleet) LocalController(site string) LocalController {
	return LocalController{
		CacheDir: filepath.Join(f.Dir, site+"-cache"),
		Log:      filepath.Join(f.Dir, site+"-local-controller.log"),
	}
}

// StartLocalController starts bin/local-controller for a site, with the site control plane's
// admin kubeconfig, and waits until it is ready. Nodes are simulated (--node-bootstrap=simulated)
// unless args say otherwise.
func (f *Fleet) StartLocalController(ctx context.Context, site string, args ...string) (LocalController, error) {
	cp, ok := f.Sites[site]
	if !ok {
		return LocalController{}, fmt.Errorf("no site control plane %q", site)
	}
	if err := f.StopLocalController(site); err != nil {
		return LocalController{}, err
	}
	lc := f.LocalController(site)
	for _, ns := range []string{sitev1.InfoNamespace, sitev1.HostsNamespace} {
		if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return lc, fmt.Errorf("create namespace %s on %s: %w", ns, site, err)
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return lc, err
	}
	lc.MetricsURL = "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	health := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	lc.CacheURL = "http://127.0.0.1:" + strconv.Itoa(ports[2])
	p, err := startProcess(site+" local controller", filepath.Join(f.root, "bin", "local-controller"), append([]string{
		"--kubeconfig", f.SiteKubeconfig(site),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
		"--cache-bind-address", "127.0.0.1:" + strconv.Itoa(ports[2]),
		"--cache-dir", lc.CacheDir,
		"--node-bootstrap", "simulated",
	}, args...), nil, lc.Log)
	if err != nil {
		return lc, err
	}
	f.locals[site] = p
	if err := p.waitReady(ctx, health+"/readyz"); err != nil {
		return lc, errors.Join(err, f.StopLocalController(site))
	}
	return lc, nil
}

// StopLocalController stops a site's local controller (SIGTERM, then SIGKILL after 10s).
func (f *Fleet) StopLocalController(site string) error {
	defer delete(f.locals, site)
	return f.locals[site].stop()
}

// KillLocalController kills a site's local controller with SIGKILL, as a crash would.
func (f *Fleet) KillLocalController(site string) error {
	defer delete(f.locals, site)
	return f.locals[site].kill()
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
