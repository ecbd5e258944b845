package site_test

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var osImageSHA = strings.Repeat("5d", 32)

func withCluster(s *fleetv1.Site) {
	s.Spec.Cluster = &fleetv1.SiteCluster{
		KubernetesVersion: "v1.36.3",
		OSImage:           &sitev1.OSImage{SHA256: osImageSHA, Format: "qcow2"},
		Network: sitev1.ClusterNetwork{
			PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
			ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10"},
		},
		HostRemovalPolicy: sitev1.RemovalKeep,
	}
}

// startClusterSite starts a site control plane with the site CRDs (no local controller: the test
// plays its part on the ApplicationCluster).
func startClusterSite(t *testing.T) (*controlplane.ControlPlane, []byte) {
	t.Helper()
	return startSiteWith(t, controlplane.Options{Name: "site", InstallSiteCRDs: true}, "v0.1.0-test")
}

// createBMCHost creates a Host and its BMC credentials Secret (<name>-creds) on the global cluster.
func createBMCHost(t *testing.T, ns, name, site string, role fleetv1.HostRole, mac string, data map[string]string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-creds"}, StringData: data}
	if err := global.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	createRedfishHost(t, ns, name, site, role, mac, func(b *fleetv1.BMCDetails) {
		b.CredentialsSecretRef = &fleetv1.SecretReference{Name: secret.Name}
	})
}

// createRedfishHost creates a Host with a Redfish BMC on the global cluster; creds says where
// its BMC credentials are.
func createRedfishHost(t *testing.T, ns, name, site string, role fleetv1.HostRole, mac string, creds func(*fleetv1.BMCDetails)) {
	t.Helper()
	host := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1.HostSpec{
			SiteRef: fleetv1.SiteReference{Name: site}, Role: role, BootMACAddress: mac,
			BMC: fleetv1.BMCDetails{
				Address:                        "redfish+https://192.0.2.10/redfish/v1/Systems/" + name,
				DisableCertificateVerification: role == fleetv1.RoleControlPlane,
			},
		},
	}
	creds(&host.Spec.BMC)
	if err := global.Client.Create(t.Context(), host); err != nil {
		t.Fatal(err)
	}
}

// mac returns a boot MAC unique to the test's namespace: boot MACs are unique fleet-wide, and the
// namespaces of earlier runs (-count) are never finalized by envtest, so their Hosts stay.
func mac(ns string, n int) string {
	h := sha256.Sum256([]byte(ns))
	return fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", h[0], h[1], n>>8, n&0xff)
}

func creds(host string) map[string]string {
	return map[string]string{"username": "admin-" + host, "password": "pw-" + host}
}

// waitCluster waits until the site's ApplicationCluster passes check, and returns it.
func waitCluster(t *testing.T, cp *controlplane.ControlPlane, name string, check func(*sitev1.ApplicationCluster) error) *sitev1.ApplicationCluster {
	t.Helper()
	ac := &sitev1.ApplicationCluster{}
	testutil.Eventually(t, wait, func() error {
		if err := cp.Client.Get(t.Context(), types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: name}, ac); err != nil {
			return err
		}
		return check(ac)
	})
	return ac
}

func hostNames(ac *sitev1.ApplicationCluster) []string {
	var names []string
	for _, h := range ac.Spec.Hosts {
		names = append(names, h.Name)
	}
	return names
}

func hostsAre(want ...string) func(*sitev1.ApplicationCluster) error {
	return func(ac *sitev1.ApplicationCluster) error {
		if got := hostNames(ac); !slices.Equal(got, want) {
			return fmt.Errorf("spec.hosts = %v, want %v", got, want)
		}
		return nil
	}
}

func hostEntry(ac *sitev1.ApplicationCluster, name string) sitev1.ClusterHost {
	for _, h := range ac.Spec.Hosts {
		if h.Name == name {
			return h
		}
	}
	return sitev1.ClusterHost{}
}

// waitSite waits until the Site passes check, and returns it.
func waitSite(t *testing.T, key types.NamespacedName, check func(*fleetv1.Site) error) *fleetv1.Site {
	t.Helper()
	site := &fleetv1.Site{}
	testutil.Eventually(t, wait, func() error {
		if err := global.Client.Get(t.Context(), key, site); err != nil {
			return err
		}
		return check(site)
	})
	return site
}

