package testfleet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// FleetOptions configure a Fleet.
type FleetOptions struct {
	// Sites names the site control planes to start; each gets the site, Cluster-API and Metal3
	// CRDs, as a site's local cluster has.
	Sites []string
	// Dir receives the kubeconfigs and logs; a temporary directory when empty.
	Dir string
	// ControllerArgs are extra flags of the global controller.
	ControllerArgs []string
	// SiteTokens has the global controller give every registered Site its own token for the
	// artifact API (--site-api-url set to APIURL). Without it, a Site gets one only when it sets
	// spec.artifactAPIURL, or by hand (ConnectSite).
	SiteTokens bool
	// TLS has the artifact API (and the web UI on its server) serve HTTPS with a certificate
	// made for 127.0.0.1 (APICAFile); APIURL is then https://.
	TLS bool
	// APIHost is the IP address the artifact API (and enrollment) listens on and its
	// certificate is made for: test hosts reach the controller at their network's gateway
	// (test/testhosts' HostNet.Gateway). 127.0.0.1 when empty.
	APIHost string
	// NoWebhooks leaves the admission webhooks out (see Fleet): for a test of what the
	// controllers and the CLI do with objects the API server stored without them, as one
	// admitted before they were registered.
	NoWebhooks bool
	// Vault starts a Vault dev server (Fleet.Vault) for the global controller, which logs in
	// with Vault's Kubernetes auth method as its ServiceAccount and reads, under
	// FleetVaultPrefix, the kubeconfigs and BMC credentials that Sites and Hosts reference
	// there; Apply writes them there for such references.
	Vault bool
}

// Fleet is a global control plane with the edgefleet CRDs, site control planes, and the
// global controller binary (bin/global-controller) running against them: the bed of the demo
// and of the end-to-end suites. Every control plane of a Fleet keeps Secrets encrypted in etcd
// (secretbox, a key of its own in its configuration file), as edgefleet's clusters do; the
// secrets the Fleet makes for edgefleet to handle are recorded for a sweep (SweepSecrets). As
// in every install, the global controller's admission webhooks are registered on the global
// cluster (unless FleetOptions.NoWebhooks) (deploy/webhook/global-controller, failurePolicy Fail) and served by the controller
// (--webhook-port): a Release naming an artifact the store lacks, a maintenance window that
// never opens or a Site moved against the version-skew policy is refused as a user would see
// it, and such writes fail while the controller is stopped.
type Fleet struct {
	// Global is the global cluster.
	Global *controlplane.ControlPlane
	// Sites are the site control planes, by name.
	Sites map[string]*controlplane.ControlPlane
	// Dir holds global.kubeconfig (admin) and global-controller.log.
	Dir string
	// MetricsURL, HealthURL and APIURL are the global controller's endpoints.
	MetricsURL, HealthURL, APIURL string
	// APICertFile and APIKeyFile are the artifact API's serving certificate and key with
	// FleetOptions.TLS; APICAFile is what clients verify it with (the certificate and the CA
	// that signed it).
	APICertFile, APIKeyFile, APICAFile string

	// Vault is the global controller's Vault with FleetOptions.Vault; nil without.
	Vault *testvault.Vault

	root   string
	ownDir bool
	// made are the secrets the Fleet made for edgefleet to handle, by what they are
	// (SweepSecrets).
	made       map[string][]byte
	madeMu     sync.Mutex
	siteTokens bool
	webhooks   bool   // not FleetOptions.NoWebhooks
	apiHost    string // FleetOptions.APIHost
	// vaultTokenFile holds the ServiceAccount token the controller logs in to Vault with.
	vaultTokenFile string
	controller     *proc.Process
	locals         map[string]*proc.Process
	// localPorts are each site's local controller's ports (metrics, health, site cache), kept
	// across restarts.
	localPorts map[string][]int
	bpas       map[string]*proc.Process
	// stops stop what StartSiteMetal3 started, before the control planes.
	stops []func() error
}

