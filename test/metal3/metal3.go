package metal3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// User is the user the baremetal-operator is known as on the control plane. It holds
// the operator's own ClusterRole (config/base/rbac/role.yaml of the module), bound in the
// watched namespaces only.
const User = "metal3-baremetal-operator"

// metal3RolePath is the operator's ClusterRole inside its module.
const metal3RolePath = "config/base/rbac/role.yaml"

// NudgeAnnotation is the annotation the bed sets, each NudgeInterval, on every watched
// BareMetalHost on its way somewhere (deleted, or in a state other than provisioned, available
// and externally provisioned), so that the operator reconciles such a host at least that often.
//
// Why: the fixture provisioner of -test-mode keeps one state for all hosts (one power state,
// one provisioned image). A host that wants power on and one that wants it off, or one
// provisioning while another deprovisions, undo each other's work, and each of those
// reconciles ends "dirty" with no delay, which controller-runtime requeues with its growing
// per-item backoff: after about twenty flips a host waits up to 1,000 s for its next
// reconcile, and a test sees a host stuck in "provisioning" or "powering off before delete"
// for many minutes. With Ironic each host has its own state and the operator polls it every
// few seconds; an annotation change is a watch event the operator reacts to at once (its
// update filter lets annotation changes through), which restores that pace. Hosts at rest are
// left alone: nudged too, every provisioned host would switch the shared power back on each
// round, and a host powering off before its deletion would hardly ever win. Nothing else
// reads the annotation.
const NudgeAnnotation = "test.edgefleet.io/reconcile"

// NudgeInterval is how often the bed sets NudgeAnnotation: the fixture's own requeue delay.
const NudgeInterval = 10 * time.Second

// Options configure the Metal3 baremetal-operator of a site.
type Options struct {
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
	// Ironic, when set, is the real Ironic the operator drives (no -test-mode, no nudging):
	// BareMetalHosts then need a BMC that Ironic reaches.
	Ironic *Ironic
}

// Ironic is what the operator needs to drive a real Ironic.
type Ironic struct {
	// URL is Ironic's API endpoint without a path (http://127.0.0.1:6385).
	URL string
	// User and Password are the API's HTTP basic credentials. The operator reads them from
	// files (METAL3_AUTH_ROOT_DIR/ironic/{username,password}); they are written to a directory
	// in memory (/dev/shm), never to disk, and removed by Stop.
	User, Password string
	// DeployKernelURL and DeployRamdiskURL are where Ironic's agent (IPA) is served; empty
	// until hosts are inspected or provisioned through it.
	DeployKernelURL, DeployRamdiskURL string
}

// Operator is Metal3's baremetal-operator (bin/bmo, built by hack/tools.sh) running against a
// control plane as a subprocess: BareMetalHosts go through the operator's real state machine
// (registering, inspecting, available, provisioning, provisioned, ...), either with its fixture
// provisioner in place of Ironic (-test-mode), each host nudged every NudgeInterval
// (NudgeAnnotation), or driven through a real Ironic (Options.Ironic).
type Operator struct {
	// Namespaces watched, as in Options.
	Namespaces []string
	// Client is an admin client of the control plane whose scheme also knows the metal3.io
	// kinds.
	Client client.Client
	// Dir holds bmo.kubeconfig and bmo.log.
	Dir string
	// HealthURL is the operator's health endpoint (/healthz, /readyz below it).
	HealthURL string

	ownDir    bool
	authDir   string // METAL3_AUTH_ROOT_DIR in memory, with Options.Ironic
	proc      *proc.Process
	stopNudge context.CancelFunc
	nudging   sync.WaitGroup
}

// Scheme returns controlplane.Scheme with Metal3's kinds (metal3.io/v1alpha1) added.
func Scheme() *runtime.Scheme {
	s := controlplane.Scheme()
	if err := metal3api.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("testenv: add metal3 scheme: %v", err))
	}
	return s
}

// Start installs Metal3's CRDs into the control plane, gives user User the
// operator's role, starts bin/bmo in -test-mode (or against opts.Ironic) with that user's
// kubeconfig and waits until it reports ready. Call Stop when done; a guard process kills the operator if this process dies
// first.
func Start(ctx context.Context, cp *controlplane.ControlPlane, opts Options) (_ *Operator, err error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin", "bmo")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("testenv %s: bmo not found in %s: run 'make tools' first", cp.Name, filepath.Dir(bin))
	}
	m := &Operator{Namespaces: opts.Namespaces, Dir: opts.Dir}
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
	if m.Client, err = client.New(cp.Config, client.Options{Scheme: Scheme()}); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}

	crdDir, err := controlplane.Metal3CRDDir(ctx)
	if err != nil {
		return nil, err
	}
	if err := cp.InstallCRDs(crdDir); err != nil {
		return nil, err
	}
	if err := grant(ctx, cp, root, m.Client, opts.Namespaces); err != nil {
		return nil, err
	}
	kc, err := cp.Kubeconfig(User)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.kubeconfig(), kc, 0o600); err != nil {
		return nil, err
	}

	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	healthPort := ports[0]
	m.HealthURL = "http://127.0.0.1:" + strconv.Itoa(healthPort)
	env := append(environWithout("KUBECONFIG", "WATCH_NAMESPACE", "POD_NAMESPACE", "IRONIC_NAME", "IRONIC_NAMESPACE",
		"IRONIC_ENDPOINT", "METAL3_AUTH_ROOT_DIR", "DEPLOY_KERNEL_URL", "DEPLOY_RAMDISK_URL"),
		"KUBECONFIG="+m.kubeconfig())
	args := []string{
		"-namespace=" + strings.Join(opts.Namespaces, ","),
		"-webhook-port=0",
		"-metrics-addr=0",
		"-health-addr=127.0.0.1:" + strconv.Itoa(healthPort),
	}
	if opts.Ironic == nil {
		args = append([]string{"-test-mode"}, args...)
	} else {
		ironicEnv, err := m.ironicEnv(opts.Ironic)
		if err != nil {
			return nil, err
		}
		env = append(env, ironicEnv...)
	}
	if m.proc, err = proc.Start("bmo", bin, append(args, opts.Args...), env, m.LogPath()); err != nil {
		return nil, err
	}
	if err := m.proc.WaitReady(ctx, m.HealthURL+"/readyz"); err != nil {
		return nil, err
	}
	if opts.Ironic == nil {
		nudgeCtx, stop := context.WithCancel(context.Background())
		m.stopNudge = stop
		m.nudging.Go(func() { m.nudge(nudgeCtx) })
	}
	return m, nil
}

