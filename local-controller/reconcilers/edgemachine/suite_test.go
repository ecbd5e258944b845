package edgemachine_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgemachine"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// One control plane with the site and Cluster-API CRDs serves the whole package. Each test
// works in two namespaces of its own, as a site does — one for its Cluster-API objects and
// bootstrap data, one for its BareMetalHosts and BMC Secrets — with a baremetal-operator (test
// mode) and a manager of its own that see only those, so tests run in parallel.
//
// One operator per test, not one for the package: the operator's fixture provisioner keeps a
// single state for all the hosts of a process (one image, one power flag). A host
// deprovisioning while others provision livelocks there: each clears or sets what the other
// waits for, every 10 s.
var cp *controlplane.ControlPlane

// provisionTimeout bounds the wait for a host to reach provisioned (about 15 s alone; slower
// when the machine is busy).
const provisionTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	// Metal3's CRDs are installed up front: the tests' metal3.StartT calls then only update them,
	// which is safe in parallel (creating them is not: a second create fails).
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "edgemachine", InstallSiteCRDs: true, ClusterAPICRDs: true, Metal3CRDs: true},
		func(_ context.Context, c *controlplane.ControlPlane) error {
			cp = c
			return nil
		}))
}

func scheme() *runtime.Scheme {
	s := metal3.Scheme()
	if err := clusterv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// site is one test's namespaces: in ns a Cluster, a bootstrap data Secret and machines, in
// hostNS hosts and their BMC credentials.
type site struct {
	t         *testing.T
	ns        string
	hostNS    string
	c         client.Client
	cluster   *clusterv1.Cluster
	creds     string
	bootstrap string
	image     sitev1.MachineImage
}

func newSite(t *testing.T) *site {
	t.Helper()
	c, err := client.New(cp.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, ns: cp.Namespace(t), hostNS: cp.Namespace(t), c: c, creds: "bmc-credentials", bootstrap: "bootstrap-data"}
	metal3.StartT(t, cp, metal3.Options{Namespaces: []string{s.hostNS, s.ns}})
	password := make([]byte, 16)
	if _, err := rand.Read(password); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("edge-os image " + s.ns))
	s.image = sitev1.MachineImage{URL: "http://10.0.0.2:8180/artifacts/" + hex.EncodeToString(sum[:]), SHA256: hex.EncodeToString(sum[:]), Format: "qcow2"}
	s.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "site"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{
			Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		}},
	}
	s.create(
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.hostNS, Name: s.creds},
			Data:       map[string][]byte{"username": []byte("admin"), "password": []byte(hex.EncodeToString(password))},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.bootstrap},
			Data:       map[string][]byte{"value": []byte("#cloud-config\nhostname: edge\n"), "format": []byte("cloud-config")},
		},
		s.cluster,
	)
	return s
}

func (s *site) create(objs ...client.Object) {
	s.t.Helper()
	for _, o := range objs {
		if err := s.c.Create(s.t.Context(), o); err != nil {
			s.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// host creates a BareMetalHost, powered off and without image: the provider must set both.
func (s *site) host(name, mac string, labels map[string]string) *metal3api.BareMetalHost {
	s.t.Helper()
	h := &metal3api.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.hostNS, Name: name, Labels: labels},
		Spec: metal3api.BareMetalHostSpec{
			BootMACAddress: mac,
			BMC: metal3api.BMCDetails{
				Address:         "redfish+http://127.0.0.1:8000/redfish/v1/Systems/" + name,
				CredentialsName: s.creds,
			},
		},
	}
	s.create(h)
	return h
}

// machine creates a Cluster-API Machine (with bootstrap data unless noData) and its EdgeMachine,
// owned by it and labelled with the cluster name, as Cluster-API's Machine controller would.
func (s *site) machine(name string, sel sitev1.HostSelector, policy sitev1.HostRemovalPolicy, noData bool) *sitev1.EdgeMachine {
	s.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.cluster.Name,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeMachine", Name: name,
			},
		},
	}
	if noData {
		m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeBootstrapConfig", Name: name}
	} else {
		m.Spec.Bootstrap.DataSecretName = ptr.To(s.bootstrap)
	}
	s.create(m)
	em := &sitev1.EdgeMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.ns, Name: name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}},
		},
		Spec: sitev1.EdgeMachineSpec{HostSelector: sel, Image: s.image, RemovalPolicy: policy},
	}
	s.create(em)
	return em
}