func conditionIs(condType string, status metav1.ConditionStatus, reason string, inMessage ...string) func(*fleetv1.Site) error {
	return func(s *fleetv1.Site) error {
		c := meta.FindStatusCondition(s.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s is %+v, want %s %s", condType, c, status, reason)
		}
		for _, m := range inMessage {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("%s message %q does not contain %q", condType, c.Message, m)
			}
		}
		return nil
	}
}

func siteSecret(t *testing.T, cp *controlplane.ControlPlane, host string) (*corev1.Secret, error) {
	t.Helper()
	s := &corev1.Secret{}
	err := cp.Client.Get(t.Context(), types.NamespacedName{Namespace: sitev1.HostsNamespace, Name: host + "-bmc"}, s)
	return s, err
}

// waitSecretGone waits until the site has no BMC Secret for host.
func waitSecretGone(t *testing.T, cp *controlplane.ControlPlane, host string) {
	t.Helper()
	testutil.Eventually(t, wait, func() error {
		if _, err := siteSecret(t, cp, host); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s-bmc still on the site (err %w)", host, err)
		}
		return nil
	})
}

// waitSecretData waits until the site's BMC Secret of host holds data, and returns it.
func waitSecretData(t *testing.T, cp *controlplane.ControlPlane, host string, data map[string]string) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	testutil.Eventually(t, wait, func() error {
		var err error
		if s, err = siteSecret(t, cp, host); err != nil {
			return err
		}
		if len(s.Data) != len(data) {
			return fmt.Errorf("Secret %s has keys %v", s.Name, slices.Collect(func(yield func(string) bool) {
				for k := range s.Data {
					if !yield(k) {
						return
					}
				}
			}))
		}
		for k, v := range data {
			if string(s.Data[k]) != v {
				return fmt.Errorf("Secret %s key %s is not the global one", s.Name, k)
			}
		}
		return nil
	})
	return s
}

// heartbeats waits until the site has been probed n more times.
func heartbeats(t *testing.T, key types.NamespacedName, n int) {
	t.Helper()
	seen := map[float64]bool{}
	testutil.Eventually(t, time.Duration(n+2)*heartbeat+wait, func() error {
		if at := lastProbe(t, key); at != 0 {
			seen[at] = true
		}
		if len(seen) <= n {
			return fmt.Errorf("%d probes seen, want %d after the first", len(seen)-1, n)
		}
		return nil
	})
}

// lastProbe is the site's edgefleet_site_last_probe_timestamp_seconds, 0 before its first probe.
func lastProbe(t *testing.T, key types.NamespacedName) float64 {
	t.Helper()
	families, err := metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "edgefleet_site_last_probe_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == key.Namespace && labels["site"] == key.Name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// siteRequests are the requests the site's API server has served (controlplane.RequestCounts).
func siteRequests(t *testing.T, cp *controlplane.ControlPlane) controlplane.RequestCounts {
	t.Helper()
	r, err := cp.Requests(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// siteWrites counts the write requests the site's API server served on ApplicationClusters and
// Secrets (their subresources included).
func siteWrites(t *testing.T, cp *controlplane.ControlPlane) float64 {
	t.Helper()
	total := 0.0
	for key, n := range siteRequests(t, cp) {
		verb, resource, _ := strings.Cut(key, " ")
		resource, _, _ = strings.Cut(resource, "/")
		if (resource == "applicationclusters" || resource == "secrets") && slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}, verb) {
			total += n
		}
	}
	return total
}

// reportStatus writes the ApplicationCluster's status as the site's local controller would.
func reportStatus(t *testing.T, cp *controlplane.ControlPlane, name string, edit func(*sitev1.ApplicationCluster)) {
	t.Helper()
	ac := &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: name}}
	controlplane.UpdateStatus(t, cp.Client, ac, func(ac *sitev1.ApplicationCluster) {
		ac.Status.ObservedGeneration = ac.Generation
		edit(ac)
	})
}

func readyStatus(status metav1.ConditionStatus, reason, message string) []metav1.Condition {
	return []metav1.Condition{{Type: sitev1.ApplicationClusterReadyCondition, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}}
}

