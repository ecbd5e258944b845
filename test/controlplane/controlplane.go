package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// controlPlaneStartTimeout bounds each start of etcd and kube-apiserver (envtest's
// ControlPlaneStartTimeout); envtest's default is 20 s.
const controlPlaneStartTimeout = 2 * time.Minute

// Options configure a control plane.
type Options struct {
	// Name identifies the control plane in errors and logs ("global", "site-a").
	Name string
	// InstallCRDs installs the global cluster's CRDs from deploy/crds/global.
	InstallCRDs bool
	// InstallSiteCRDs installs a site cluster's CRDs from deploy/crds/site.
	InstallSiteCRDs bool
	// Metal3CRDs installs Metal3's CRDs (BareMetalHost, ...) from the baremetal-operator module
	// in the module cache; test/metal3's Start installs them too.
	Metal3CRDs bool
	// ClusterAPICRDs installs Cluster-API's core CRDs (Cluster, Machine, ...) from the
	// cluster-api module in the module cache.
	ClusterAPICRDs bool
	// IstioCRDs installs Istio's CRDs (security.istio.io and the others) from the istio.io/api
	// module in the module cache.
	IstioCRDs bool
	// GlobalWebhooks installs the global controller's webhook configurations
	// (deploy/webhook/global-controller), pointed at a local webhook server: run one with
	// WebhookServerOptions.
	GlobalWebhooks bool
	// Encryption, when not empty, are the providers of the API server's EncryptionConfiguration
	// for Secrets (encryption.Config: the first writes, identity reads last): a secretbox
	// provider (encryption.SecretboxProvider) or a KMS v2 plugin (test/testvault's KMSPlugin.Provider). Empty:
	// Secrets are stored in clear, as by an API server without --encryption-provider-config.
	Encryption []apiserverv1.ProviderConfiguration
	// JWTAuthenticators, when not empty, are the JWT (OIDC) issuers the API server trusts,
	// given as its structured authentication configuration (--authentication-config): for
	// example an OIDCIssuer's JWTAuthenticator. Its other authenticators (certificates,
	// ServiceAccount tokens) stay.
	JWTAuthenticators []apiserverv1.JWTAuthenticator
}

// ControlPlane is one running kube-apiserver + etcd pair.
type ControlPlane struct {
	// Name given in Options.
	Name string
	// Config is an admin (system:masters) REST config.
	Config *rest.Config
	// Client is an admin client whose scheme knows the built-in and edgefleet kinds.
	Client client.Client

	env *envtest.Environment
	// dir holds the API server's certificates (kept across StopAPIServer/StartAPIServer), its
	// encryption configuration and etcd's data.
	dir   string
	guard *proc.Guard
	// pids are the processes started for it (etcd, API servers), for KillAPIServer.
	pids []int
}

// Scheme returns a scheme with the built-in Kubernetes kinds, edgefleet's kinds and
// Cluster-API's core kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add client-go scheme: %v", err))
	}
	if err := fleetv1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add fleet scheme: %v", err))
	}
	if err := sitev1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add site scheme: %v", err))
	}
	if err := clusterv1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add Cluster-API scheme: %v", err))
	}
	return s
}

// Start starts a control plane from the binaries in bin/. Call Stop when done.
func Start(opts Options) (*ControlPlane, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("testenv %s: %s not found in %s: run 'make tools' first", opts.Name, b, binDir)
		}
	}
	// A certificate directory of our own keeps the API server's serving certificate across
	// StopAPIServer/StartAPIServer, so kubeconfigs handed out before a restart stay valid; etcd's
	// data directory of our own can be searched (EtcdFilesContaining). Both are private (0700).
	dir, err := os.MkdirTemp("", "edgefleet-testenv-")
	if err != nil {
		return nil, fmt.Errorf("testenv %s: %w", opts.Name, err)
	}
	env, err := opts.environment(context.Background(), root, dir)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("testenv %s: %w", opts.Name, err), os.RemoveAll(dir))
	}
	cp := &ControlPlane{Name: opts.Name, env: env, dir: dir}

	before := proc.ChildPIDs()
	cfg, startErr := env.Start()
	cp.pids = proc.NewPIDs(before, proc.ChildPIDs())
	cp.guard = proc.StartGuard(cp.pids)
	if startErr != nil {
		return nil, errors.Join(fmt.Errorf("testenv %s: start: %w", opts.Name, startErr), cp.Stop())
	}
	cp.Config = cfg
	cp.Client, err = client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("testenv %s: client: %w", opts.Name, err), cp.Stop())
	}
	return cp, nil
}

// environment is the envtest environment of a control plane keeping its files in dir.
func (opts Options) environment(ctx context.Context, root, dir string) (*envtest.Environment, error) {
	// envtest gives etcd and kube-apiserver 20 s each to answer by default, then starts them
	// again from scratch, five times. Beside the real-hosts lane of a CI run the API server
	// has needed more than that (two packages failed, each after five 20 s attempts): one
	// patient start beats five hasty ones.
	env := &envtest.Environment{BinaryAssetsDirectory: filepath.Join(root, "bin"), ControlPlaneStartTimeout: controlPlaneStartTimeout}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.CertDir = dir
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	if err := os.Mkdir(env.ControlPlane.Etcd.DataDir, 0o700); err != nil {
		return nil, err
	}
	if len(opts.Encryption) > 0 {
		if err := configureEncryption(apiServer, dir, opts.Encryption); err != nil {
			return nil, err
		}
	}
	if len(opts.JWTAuthenticators) > 0 {
		if err := configureAuthentication(apiServer, dir, opts.JWTAuthenticators); err != nil {
			return nil, err
		}
	}
	crdDirs, err := opts.crdDirs(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("CRDs: %w", err)
	}
	if len(crdDirs) > 0 {
		env.CRDDirectoryPaths = crdDirs
		env.ErrorIfCRDPathMissing = true
	}
	if opts.GlobalWebhooks {
		env.WebhookInstallOptions.Paths = []string{filepath.Join(root, "deploy", "webhook", "global-controller")}
	}
	return env, nil
}