// StartFleet starts the control planes and the global controller and waits until the
// controller reports ready. On error everything started is stopped again.
func StartFleet(ctx context.Context, opts FleetOptions) (_ *Fleet, err error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	f := &Fleet{Sites: map[string]*controlplane.ControlPlane{}, Dir: opts.Dir, root: root, locals: map[string]*proc.Process{}, localPorts: map[string][]int{}, made: map[string][]byte{},
		bpas: map[string]*proc.Process{}, siteTokens: opts.SiteTokens, webhooks: !opts.NoWebhooks, apiHost: cmp.Or(opts.APIHost, "127.0.0.1")}
	if net.ParseIP(f.apiHost) == nil {
		return nil, fmt.Errorf("testenv: FleetOptions.APIHost %q is not an IP address", opts.APIHost)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
		}
	}()
	if f.Dir == "" {
		if f.Dir, err = os.MkdirTemp("", "edgefleet-fleet-"); err != nil {
			return nil, err
		}
		f.ownDir = true
	} else if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, err
	}
	if f.Global, err = startEncrypted(controlplane.Options{Name: "global", InstallCRDs: true, GlobalWebhooks: !opts.NoWebhooks}); err != nil {
		return nil, err
	}
	for _, name := range opts.Sites {
		cp, err := startEncrypted(controlplane.Options{Name: name, InstallSiteCRDs: true, ClusterAPICRDs: true, Metal3CRDs: true})
		if err != nil {
			return nil, err
		}
		f.Sites[name] = cp
		kc, err := cp.AdminKubeconfig()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.SiteKubeconfig(name), kc, 0o600); err != nil {
			return nil, err
		}
	}
	kc, err := f.Global.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.Kubeconfig(), kc, 0o600); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-system"}}
	if err := f.Global.Client.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("create namespace edgefleet-system: %w", err)
	}
	if _, err := f.Kubectl(ctx, "apply", "-f", "deploy/rbac/global-controller/roles.yaml"); err != nil {
		return nil, err
	}
	if err := f.writeOperatorKubeconfig(ctx); err != nil {
		return nil, err
	}
	if opts.TLS {
		if err := f.writeAPICertificate(); err != nil {
			return nil, err
		}
	}
	if opts.Vault {
		if err := f.startVault(ctx); err != nil {
			return nil, err
		}
	}
	if err := f.StartController(ctx, opts.ControllerArgs...); err != nil {
		return nil, err
	}
	return f, nil
}

// OperatorKubeconfig is the path of a kubeconfig with the token of ServiceAccount
// edgefleet-system/fleet-admin, bound to ClusterRole edgefleet-fleet-admin: what the edgefleet
// CLI uses (the artifact API authenticates tokens).
func (f *Fleet) OperatorKubeconfig() string { return filepath.Join(f.Dir, "operator.kubeconfig") }