// TestClusterPushedToSite follows one site's ApplicationCluster and BMC Secrets through its
// life: first push with a host left out, steady heartbeats without writes, host and credential
// changes, status mirrored back, a host removed while the site still deprovisions it, and
// spec.cluster removed while the site still takes the cluster down.
func TestClusterPushedToSite(t *testing.T) {
	t.Parallel() // with the other cluster test: both mostly wait for heartbeats
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	site, _ := register(t, ns, "plant-1", kc, withCluster)
	key := client.ObjectKeyFromObject(site)
	createBMCHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, mac(ns, 0x0301), creds("cp-0"))
	createBMCHost(t, ns, "w-1", site.Name, fleetv1.RoleWorker, mac(ns, 0x0303), creds("w-1"))
	createBMCHost(t, ns, "w-0", site.Name, fleetv1.RoleWorker, mac(ns, 0x0302), creds("w-0"))
	// w-2's credentials lack the password: it is left out, and said so.
	createBMCHost(t, ns, "w-2", site.Name, fleetv1.RoleWorker, mac(ns, 0x0304), map[string]string{"username": "admin-w-2"})

	// The ApplicationCluster appears with exactly the three usable hosts, control plane first.
	start := time.Now()
	ac := waitCluster(t, siteCP, site.Name, hostsAre("cp-0", "w-0", "w-1"))
	t.Logf("ApplicationCluster pushed %s after the hosts were created", time.Since(start).Round(time.Millisecond))
	spec := ac.Spec
	if spec.KubernetesVersion != "v1.36.3" || spec.OSImage.SHA256 != osImageSHA || spec.OSImage.Format != "qcow2" ||
		spec.HostRemovalPolicy != sitev1.RemovalKeep || spec.Network.ControlPlaneEndpoint != (sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}) ||
		!slices.Equal(spec.Network.PodCIDRs, []string{"10.244.0.0/16"}) || spec.OperationGeneration != 0 {
		t.Errorf("spec does not follow Site.spec.cluster: %+v", spec)
	}
	wantCP := sitev1.ClusterHost{Name: "cp-0", Role: sitev1.RoleControlPlane, BootMACAddress: mac(ns, 0x0301), BMC: sitev1.BMC{
		Address: "redfish+https://192.0.2.10/redfish/v1/Systems/cp-0", CredentialsName: "cp-0-bmc", DisableCertificateVerification: true,
	}}
	if got := hostEntry(ac, "cp-0"); got != wantCP {
		t.Errorf("spec.hosts[cp-0] = %+v, want %+v", got, wantCP)
	}
	if ac.Labels[sitev1.ManagedByLabel] != sitev1.ManagedByGlobal || ac.Annotations[sitev1.SourceAnnotation] != "Site "+ns+"/plant-1" {
		t.Errorf("ApplicationCluster marks: labels %v annotations %v", ac.Labels, ac.Annotations)
	}
	for _, h := range []string{"cp-0", "w-0", "w-1"} {
		s := waitSecretData(t, siteCP, h, creds(h))
		if s.Labels[sitev1.ClusterLabel] != site.Name || s.Labels[sitev1.HostLabel] != h || s.Labels[sitev1.ManagedByLabel] != sitev1.ManagedByGlobal {
			t.Errorf("Secret %s labels = %v", s.Name, s.Labels)
		}
	}
	if _, err := siteSecret(t, siteCP, "w-2"); !apierrors.IsNotFound(err) {
		t.Errorf("w-2's incomplete credentials reached the site (err %v)", err)
	}
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonHostsLeftOut, "w-2", `"password"`))
	got := waitSite(t, key, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReported))
	if !meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1.SiteReadyCondition) {
		t.Errorf("Site Ready depends on the cluster: %+v", meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReadyCondition))
	}

	// Completing w-2's credentials adds it (the Secret's change reaches the site's reconcile).
	w2 := &corev1.Secret{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "w-2-creds"}, w2); err != nil {
		t.Fatal(err)
	}
	w2.Data["password"] = []byte("pw-w-2")
	if err := global.Client.Update(t.Context(), w2); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, siteCP, site.Name, hostsAre("cp-0", "w-0", "w-1", "w-2"))
	waitSecretData(t, siteCP, "w-2", creds("w-2"))
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, "4 host(s)"))

	// A steady site sees no write for several heartbeats.
	versions := func() map[string]string {
		v := map[string]string{}
		a := &sitev1.ApplicationCluster{}
		if err := siteCP.Client.Get(t.Context(), types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: site.Name}, a); err != nil {
			t.Fatal(err)
		}
		v["ApplicationCluster"] = a.ResourceVersion
		for _, h := range []string{"cp-0", "w-0", "w-1", "w-2"} {
			s, err := siteSecret(t, siteCP, h)
			if err != nil {
				t.Fatal(err)
			}
			v[s.Name] = s.ResourceVersion
		}
		return v
	}
	before, writesBefore := versions(), siteWrites(t, siteCP)
	heartbeats(t, key, 3)
	if after, writesAfter := versions(), siteWrites(t, siteCP); !equality.Semantic.DeepEqual(before, after) || writesAfter != writesBefore {
		t.Errorf("steady site was written: resourceVersions %v -> %v, write requests %v -> %v", before, after, writesBefore, writesAfter)
	}

	// A new BMC address updates the host's entry, and only the ApplicationCluster is written.
	controlplane.Update(t, global.Client, &fleetv1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-0"}}, func(h *fleetv1.Host) {
		h.Spec.BMC.Address = "ipmi://192.0.2.99:623"
	})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if a := hostEntry(ac, "w-0").BMC.Address; a != "ipmi://192.0.2.99:623" {
			return fmt.Errorf("w-0 BMC address = %q", a)
		}
		return nil
	})
	if s, _ := siteSecret(t, siteCP, "w-0"); s.ResourceVersion != before["w-0-bmc"] {
		t.Error("a new BMC address rewrote the host's Secret")
	}

	// A new Kubernetes version set on the Site reaches the ApplicationCluster, which the site
	// rolls (local-controller/setup TestScaleOutScaleInAndVersionRoll; with the BPA, in place).
	controlplane.Update(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: site.Name}}, func(s *fleetv1.Site) {
		s.Spec.Cluster.KubernetesVersion = "v1.36.4"
	})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if v := ac.Spec.KubernetesVersion; v != "v1.36.4" {
			return fmt.Errorf("spec.kubernetesVersion = %q, want the Site's v1.36.4", v)
		}
		return nil
	})

	// A rotated password reaches the site; so does a repair of a copy changed on the site.
	cp0 := &corev1.Secret{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cp-0-creds"}, cp0); err != nil {
		t.Fatal(err)
	}
	cp0.Data["password"] = []byte("rotated")
	if err := global.Client.Update(t.Context(), cp0); err != nil {
		t.Fatal(err)
	}
	waitSecretData(t, siteCP, "cp-0", map[string]string{"username": "admin-cp-0", "password": "rotated"})
	tampered, _ := siteSecret(t, siteCP, "w-1")
	controlplane.Update(t, siteCP.Client, tampered, func(s *corev1.Secret) { s.Data["password"] = []byte("changed-on-site") })
	waitSecretData(t, siteCP, "w-1", creds("w-1"))

	// The site's status is mirrored into the Site, and each host's inventory into its Host.
	cp0Hardware := &sitev1.HostHardware{Manufacturer: "QEMU", ProductName: "Standard PC", CPUs: 2, CPUModel: "QEMU Virtual CPU", MemoryMiB: 4096,
		Disks: []sitev1.HostDisk{{Name: "/dev/vda", SizeBytes: 8 << 30, Type: "HDD"}}, NICs: []sitev1.HostNIC{{Name: "ens2", MAC: "52:54:00:1a:0a:01", SpeedGbps: 1}}}
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Phase = sitev1.ClusterProvisioning
		ac.Status.ControlPlane = sitev1.NodeCounts{Ready: 1, Total: 1}
		ac.Status.Workers = sitev1.NodeCounts{Ready: 1, Total: 3}
		ac.Status.LastError = "w-2: BMC did not answer"
		ac.Status.Conditions = readyStatus(metav1.ConditionFalse, sitev1.ReasonClusterNotReady, "WorkersReady is False: w-1, w-2 provisioning")
		ac.Status.Hosts = []sitev1.HostStatus{
			{Name: "cp-0", ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3", Hardware: cp0Hardware},
			{Name: "w-1", ProvisioningState: "provisioning"},
			{Name: "w-2", ProvisioningState: "registering", Message: "BMC did not answer"},
		}
	})
	// Each host's report lands in its Host.
	waitHostReport(t, ns, "w-1", &fleetv1.HostClusterStatus{ProvisioningState: "provisioning"})
	waitHostReport(t, ns, "w-2", &fleetv1.HostClusterStatus{ProvisioningState: "registering", Message: "BMC did not answer"})
	waitHostReport(t, ns, "cp-0", &fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3", Hardware: cp0Hardware})
	waitHostReport(t, ns, "w-0", nil)
	got = waitSite(t, key, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReady, "w-1, w-2 provisioning"))
	ac = waitCluster(t, siteCP, site.Name, func(*sitev1.ApplicationCluster) error { return nil })
	want := fleetv1.ClusterSummary{
		Phase: sitev1.ClusterProvisioning, ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}, Workers: sitev1.NodeCounts{Ready: 1, Total: 3},
		ObservedGeneration: ac.Generation, LastError: "w-2: BMC did not answer", Message: "WorkersReady is False: w-1, w-2 provisioning",
	}
	if got.Status.Cluster == nil || *got.Status.Cluster != want {
		t.Errorf("status.cluster = %+v, want %+v", got.Status.Cluster, want)
	}
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Phase, ac.Status.KubernetesVersion, ac.Status.LastError = sitev1.ClusterProvisioned, "v1.36.3", ""
		ac.Status.Workers = sitev1.NodeCounts{Ready: 3, Total: 3}
		ac.Status.Conditions = readyStatus(metav1.ConditionTrue, sitev1.ReasonClusterReady, "4 nodes ready")
	})
	got = waitSite(t, key, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady, "4 nodes ready"))
	if c := got.Status.Cluster; c.Phase != sitev1.ClusterProvisioned || c.KubernetesVersion != "v1.36.3" || c.LastError != "" {
		t.Errorf("status.cluster = %+v", c)
	}
	testutil.Eventually(t, wait, func() error { return hasEvent(t, ns, site.Name, fleetv1.ReasonClusterReady) })

	// Deleting a Host takes it out of the spec; its Secret stays while the site still reports the
	// host (it is deprovisioning it), and goes when the site no longer does.
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Hosts = []sitev1.HostStatus{{Name: "cp-0", ProvisioningState: "provisioned", Ready: true}, {Name: "w-2", ProvisioningState: "provisioned"}}
	})
	waitHostReport(t, ns, "w-1", nil)
	if err := global.Client.Delete(t.Context(), &fleetv1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-2"}}); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, siteCP, site.Name, hostsAre("cp-0", "w-0", "w-1"))
	heartbeats(t, key, 1)
	if _, err := siteSecret(t, siteCP, "w-2"); err != nil {
		t.Errorf("w-2's Secret went while the site still reports w-2: %v", err)
	}
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) { ac.Status.Hosts = nil })
	waitSecretGone(t, siteCP, "w-2")
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, "3 host(s)"))

	// Removing spec.cluster deletes the ApplicationCluster; the Secrets stay until the site has
	// taken the cluster down (here: until the test removes the local controller's finalizer).
	ac = waitCluster(t, siteCP, site.Name, func(*sitev1.ApplicationCluster) error { return nil })
	controlplane.Update(t, siteCP.Client, ac, func(ac *sitev1.ApplicationCluster) {
		controllerutil.AddFinalizer(ac, sitev1.ApplicationClusterFinalizer)
	})
	controlplane.Update(t, global.Client, site, func(site *fleetv1.Site) { site.Spec.Cluster = nil })
	ac = waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.DeletionTimestamp.IsZero() {
			return fmt.Errorf("ApplicationCluster %s is not being deleted", ac.Name)
		}
		return nil
	})
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonClusterDeleting))
	for _, h := range []string{"cp-0", "w-0", "w-1"} {
		if _, err := siteSecret(t, siteCP, h); err != nil {
			t.Errorf("Secret of %s went before the cluster was down: %v", h, err)
		}
	}
	controlplane.Update(t, siteCP.Client, ac, func(ac *sitev1.ApplicationCluster) {
		controllerutil.RemoveFinalizer(ac, sitev1.ApplicationClusterFinalizer)
	})
	for _, h := range []string{"cp-0", "w-0", "w-1"} {
		waitSecretGone(t, siteCP, h)
	}
	got = waitSite(t, key, func(s *fleetv1.Site) error {
		if s.Status.Cluster != nil || meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteClusterSyncedCondition) != nil ||
			meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteClusterReadyCondition) != nil {
			return fmt.Errorf("cluster status left: %+v, conditions %+v", s.Status.Cluster, s.Status.Conditions)
		}
		return nil
	})
	if !meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1.SiteReadyCondition) {
		t.Errorf("Site not Ready after its cluster was removed: %+v", got.Status.Conditions)
	}
	waitHostReport(t, ns, "cp-0", nil)
}