// startManager runs the EdgeMachine reconciler on a manager of its own, several machines at a
// time (so that claims race). The returned stop (also run at cleanup) waits until it stopped.
func (s *site) startManager() (stop func()) {
	s.t.Helper()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{s.ns: {}, s.hostNS: {}}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	r := &edgemachine.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		HostNamespace: s.hostNS,
		Recorder:      mgr.GetEventRecorder("edgemachine-controller"),
	}
	if err := r.SetupWithManager(s.t.Context(), mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
		s.t.Fatalf("set up the EdgeMachine reconciler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				s.t.Errorf("manager: %v", err)
			}
		})
	}
	s.t.Cleanup(stop)
	return stop
}

func (s *site) getMachine(name string) (*sitev1.EdgeMachine, error) {
	em := &sitev1.EdgeMachine{}
	return em, s.c.Get(s.t.Context(), client.ObjectKey{Namespace: s.ns, Name: name}, em)
}

func (s *site) getHost(name string) *metal3api.BareMetalHost {
	s.t.Helper()
	h := &metal3api.BareMetalHost{}
	if err := s.c.Get(s.t.Context(), client.ObjectKey{Namespace: s.hostNS, Name: name}, h); err != nil {
		s.t.Fatal(err)
	}
	return h
}

// waitReady waits until machine name's Ready condition has status and reason, and returns it.
func (s *site) waitReady(name string, status metav1.ConditionStatus, reason string, timeout time.Duration) *sitev1.EdgeMachine {
	s.t.Helper()
	var em *sitev1.EdgeMachine
	testutil.Eventually(s.t, timeout, func() error {
		var err error
		if em, err = s.getMachine(name); err != nil {
			return err
		}
		if got := ready(em); got == nil || got.Status != status || got.Reason != reason {
			return fmt.Errorf("EdgeMachine %s: Ready %s, want %s/%s", name, describe(got), status, reason)
		}
		return nil
	})
	return em
}

// waitPaused waits until machine name's Paused condition has status and reason, its message
// contains msg, and it is of the machine's generation; it returns the machine.
func (s *site) waitPaused(name string, status metav1.ConditionStatus, reason, msg string) *sitev1.EdgeMachine {
	s.t.Helper()
	var em *sitev1.EdgeMachine
	testutil.Eventually(s.t, 30*time.Second, func() error {
		var err error
		if em, err = s.getMachine(name); err != nil {
			return err
		}
		p := meta.FindStatusCondition(em.Status.Conditions, clusterv1.PausedCondition)
		if p == nil || p.Status != status || p.Reason != reason || !strings.Contains(p.Message, msg) || p.ObservedGeneration != em.Generation {
			return fmt.Errorf("EdgeMachine %s: Paused %+v, want %s/%s (%q) at generation %d", name, p, status, reason, msg, em.Generation)
		}
		return nil
	})
	return em
}

