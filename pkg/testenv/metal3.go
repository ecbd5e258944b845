package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Metal3User is the user the baremetal-operator is known as on the control plane. It holds
// the operator's own ClusterRole (config/base/rbac/role.yaml of the module), bound in the
// watched namespaces only.
const Metal3User = "metal3-baremetal-operator"

// metal3RolePath is the operator's ClusterRole inside its module.
const metal3RolePath = "config/base/rbac/role.yaml"

// Metal3Options configure the Metal3 baremetal-operator of a site.
type Metal3Options struct {
	// Namespaces are the namespaces the operator watches (a site's: sitev1.HostsNamespace, its
	// BareMetalHosts and BMC Secrets, and sitev1.InfoNamespace, the hosts' first-boot data);
	// each is created when missing. None means every namespace (the operator's role is then
	// bound cluster-wide).
	Namespaces []string
	// Dir receives the operator's kubeconfig and log (bmo.log); a temporary directory, removed
	// by Stop, when empty.
	Dir string
	// Args are extra flags of the operator.
	Args []string
}

// Metal3 is Metal3's baremetal-operator (bin/bmo, built by hack/tools.sh) running against a
// control plane as a subprocess in -test-mode: BareMetalHosts go through the operator's real
// state machine (registering, inspecting, available, provisioning, provisioned, ...) with its
// fixture provisioner in place of Ironic.
type Metal3 struct {
	// Namespaces watched, as in Metal3Options.
	Namespaces []string
	// Client is an admin client of the control plane whose scheme also knows the metal3.io
	// kinds.
	Client client.Client
	// Dir holds bmo.kubeconfig and bmo.log.
	Dir string
	// HealthURL is the operator's health endpoint (/healthz, /readyz below it).
	HealthURL string

	ownDir bool
	proc   *process
}

// Metal3Scheme returns Scheme with Metal3's kinds (metal3.io/v1alpha1) added.
func Metal3Scheme() *runtime.Scheme {
	s := Scheme()
	if err := metal3api.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add metal3 scheme: %v", err))
	}
	return s
}

// StartMetal3 installs Metal3's CRDs into the control plane, gives user Metal3User the
// operator's role, starts bin/bmo in -test-mode with that user's kubeconfig and waits until it
// reports ready. Call Stop when done; a guard process kills the operator if this process dies
// first.
func (cp *ControlPlane) StartMetal3(ctx context.Context, opts Metal3Options) (_ *Metal3, err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin", "bmo")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("testenv %s: bmo not found in %s: run 'make tools' first", cp.Name, filepath.Dir(bin))
	}
	m := &Metal3{Namespaces: opts.Namespaces, Dir: opts.Dir}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("testenv %s: start Metal3: %w", cp.Name, err), m.Stop())
		}
	}()
	if m.Dir == "" {
		if m.Dir, err = os.MkdirTemp("", "edgefleet-metal3-"); err != nil {
			return nil, err
		}
		m.ownDir = true
	} else if err := os.MkdirAll(m.Dir, 0o700); err != nil {
		return nil, err
	}
	if m.Client, err = client.New(cp.Config, client.Options{Scheme: Metal3Scheme()}); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}

	crdDir, err := moduleSubdir(ctx, root, Metal3Module, metal3CRDPath)
	if err != nil {
		return nil, err
	}
	if err := cp.InstallCRDs(crdDir); err != nil {
		return nil, err
	}
	if err := cp.grantMetal3(ctx, root, m.Client, opts.Namespaces); err != nil {
		return nil, err
	}
	kc, err := cp.Kubeconfig(Metal3User)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.kubeconfig(), kc, 0o600); err != nil {
		return nil, err
	}

	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	healthPort := ports[0]
	m.HealthURL = "http://127.0.0.1:" + strconv.Itoa(healthPort)
	env := append(environWithout("KUBECONFIG", "WATCH_NAMESPACE", "POD_NAMESPACE", "IRONIC_NAME", "IRONIC_NAMESPACE"),
		"KUBECONFIG="+m.kubeconfig())
	if m.proc, err = startProcess("bmo", bin, append([]string{
		"-test-mode",
		"-namespace=" + strings.Join(opts.Namespaces, ","),
		"-webhook-port=0",
		"-metrics-addr=0",
		"-health-addr=127.0.0.1:" + strconv.Itoa(healthPort),
	}, opts.Args...), env, m.LogPath()); err != nil {
		return nil, err
	}
	if err := m.proc.waitReady(ctx, m.HealthURL+"/readyz"); err != nil {
		return nil, err
	}
	return m, nil
}

// StartMetal3T starts Metal3 for one test and stops it in the test's cleanup; when the test
// failed, the end of the operator's log goes to the test log first.
func (cp *ControlPlane) StartMetal3T(t testing.TB, opts Metal3Options) *Metal3 {
	t.Helper()
	m, err := cp.StartMetal3(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", m.LogPath(), m.proc.logTail(40))
		}
		if err := m.Stop(); err != nil {
			t.Errorf("stop Metal3 of %s: %v", cp.Name, err)
		}
	})
	return m
}

// LogPath is the path of the operator's log (stdout and stderr).
func (m *Metal3) LogPath() string { return filepath.Join(m.Dir, "bmo.log") }

func (m *Metal3) kubeconfig() string { return filepath.Join(m.Dir, "bmo.kubeconfig") }

// grantMetal3 creates the operator's ClusterRole, read from the module, and binds it to
// Metal3User in each namespace of namespaces (created when missing), or cluster-wide when there
// is none.
func (cp *ControlPlane) grantMetal3(ctx context.Context, root string, c client.Client, namespaces []string) error {
	path, err := moduleSubdir(ctx, root, Metal3Module, metal3RolePath)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the operator's role: %w", err)
	}
	role := &rbacv1.ClusterRole{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for role.Kind == "" { // skip empty documents (a leading "---")
		if err := dec.Decode(role); err != nil {
			return fmt.Errorf("decode the operator's role %s: %w", path, err)
		}
	}
	if role.Kind != "ClusterRole" || len(role.Rules) == 0 {
		return fmt.Errorf("%s holds no ClusterRole with rules", path)
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: Metal3User}
	objs := []client.Object{role}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: Metal3User}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: Metal3User}}
	if len(namespaces) == 0 {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: Metal3User}, RoleRef: ref, Subjects: subjects})
	}
	for _, ns := range namespaces {
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Metal3User}, RoleRef: ref, Subjects: subjects})
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, o)); err != nil {
			return fmt.Errorf("grant %s its role: create %T %s: %w", Metal3User, o, o.GetName(), err)
		}
	}
	return nil
}

// Stop stops the operator (SIGTERM, then SIGKILL after 10s) and removes a temporary Dir.
func (m *Metal3) Stop() error {
	errs := []error{m.proc.stop()}
	m.proc = nil
	if m.ownDir {
		errs = append(errs, os.RemoveAll(m.Dir))
		m.ownDir = false
	}
	return errors.Join(errs...)
}

// environWithout returns this process's environment without the variables named in keys.
func environWithout(keys ...string) []string {
	var env []string
outer:
	for _, kv := range os.Environ() {
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				continue outer
			}
		}
		env = append(env, kv)
	}
	return env
}