// waitHostReport waits until the Host's status.cluster is want.
func waitHostReport(t *testing.T, ns, name string, want *fleetv1.HostClusterStatus) {
	t.Helper()
	testutil.Eventually(t, wait, func() error {
		h := &fleetv1.Host{}
		if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(h.Status.Cluster, want) {
			return fmt.Errorf("host %s status.cluster = %+v, want %+v", name, h.Status.Cluster, want)
		}
		if !meta.IsStatusConditionTrue(h.Status.Conditions, fleetv1.HostReadyCondition) {
			return fmt.Errorf("host %s lost its Ready condition: %+v", name, h.Status.Conditions)
		}
		return nil
	})
}

// TestUnreachableSiteKeepsClusterSummary stops one of two sites: it keeps its last summary with
// ClusterReady Unknown, the other site's pushes go on meanwhile, and what changed while it was
// down is pushed when it is back.
func TestUnreachableSiteKeepsClusterSummary(t *testing.T) {
	t.Parallel()
	cpA, kcA := startClusterSite(t)
	cpB, kcB := startClusterSite(t)
	ns := global.Namespace(t)
	siteA, _ := register(t, ns, "site-a", kcA, withCluster)
	siteB, _ := register(t, ns, "site-b", kcB, withCluster)
	keyA, keyB := client.ObjectKeyFromObject(siteA), client.ObjectKeyFromObject(siteB)
	createBMCHost(t, ns, "a-cp-0", siteA.Name, fleetv1.RoleControlPlane, mac(ns, 0x0401), creds("a-cp-0"))
	createBMCHost(t, ns, "b-cp-0", siteB.Name, fleetv1.RoleControlPlane, mac(ns, 0x0411), creds("b-cp-0"))

	waitCluster(t, cpA, siteA.Name, hostsAre("a-cp-0"))
	waitCluster(t, cpB, siteB.Name, hostsAre("b-cp-0"))
	for _, cp := range []*controlplane.ControlPlane{cpA, cpB} {
		name := map[*controlplane.ControlPlane]string{cpA: siteA.Name, cpB: siteB.Name}[cp]
		reportStatus(t, cp, name, func(ac *sitev1.ApplicationCluster) {
			ac.Status.Phase = sitev1.ClusterProvisioned
			ac.Status.ControlPlane = sitev1.NodeCounts{Ready: 1, Total: 1}
			ac.Status.Conditions = readyStatus(metav1.ConditionTrue, sitev1.ReasonClusterReady, "1 node ready")
		})
	}
	last := waitSite(t, keyA, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady)).Status.Cluster
	waitSite(t, keyB, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady))

	if err := cpA.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	got := waitSite(t, keyA, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked))
	if got.Status.Cluster == nil || *got.Status.Cluster != *last {
		t.Errorf("unreachable site lost its last summary: %+v, want %+v", got.Status.Cluster, last)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteClusterSyncedCondition); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("ClusterSynced of an unreachable site = %+v, want Unknown", c)
	}

	// While site A is down, site B takes a new worker at once, and A's change waits.
	start := time.Now()
	createBMCHost(t, ns, "b-w-0", siteB.Name, fleetv1.RoleWorker, mac(ns, 0x0412), creds("b-w-0"))
	createBMCHost(t, ns, "a-w-0", siteA.Name, fleetv1.RoleWorker, mac(ns, 0x0402), creds("a-w-0"))
	waitCluster(t, cpB, siteB.Name, hostsAre("b-cp-0", "b-w-0"))
	if took := time.Since(start); took > heartbeat+timeout {
		t.Errorf("site B's push took %s while site A was down", took)
	} else {
		t.Logf("site B's push took %s while site A was down", took.Round(time.Millisecond))
	}
	got = waitSite(t, keyA, conditionIs(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable))
	if *got.Status.Cluster != *last {
		t.Errorf("unreachable site's summary changed: %+v", got.Status.Cluster)
	}

	if err := cpA.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, cpA, siteA.Name, hostsAre("a-cp-0", "a-w-0"))
	waitSecretData(t, cpA, "a-w-0", creds("a-w-0"))
	// The site has not reconciled the new generation: the mirror says so, then Ready again.
	waitSite(t, keyA, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterUpdatePending))
	reportStatus(t, cpA, siteA.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Workers = sitev1.NodeCounts{Ready: 1, Total: 1}
	})
	waitSite(t, keyA, conditionIs(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady))
	waitSite(t, keyA, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced))
}