func (f *Fleet) writeOperatorKubeconfig(ctx context.Context) error {
	const name = "fleet-admin"
	token, err := f.Token(ctx, "edgefleet-system", name, "edgefleet-fleet-admin")
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["global"] = &clientcmdapi.Cluster{Server: f.Global.Config.Host, CertificateAuthorityData: f.Global.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["global"] = &clientcmdapi.Context{Cluster: "global", AuthInfo: name}
	kc.CurrentContext = "global"
	return clientcmd.WriteToFile(*kc, f.OperatorKubeconfig())
}

// Token creates ServiceAccount ns/name on the global cluster, binds it fleet-wide to
// clusterRole (edgefleet-fleet-admin, edgefleet-fleet-viewer, …) and returns a token of it,
// valid for a day: a person's credentials for the CLI, the artifact API and the web UI.
func (f *Fleet) Token(ctx context.Context, ns, name, clusterRole string) (string, error) {
	c := f.Global.Client
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		return "", fmt.Errorf("create ServiceAccount %s/%s: %w", ns, name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}
	if err := c.Create(ctx, binding); err != nil {
		return "", fmt.Errorf("bind %s/%s to %s: %w", ns, name, clusterRole, err)
	}
	cs, err := kubernetes.NewForConfig(f.Global.Config)
	if err != nil {
		return "", err
	}
	ttl := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// writeAPICertificate makes the artifact API's serving certificate for its address
// (FleetOptions.APIHost) and 127.0.0.1.
func (f *Fleet) writeAPICertificate() error {
	crt, key, err := certutil.GenerateSelfSignedCertKey(f.apiHost, []net.IP{net.ParseIP(f.apiHost), net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return fmt.Errorf("artifact API certificate: %w", err)
	}
	f.APICertFile, f.APIKeyFile = filepath.Join(f.Dir, "api-tls.crt"), filepath.Join(f.Dir, "api-tls.key")
	f.APICAFile = f.APICertFile
	return errors.Join(os.WriteFile(f.APICertFile, crt, 0o600), os.WriteFile(f.APIKeyFile, key, 0o600))
}

// Edgefleet runs bin/edgefleet with the operator's kubeconfig against the controller's API and
// returns its combined output.
func (f *Fleet) Edgefleet(ctx context.Context, args ...string) ([]byte, error) {
	base := []string{"--kubeconfig", f.OperatorKubeconfig(), "--api-server", f.APIURL, "--quiet"}
	if f.APICAFile != "" {
		base = append(base, "--api-ca-file", f.APICAFile)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(f.root, "bin", "edgefleet"), append(base, args...)...)
	cmd.Dir = f.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("edgefleet %v: %w: %s", args, err, out)
	}
	return out, nil
}

// Upload puts a file into the artifact store the way an operator does (edgefleet artifact
// upload) and returns the stored artifact.
func (f *Fleet) Upload(ctx context.Context, file, kind, name, version string) (restv1.Artifact, error) {
	var a restv1.Artifact
	out, err := f.Edgefleet(ctx, "artifact", "upload", file, "--kind", kind, "--name", name, "--version", version, "-o", "json")
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return a, fmt.Errorf("upload %s: %w: %s", file, err, out)
	}
	return a, nil
}

// SiteKubeconfig is the path of a site cluster's admin kubeconfig.
func (f *Fleet) SiteKubeconfig(site string) string { return filepath.Join(f.Dir, site+".kubeconfig") }

// Kubeconfig is the path of the global cluster's admin kubeconfig.
func (f *Fleet) Kubeconfig() string { return filepath.Join(f.Dir, "global.kubeconfig") }

// ControllerLog is the path of the global controller's log.
func (f *Fleet) ControllerLog() string { return filepath.Join(f.Dir, "global-controller.log") }

// ControllerState says whether the global controller runs (or has exited, with its exit state)
// and the last n lines of its log, for a failed test's report: the log's file goes with the
// fleet's directory.
func (f *Fleet) ControllerState(n int) string {
	if f.controller == nil {
		return "the global controller is stopped"
	}
	state := fmt.Sprintf("the global controller runs (pid %d)", f.controller.Cmd.Process.Pid)
	select {
	case <-f.controller.Exited:
		state = fmt.Sprintf("the global controller (pid %d) has exited: %v", f.controller.Cmd.Process.Pid, f.controller.Cmd.ProcessState)
	default:
	}
	return fmt.Sprintf("%s; the last %d lines of %s:\n%s", state, n, f.ControllerLog(), f.controller.LogTail(n))
}

// leaderElection is the controllers' leader-election timings on the test bed: a lease of 30 s,
// renewed within 25 s. With the defaults (15 s, renewed within 10 s) a leader gives up its lease
// and exits when its API server does not answer for 10 s, which a 2-core machine running the
// lanes of make test side by side does at times: two global controllers, of two suites, lost
// their leases within six seconds of each other at a load of 20 to 38. A controller killed by a
// test is followed by its successor once the lease has run out, 30 s at most.
func leaderElection() []string {
	return []string{"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=25s", "--leader-elect-retry-period=4s"}
}

// StartController starts bin/global-controller and waits until it is ready.
func (f *Fleet) StartController(ctx context.Context, args ...string) error {
	ports, err := proc.FreePorts(3)
	if err != nil {
		return err
	}
	f.MetricsURL = "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	f.HealthURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	api := net.JoinHostPort(f.apiHost, strconv.Itoa(ports[2]))
	f.APIURL = "http://" + api
	if f.APICertFile != "" {
		f.APIURL = "https://" + api
	}
	args = append(append(leaderElection(),
		"--kubeconfig", f.Kubeconfig(),
		"--leader-election-namespace", "edgefleet-system",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--api-bind-address", api,
		"--data-dir", filepath.Join(f.Dir, "data"),
		// The sites' control planes listen on loopback, which enrollment refuses by default.
		"--enrollment-allowed-networks", "127.0.0.0/8,::1/128"),
		args...)
	if f.APICertFile != "" {
		args = append(args, "--api-tls-cert-file", f.APICertFile, "--api-tls-key-file", f.APIKeyFile)
	}
	args = append(args, f.vaultArgs()...)
	if f.webhooks {
		_, port, certDir := f.Global.WebhookServerOptions()
		args = append(args, "--webhook-port", strconv.Itoa(port), "--webhook-cert-dir", certDir)
	}
	if f.siteTokens {
		args = append(args, "--site-api-url", f.APIURL)
		if f.APICAFile != "" {
			args = append(args, "--site-api-ca-file", f.APICAFile)
		}
	}
	p, err := proc.Start("global controller", filepath.Join(f.root, "bin", "global-controller"), args, nil, f.ControllerLog())
	if err != nil {
		return err
	}
	f.controller = p
	if err := p.WaitReady(ctx, f.HealthURL+"/readyz"); err != nil {
		return errors.Join(err, f.StopController())
	}
	return nil
}

// ControllerPID is the process ID of the running global controller (0 when stopped), for
// benchmarks that read its memory and CPU from /proc.
func (f *Fleet) ControllerPID() int {
	if f.controller == nil || f.controller.Cmd.Process == nil {
		return 0
	}
	return f.controller.Cmd.Process.Pid
}

// StopController stops the global controller (SIGTERM, then SIGKILL after 10s).
func (f *Fleet) StopController() error {
	defer func() { f.controller = nil }()
	return f.controller.Stop()
}

// KillController kills the global controller with SIGKILL — no chance to finish anything —
// and waits for it to end.
func (f *Fleet) KillController() error {
	defer func() { f.controller = nil }()
	return f.controller.Kill()
}

// Apply registers the Sites and Hosts of a manifest the way an operator would: for each Site it
// stores the kubeconfig of the site control plane of the same name in the Secret the Site
// references, for each Host it stores generated BMC credentials, then it runs kubectl apply. A
// Secret that exists already is kept: a manifest applied again (a Host registered again after it
// was taken off its site) keeps its credentials. The Sites named in enrolling get no kubeconfig:
// they enroll (Enroll), which stores it. A Site or Host referencing Vault
// (kubeconfigVaultRef, credentialsVaultRef) gets its entry written in the Fleet's Vault instead.
func (f *Fleet) Apply(ctx context.Context, manifest string, enrolling ...string) error {
	path := manifest
	if !filepath.IsAbs(path) {
		path = filepath.Join(f.root, manifest)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("read %s: %w", manifest, err)
		}
		ns := obj.GetNamespace()
		if kind := obj.GetKind(); kind == "Site" || kind == "Host" {
			if err := f.ensureNamespace(ctx, ns); err != nil {
				return err
			}
		}
		switch obj.GetKind() {
		case "Site":
			site, ok := f.Sites[obj.GetName()]
			if !ok {
				return fmt.Errorf("%s: Site %s has no site control plane of that name", manifest, obj.GetName())
			}
			if slices.Contains(enrolling, obj.GetName()) {
				continue
			}
			kc, err := site.SiteKubeconfig(ctx)
			if err != nil {
				return err
			}
			if err := f.recordKubeconfig("the global controller's credential of site "+obj.GetName(), kc); err != nil {
				return err
			}
			if p, ok, _ := unstructured.NestedString(obj.Object, "spec", "kubeconfigVaultRef", "path"); ok {
				if err := f.putVaultOnce(ctx, ns, p, map[string]string{"kubeconfig": string(kc)}); err != nil {
					return err
				}
				continue
			}
			secret, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeconfigSecretRef", "name")
			if err := f.createSecret(ctx, ns, secret, map[string][]byte{"kubeconfig": kc}); err != nil {
				return err
			}
		case "Host":
			pw, err := f.NewBMCPassword(obj.GetName())
			if err != nil {
				return err
			}
			if p, ok, _ := unstructured.NestedString(obj.Object, "spec", "bmc", "credentialsVaultRef", "path"); ok {
				if err := f.putVaultOnce(ctx, ns, p, map[string]string{"username": "admin", "password": pw}); err != nil {
					return err
				}
				continue
			}
			secret, _, _ := unstructured.NestedString(obj.Object, "spec", "bmc", "credentialsSecretRef", "name")
			if err := f.createSecret(ctx, ns, secret, map[string][]byte{"username": []byte("admin"), "password": []byte(pw)}); err != nil {
				return err
			}
		}
	}
	_, err = f.Kubectl(ctx, "apply", "-f", manifest)
	return err
}