// ironicEnv writes the operator's Ironic credentials into a directory in memory and returns
// the environment that points the operator at ir.
func (m *Operator) ironicEnv(ir *Ironic) ([]string, error) {
	dir, err := os.MkdirTemp("/dev/shm", "edgefleet-metal3-auth-")
	if err != nil {
		return nil, fmt.Errorf("a directory in memory for the operator's Ironic credentials: %w", err)
	}
	m.authDir = dir
	if err := os.Mkdir(filepath.Join(dir, "ironic"), 0o700); err != nil {
		return nil, err
	}
	for name, v := range map[string]string{"username": ir.User, "password": ir.Password} {
		if err := os.WriteFile(filepath.Join(dir, "ironic", name), []byte(v), 0o600); err != nil {
			return nil, err
		}
	}
	env := []string{"IRONIC_ENDPOINT=" + strings.TrimSuffix(ir.URL, "/") + "/v1/", "METAL3_AUTH_ROOT_DIR=" + dir}
	if ir.DeployKernelURL != "" {
		env = append(env, "DEPLOY_KERNEL_URL="+ir.DeployKernelURL, "DEPLOY_RAMDISK_URL="+ir.DeployRamdiskURL)
	}
	return env, nil
}

// atRest reports whether a host in state is at rest, not nudged (NudgeAnnotation).
func atRest(state metal3api.ProvisioningState) bool {
	switch state {
	case metal3api.StateProvisioned, metal3api.StateAvailable, metal3api.StateExternallyProvisioned:
		return true
	}
	return false
}

// nudge sets NudgeAnnotation on the BareMetalHosts of the watched namespaces that are not at
// rest each NudgeInterval until ctx is done. A failed list or patch (a host deleted meanwhile, the
// control plane stopping first) is left for the next round.
func (m *Operator) nudge(ctx context.Context) {
	namespaces := m.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	tick := time.NewTicker(NudgeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, ns := range namespaces {
			reqCtx, cancel := context.WithTimeout(ctx, NudgeInterval)
			hosts := &metal3api.BareMetalHostList{}
			if err := m.Client.List(reqCtx, hosts, client.InNamespace(ns)); err == nil {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, NudgeAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
				for i := range hosts.Items {
					if h := &hosts.Items[i]; h.DeletionTimestamp != nil || !atRest(h.Status.Provisioning.State) {
						_ = m.Client.Patch(reqCtx, h, client.RawPatch(types.MergePatchType, patch))
					}
				}
			}
			cancel()
		}
	}
}

// StartT starts Metal3 for one test and stops it in the test's cleanup; when the test
// failed, the end of the operator's log goes to the test log first.
func StartT(t testing.TB, cp *controlplane.ControlPlane, opts Options) *Operator {
	t.Helper()
	m, err := Start(t.Context(), cp, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", m.LogPath(), m.proc.LogTail(40))
		}
		if err := m.Stop(); err != nil {
			t.Errorf("stop Metal3 of %s: %v", cp.Name, err)
		}
	})
	return m
}

// LogPath is the path of the operator's log (stdout and stderr).
func (m *Operator) LogPath() string { return filepath.Join(m.Dir, "bmo.log") }

// LogLines returns the last n lines of the operator's log that contain substr (a host's name,
// say), for a failed test to show what the operator did with its objects.
func (m *Operator) LogLines(substr string, n int) string {
	b, err := os.ReadFile(m.LogPath())
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, substr) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (m *Operator) kubeconfig() string { return filepath.Join(m.Dir, "bmo.kubeconfig") }

// grant creates the operator's ClusterRole, read from the module, and binds it to
// User in each namespace of namespaces (created when missing), or cluster-wide when there
// is none.
func grant(ctx context.Context, cp *controlplane.ControlPlane, root string, c client.Client, namespaces []string) error {
	path, err := controlplane.ModuleSubdir(ctx, root, controlplane.Metal3Module, metal3RolePath)
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
	role.ObjectMeta = metav1.ObjectMeta{Name: User}
	objs := []client.Object{role}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: User}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: User}}
	if len(namespaces) == 0 {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: User}, RoleRef: ref, Subjects: subjects})
	}
	for _, ns := range namespaces {
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: User}, RoleRef: ref, Subjects: subjects})
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, o)); err != nil {
			return fmt.Errorf("grant %s its role: create %T %s: %w", User, o, o.GetName(), err)
		}
	}
	return nil
}

// Stop stops the operator (SIGTERM, then SIGKILL after 10s) and removes a temporary Dir.
func (m *Operator) Stop() error {
	if m.stopNudge != nil {
		m.stopNudge()
		m.nudging.Wait()
		m.stopNudge = nil
	}
	errs := []error{m.proc.Stop()}
	m.proc = nil
	if m.authDir != "" {
		errs = append(errs, os.RemoveAll(m.authDir))
		m.authDir = ""
	}
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