// waitGone waits until machine name is deleted.
func (s *site) waitGone(name string, timeout time.Duration) {
	s.t.Helper()
	testutil.Eventually(s.t, timeout, func() error {
		em, err := s.getMachine(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("EdgeMachine %s still there (finalizers %v, Ready %s)", name, em.Finalizers, describe(ready(em)))
	})
}

// hostsOf returns the hosts of the site whose consumerRef names machine name.
func (s *site) hostsOf(name string) []string {
	s.t.Helper()
	hosts := &metal3api.BareMetalHostList{}
	if err := s.c.List(s.t.Context(), hosts, client.InNamespace(s.hostNS)); err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, h := range hosts.Items {
		if ref := h.Spec.ConsumerRef; ref != nil && ref.Kind == "EdgeMachine" && ref.Name == name {
			out = append(out, h.Name)
		}
	}
	return out
}

func ready(em *sitev1.EdgeMachine) *metav1.Condition {
	return meta.FindStatusCondition(em.Status.Conditions, sitev1.EdgeMachineReadyCondition)
}

func describe(c *metav1.Condition) string {
	if c == nil {
		return "unset"
	}
	return fmt.Sprintf("%s/%s (%s)", c.Status, c.Reason, c.Message)
}

// checkProvisioned checks everything a provisioned machine on host shows, on both sides.
func (s *site) checkProvisioned(em *sitev1.EdgeMachine, host string) {
	s.t.Helper()
	var errs []error
	if want := "metal3://" + s.hostNS + "/" + host; em.Spec.ProviderID != want {
		errs = append(errs, fmt.Errorf("providerID %q, want %q", em.Spec.ProviderID, want))
	}
	if em.Status.Host != host {
		errs = append(errs, fmt.Errorf("status.host %q, want %q", em.Status.Host, host))
	}
	if !ptr.Deref(em.Status.Initialization.Provisioned, false) {
		errs = append(errs, errors.New("status.initialization.provisioned is not true"))
	}
	if em.Status.ProvisioningState != string(metal3api.StateProvisioned) {
		errs = append(errs, fmt.Errorf("status.provisioningState %q", em.Status.ProvisioningState))
	}
	// The fixture's inspection reports NICs with 192.168.100.1 and .2.
	wantAddrs := []sitev1.MachineAddress{{Type: "Hostname", Address: host}, {Type: "InternalIP", Address: "192.168.100.1"}, {Type: "InternalIP", Address: "192.168.100.2"}}
	if fmt.Sprint(em.Status.Addresses) != fmt.Sprint(wantAddrs) {
		errs = append(errs, fmt.Errorf("addresses %v, want %v", em.Status.Addresses, wantAddrs))
	}
	h := s.getHost(host)
	if h.Status.Provisioning.State != metal3api.StateProvisioned {
		errs = append(errs, fmt.Errorf("host %s is %q", host, h.Status.Provisioning.State))
	}
	if img := h.Spec.Image; img == nil || img.URL != s.image.URL || img.Checksum != s.image.SHA256 ||
		img.ChecksumType != metal3api.SHA256 || ptr.Deref(img.DiskFormat, "") != s.image.Format {
		errs = append(errs, fmt.Errorf("host %s image %+v, want URL %s, sha256 %s, format %s", host, img, s.image.URL, s.image.SHA256, s.image.Format))
	}
	if h.Status.Provisioning.Image.URL != s.image.URL {
		errs = append(errs, fmt.Errorf("host %s provisioned image %q, want %q", host, h.Status.Provisioning.Image.URL, s.image.URL))
	}
	if ud := h.Spec.UserData; ud == nil || ud.Name != s.bootstrap || ud.Namespace != s.ns {
		errs = append(errs, fmt.Errorf("host %s userData %+v, want Secret %s/%s", host, ud, s.ns, s.bootstrap))
	}
	if !h.Spec.Online {
		errs = append(errs, fmt.Errorf("host %s is not online", host))
	}
	ref := h.Spec.ConsumerRef
	if ref == nil || ref.APIVersion != sitev1.GroupVersion.String() || ref.Kind != "EdgeMachine" || ref.Name != em.Name || ref.Namespace != s.ns {
		errs = append(errs, fmt.Errorf("host %s consumerRef %+v, want EdgeMachine %s/%s", host, ref, s.ns, em.Name))
	}
	if len(errs) > 0 {
		s.t.Errorf("EdgeMachine %s on host %s: %v", em.Name, host, errors.Join(errs...))
	}
}