// ensureNamespace creates namespace ns on the global cluster unless it exists.
func (f *Fleet) ensureNamespace(ctx context.Context, ns string) error {
	if err := client.IgnoreAlreadyExists(f.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

func (f *Fleet) createSecret(ctx context.Context, ns, name string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := client.IgnoreAlreadyExists(f.Global.Client.Create(ctx, s)); err != nil {
		return fmt.Errorf("create secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// Kubectl runs bin/kubectl against the global cluster and returns its combined output.
func (f *Fleet) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return f.kubectl(ctx, f.Kubeconfig(), "", args...)
}

// KubectlStdin is Kubectl with stdin.
func (f *Fleet) KubectlStdin(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	return f.kubectl(ctx, f.Kubeconfig(), stdin, args...)
}

// SiteKubectl runs bin/kubectl against a site cluster as its admin.
func (f *Fleet) SiteKubectl(ctx context.Context, site string, args ...string) ([]byte, error) {
	return f.kubectl(ctx, f.SiteKubeconfig(site), "", args...)
}

// ApplicationKubectl runs bin/kubectl against a site's application cluster, as its admin: the
// kubeconfig is read from Cluster-API's <site>-kubeconfig Secret on the site cluster and handed
// to kubectl on its standard input (--kubeconfig /dev/stdin), never written to a file.
func (f *Fleet) ApplicationKubectl(ctx context.Context, site string, args ...string) ([]byte, error) {
	cp, ok := f.Sites[site]
	if !ok {
		return nil, fmt.Errorf("no site control plane %q", site)
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site + "-kubeconfig"}
	if err := cp.Client.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("kubeconfig of %s's application cluster: %w", site, err)
	}
	return f.kubectl(ctx, "/dev/stdin", string(secret.Data["value"]), args...)
}

func (f *Fleet) kubectl(ctx context.Context, kubeconfig, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(f.root, "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Dir = f.root
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return out, nil
}

// Stop stops the controller and every control plane, and removes a temporary Dir.
func (f *Fleet) Stop() error {
	errs := []error{f.StopController()}
	for name := range f.locals {
		errs = append(errs, f.StopLocalController(name))
	}
	for name := range f.bpas {
		errs = append(errs, f.StopBPA(name))
	}
	for _, stop := range f.stops {
		errs = append(errs, stop())
	}
	for _, cp := range f.Sites {
		errs = append(errs, cp.Stop())
	}
	if f.Global != nil {
		errs = append(errs, f.Global.Stop())
	}
	if f.ownDir {
		errs = append(errs, os.RemoveAll(f.Dir))
	}
	return errors.Join(errs...)
}

// QuickSiteChecks are global controller flags that make it notice site changes within
// seconds (heartbeats, operation polls, retries and timeouts), for the end-to-end suites.
func QuickSiteChecks() []string {
	return []string{"--site-heartbeat-interval=2s", "--site-operation-poll-interval=500ms", "--site-min-retry-interval=250ms", "--site-timeout=2s"}
}