// StartT starts a control plane for one test and stops it in the test's cleanup.
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane %s: %v", cp.Name, err)
		}
	})
	return cp
}

// WebhookServerOptions are the host, port and certificates a webhook server must use for the
// API server to reach the webhooks installed with Options.GlobalWebhooks.
func (cp *ControlPlane) WebhookServerOptions() (host string, port int, certDir string) {
	w := cp.env.WebhookInstallOptions
	return w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
}

// Stop stops the API server and etcd and removes their files.
func (cp *ControlPlane) Stop() error {
	err := cp.env.Stop()
	cp.guard.Release()
	return errors.Join(err, os.RemoveAll(cp.dir))
}

// StopAPIServer stops only the API server (etcd keeps the data), to make the control plane
// unreachable.
func (cp *ControlPlane) StopAPIServer() error {
	if err := cp.env.ControlPlane.GetAPIServer().Stop(); err != nil {
		return fmt.Errorf("testenv %s: stop API server: %w", cp.Name, err)
	}
	return nil
}

// KillAPIServer kills the API server with SIGKILL, as a site that loses its power or its link:
// nothing shuts down gracefully, connections just end. It returns once the process is gone.
// etcd keeps running; the API server is not started again (StartAPIServer follows
// StopAPIServer only).
func (cp *ControlPlane) KillAPIServer() error {
	for _, pid := range cp.pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "kube-apiserver" {
			continue // gone, or not the API server
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("testenv %s: kill API server (pid %d): %w", cp.Name, pid, err)
		}
		// envtest waits for its process, which removes it from /proc.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("testenv %s: killed API server (pid %d) still there after 10s", cp.Name, pid)
			}
		}
	}
	return fmt.Errorf("testenv %s: no running kube-apiserver among its processes %v", cp.Name, cp.pids)
}

// StartAPIServer starts the API server again after StopAPIServer, on the same address and with
// the same certificates.
func (cp *ControlPlane) StartAPIServer() error {
	before := proc.ChildPIDs()
	err := cp.env.ControlPlane.GetAPIServer().Start()
	pids := proc.NewPIDs(before, proc.ChildPIDs())
	cp.pids = append(cp.pids, pids...)
	cp.guard.Watch(pids)
	if err != nil {
		return fmt.Errorf("testenv %s: restart API server: %w", cp.Name, err)
	}
	return nil
}

// SetEncryption restarts the API server (etcd keeps the data) with an EncryptionConfiguration of
// providers, as Options.Encryption: to switch encryption on where Secrets were stored in
// clear, or to rotate a secretbox key (the new key's provider first, the old one's after it).
func (cp *ControlPlane) SetEncryption(providers ...apiserverv1.ProviderConfiguration) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	if err := configureEncryption(cp.env.ControlPlane.GetAPIServer(), cp.dir, providers); err != nil {
		return fmt.Errorf("testenv %s: %w", cp.Name, err)
	}
	return cp.StartAPIServer()
}

// configureEncryption writes the encryption configuration of providers into dir and names it
// in the API server's arguments (for its next start).
func configureEncryption(apiServer *envtest.APIServer, dir string, providers []apiserverv1.ProviderConfiguration) error {
	path := filepath.Join(dir, "encryption-config.yaml")
	if err := encryption.WriteConfig(path, providers...); err != nil {
		return err
	}
	apiServer.Configure().Set("encryption-provider-config", path)
	return nil
}

// configureAuthentication writes the API server's AuthenticationConfiguration with jwt into
// dir (0600) and points --authentication-config at it.
func configureAuthentication(apiServer *envtest.APIServer, dir string, jwt []apiserverv1.JWTAuthenticator) error {
	cfg := apiserverv1.AuthenticationConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "AuthenticationConfiguration"},
		JWT:      jwt,
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("authentication configuration: %w", err)
	}
	path := filepath.Join(dir, "authentication-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("authentication configuration: %w", err)
	}
	apiServer.Configure().Set("authentication-config", path)
	return nil
}

// Dir is the control plane's own directory: the API server's certificates and configuration
// files, and etcd's data (its database and write-ahead log), for searches of what is on disk.
func (cp *ControlPlane) Dir() string { return cp.dir }

// ClientCAFile is the API server's client CA (--client-ca-file): the CA of the client
// certificates of Kubeconfig and Config.
func (cp *ControlPlane) ClientCAFile() string {
	return filepath.Join(cp.dir, "client-cert-auth-ca.crt")
}

// Kubeconfig returns a kubeconfig with inline credentials for a new user of this control plane.
func (cp *ControlPlane) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("testenv %s: add user %s: %w", cp.Name, user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("testenv %s: kubeconfig of user %s: %w", cp.Name, user, err)
	}
	return kc, nil
}

// AdminKubeconfig returns a system:masters kubeconfig, for kubectl and the controllers' --kubeconfig.
func (cp *ControlPlane) AdminKubeconfig() ([]byte, error) {
	return cp.Kubeconfig("edgefleet-admin", "system:masters")
}

// Namespace creates a namespace for one test and deletes it in the test's cleanup.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.GenerateName = "test-"
	if err := cp.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("testenv %s: create namespace: %v", cp.Name, err)
	}
	t.Cleanup(func() {
		// The test's context is already cancelled here.
		if err := cp.Client.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
			t.Errorf("testenv %s: delete namespace %s: %v", cp.Name, ns.Name, err)
		}
	})
	return ns.Name
}
