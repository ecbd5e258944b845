package site

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func readyHost(name string, ready metav1.ConditionStatus) *fleetv1.Host {
	h := &fleetv1.Host{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		h.Status.Conditions = []metav1.Condition{{Type: fleetv1.HostReadyCondition, Status: ready, Message: "because"}}
	}
	return h
}

func TestUnusable(t *testing.T) {
	tests := []struct {
		name string
		host *fleetv1.Host
		want string // substring; "" means usable
	}{
		{"ready", readyHost("w-0", metav1.ConditionTrue), ""},
		{"not ready", readyHost("w-0", metav1.ConditionFalse), "Ready is False: because"},
		{"not checked yet", readyHost("w-0", ""), "not checked"},
		{"dotted name", readyHost("w.0", metav1.ConditionTrue), "not a valid node name"},
		{"long name", readyHost(strings.Repeat("a", 64), metav1.ConditionTrue), "not a valid node name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unusable(tt.host)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("unusable = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSortHostsControlPlaneFirstThenName(t *testing.T) {
	hosts := []sitev1.ClusterHost{
		{Name: "b", Role: sitev1.RoleWorker}, {Name: "z", Role: sitev1.RoleControlPlane},
		{Name: "a", Role: sitev1.RoleWorker}, {Name: "c", Role: sitev1.RoleControlPlane},
	}
	sortHosts(hosts)
	var got []string
	for _, h := range hosts {
		got = append(got, h.Name)
	}
	if strings.Join(got, ",") != "c,z,a,b" {
		t.Errorf("order = %v, want c,z,a,b", got)
	}
}

func TestClusterHostFromHost(t *testing.T) {
	h := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0"},
		Spec: fleetv1.HostSpec{Role: fleetv1.RoleWorker, BootMACAddress: "52:54:00:AB:CD:EF", BMC: fleetv1.BMCDetails{
			Address: "redfish+https://10.0.0.5/redfish/v1/Systems/1", CredentialsSecretRef: &fleetv1.SecretReference{Name: "anything"},
			DisableCertificateVerification: true,
		}},
	}
	want := sitev1.ClusterHost{Name: "w-0", Role: sitev1.RoleWorker, BootMACAddress: "52:54:00:ab:cd:ef", BMC: sitev1.BMC{
		Address: "redfish+https://10.0.0.5/redfish/v1/Systems/1", CredentialsName: "w-0-bmc", DisableCertificateVerification: true,
	}}
	if got := clusterHost(h); got != want {
		t.Errorf("clusterHost = %+v, want %+v", got, want)
	}
}

func siteCluster() *fleetv1.SiteCluster {
	return &fleetv1.SiteCluster{
		KubernetesVersion: "v1.36.3",
		OSImage:           &sitev1.OSImage{SHA256: strings.Repeat("a", 64)},
		Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
			ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10"}},
	}
}

func testContent() content {
	what, _ := inlineContent(siteCluster())
	return what
}

func TestDesiredSpecDefaultsAndOperationGeneration(t *testing.T) {
	hosts := []sitev1.ClusterHost{{Name: "cp-0", Role: sitev1.RoleControlPlane}}
	spec := desiredSpec(siteCluster(), testContent(), hosts, 0, nil)
	if spec.Network.ControlPlaneEndpoint.Port != 6443 || spec.HostRemovalPolicy != sitev1.RemovalDeprovision {
		t.Errorf("defaults not filled: port %d, policy %q", spec.Network.ControlPlaneEndpoint.Port, spec.HostRemovalPolicy)
	}
	if spec.OperationGeneration != 0 {
		t.Errorf("operationGeneration = %d, want 0", spec.OperationGeneration)
	}
	existing := &sitev1.ApplicationCluster{Spec: sitev1.ApplicationClusterSpec{OperationGeneration: 7}}
	if got := desiredSpec(siteCluster(), testContent(), hosts, 3, existing).OperationGeneration; got != 7 {
		t.Errorf("operationGeneration went down to %d, want the site's 7 kept", got)
	}
	if got := desiredSpec(siteCluster(), testContent(), hosts, 9, existing).OperationGeneration; got != 9 {
		t.Errorf("operationGeneration = %d, want 9", got)
	}

	// Applying the same spec twice changes nothing the second time.
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	ac := &sitev1.ApplicationCluster{}
	if !applyClusterSpec(ac, site, spec, "") {
		t.Fatal("first apply reported no change")
	}
	if applyClusterSpec(ac, site, desiredSpec(siteCluster(), testContent(), hosts, 0, nil), "") {
		t.Error("second apply of the same spec reported a change")
	}
	if !managed(ac) || ac.Annotations[sitev1.SourceAnnotation] != "Site ns/s" {
		t.Errorf("marks missing: labels %v annotations %v", ac.Labels, ac.Annotations)
	}
}

func TestBMCSecretCopy(t *testing.T) {
	const source = "Secret ns/cp-0-creds"
	fp := fingerprint("u1", "10")
	s := &corev1.Secret{}
	if bmcSecretCurrent(nil, "c", "cp-0", fp) {
		t.Error("a missing copy is current")
	}
	if !applyBMCSecret(s, source, fp, "c", "cp-0", "admin", "secret") {
		t.Fatal("first copy reported no change")
	}
	if string(s.Data["username"]) != "admin" || string(s.Data["password"]) != "secret" || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("copy = %v %s", s.Data, s.Type)
	}
	if strings.Contains(s.Annotations[sitev1.DataHashAnnotation], "secret") {
		t.Error("the password shows in an annotation")
	}
	if !bmcSecretCurrent(s, "c", "cp-0", fp) {
		t.Error("a fresh copy is not current")
	}
	if applyBMCSecret(s, source, fp, "c", "cp-0", "admin", "secret") {
		t.Error("copying the same data again reported a change")
	}

	tests := []struct {
		name   string
		change func(*corev1.Secret)
		fp     string
	}{
		{"source changed", func(*corev1.Secret) {}, fingerprint("u1", "11")},
		{"source recreated", func(*corev1.Secret) {}, fingerprint("u2", "10")},
		{"source moved to Vault", func(*corev1.Secret) {}, vaultFingerprint("secret/edgefleet/global/ns/bmc/cp-0", 1)},
		{"password changed on the site", func(s *corev1.Secret) { s.Data["password"] = []byte("other") }, fp},
		{"key added on the site", func(s *corev1.Secret) { s.Data["extra"] = []byte("x") }, fp},
		{"label removed on the site", func(s *corev1.Secret) { delete(s.Labels, sitev1.ManagedByLabel) }, fp},
		{"other host", func(s *corev1.Secret) { s.Labels[sitev1.HostLabel] = "w-0" }, fp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.DeepCopy()
			tt.change(c)
			if bmcSecretCurrent(c, "c", "cp-0", tt.fp) {
				t.Error("copy counted as current")
			}
		})
	}

	if _, _, why := credentials(`BMC Secret "x"`, func(k string) string { return map[string]string{"username": "a"}[k] }); why != `BMC Secret "x" has no key "password" or it is empty` {
		t.Errorf("credentials without password: %q", why)
	}

	// A copy from a Vault entry: the same password from another entry hashes differently.
	vs := &corev1.Secret{}
	vfp := vaultFingerprint("secret/edgefleet/global/ns/bmc/cp-0", 3)
	if !applyBMCSecret(vs, "Vault secret/edgefleet/global/ns/bmc/cp-0", vfp, "c", "cp-0", "admin", "secret") || !bmcSecretCurrent(vs, "c", "cp-0", vfp) {
		t.Error("a copy from Vault is not current")
	}
	if vs.Annotations[sitev1.SourceAnnotation] != "Vault secret/edgefleet/global/ns/bmc/cp-0" || vs.Annotations[sitev1.SourceVersionAnnotation] != "vault:secret/edgefleet/global/ns/bmc/cp-0/v3" {
		t.Errorf("annotations of a copy from Vault: %v", vs.Annotations)
	}
	if other := dataHash(vaultFingerprint("secret/edgefleet/global/ns/bmc/w-0", 3), "admin", "secret"); other == vs.Annotations[sitev1.DataHashAnnotation] {
		t.Error("equal passwords of two entries hash alike")
	}
	if dataHash(vaultFingerprint("secret/edgefleet/global/ns/bmc/cp-0", 4), "admin", "secret") != vs.Annotations[sitev1.DataHashAnnotation] {
		t.Error("the salt changed with the entry's version")
	}
}

func TestClusterReady(t *testing.T) {
	ac := func(generation, observed int64, ready *metav1.Condition) *sitev1.ApplicationCluster {
		a := &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "edgefleet-system", Name: "s", Generation: generation}}
		a.Status.ObservedGeneration = observed
		if ready != nil {
			a.Status.Conditions = []metav1.Condition{*ready}
		}
		return a
	}
	readyCond := func(s metav1.ConditionStatus) *metav1.Condition {
		return &metav1.Condition{Type: "Ready", Status: s, Reason: "R", Message: "site says"}
	}
	bpa := func(a *sitev1.ApplicationCluster, phase sitev1.BootstrapPhase, observed int64) *sitev1.ApplicationCluster {
		a.Status.Bootstrap = &sitev1.BootstrapStatus{Phase: phase, ObservedGeneration: observed, Message: "package edge-hello runs on workers only, and the cluster has no worker"}
		return a
	}
	tests := []struct {
		name   string
		ac     *sitev1.ApplicationCluster
		status metav1.ConditionStatus
		reason string
	}{
		{"no cluster", nil, metav1.ConditionFalse, fleetv1.ReasonClusterNotReported},
		{"no Ready yet", ac(1, 0, nil), metav1.ConditionFalse, fleetv1.ReasonClusterNotReported},
		{"ready", ac(2, 2, readyCond(metav1.ConditionTrue)), metav1.ConditionTrue, fleetv1.ReasonClusterReady},
		{"ready for an older generation", ac(3, 2, readyCond(metav1.ConditionTrue)), metav1.ConditionFalse, fleetv1.ReasonClusterUpdatePending},
		{"not ready", ac(2, 2, readyCond(metav1.ConditionFalse)), metav1.ConditionFalse, fleetv1.ReasonClusterNotReady},
		{"unknown", ac(2, 2, readyCond(metav1.ConditionUnknown)), metav1.ConditionFalse, fleetv1.ReasonClusterNotReady},
		{"nodes ready, the BPA failed on this generation", bpa(ac(2, 2, readyCond(metav1.ConditionTrue)), sitev1.BootstrapFailed, 2), metav1.ConditionFalse, fleetv1.ReasonBootstrapFailed},
		{"nodes ready, the BPA failed on an older generation", bpa(ac(3, 3, readyCond(metav1.ConditionTrue)), sitev1.BootstrapFailed, 2), metav1.ConditionTrue, fleetv1.ReasonClusterReady},
		{"nodes ready, the BPA installed", bpa(ac(2, 2, readyCond(metav1.ConditionTrue)), sitev1.BootstrapInstalled, 2), metav1.ConditionTrue, fleetv1.ReasonClusterReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason, msg := clusterReady(tt.ac)
			if status != tt.status || reason != tt.reason {
				t.Errorf("clusterReady = %s %s (%s), want %s %s", status, reason, msg, tt.status, tt.reason)
			}
			if tt.ac != nil && len(tt.ac.Status.Conditions) > 0 && !strings.Contains(msg, "site says") {
				t.Errorf("message %q does not carry the site's", msg)
			}
			if tt.reason == fleetv1.ReasonBootstrapFailed && !strings.Contains(msg, "has no worker") {
				t.Errorf("message %q does not carry the BPA's", msg)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	ac := &sitev1.ApplicationCluster{Status: sitev1.ApplicationClusterStatus{
		Phase: sitev1.ClusterProvisioning, ObservedGeneration: 4, ObservedOperationGeneration: 2, KubernetesVersion: "v1.36.3",
		ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}, Workers: sitev1.NodeCounts{Total: 2}, LastError: "boom",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Message: "workers provisioning"}},
	}}
	want := fleetv1.ClusterSummary{
		Phase: sitev1.ClusterProvisioning, ObservedGeneration: 4, ObservedOperationGeneration: 2, KubernetesVersion: "v1.36.3",
		ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}, Workers: sitev1.NodeCounts{Total: 2}, LastError: "boom",
		Message: "workers provisioning",
	}
	if got := summary(ac); *got != want {
		t.Errorf("summary = %+v, want %+v", *got, want)
	}

	hw := &sitev1.HostHardware{CPUs: 2, MemoryMiB: 4096, Disks: []sitev1.HostDisk{{Name: "/dev/vda", SizeBytes: 8 << 30}}}
	ac.Status.Hosts = []sitev1.HostStatus{{Name: "w-0", Role: sitev1.RoleWorker, ProvisioningState: "provisioned", Machine: "m", Version: "v1.36.3", Ready: true, Message: "ok", Hardware: hw}}
	if got := hostReport(ac, "w-0"); got == nil || !reflect.DeepEqual(*got, fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3", Message: "ok", Hardware: hw}) || got.Hardware == hw {
		t.Errorf("hostReport(w-0) = %+v, want the report with a copy of its hardware", got)
	}
	if got := hostReport(ac, "w-1"); got != nil {
		t.Errorf("hostReport of an unreported host = %+v, want nil", got)
	}
	if got := hostReport(nil, "w-0"); got != nil {
		t.Errorf("hostReport without a cluster = %+v, want nil", got)
	}
}

// TestReleaseContentCarriesEveryKindOfArtifact: what a Release names reaches the site's
// ApplicationCluster — packages, charts and container images alike.
func TestReleaseContentCarriesEveryKindOfArtifact(t *testing.T) {
	ref := func(c byte, name string) []sitev1.ArtifactRef {
		return []sitev1.ArtifactRef{{SHA256: strings.Repeat(string(c), 64), Name: name}}
	}
	r := &fleetv1.Release{Spec: fleetv1.ReleaseSpec{
		KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: strings.Repeat("0", 64)},
		Packages: ref('a', "kubelet"), Charts: ref('b', "coredns"), Images: ref('c', "pause"),
	}}
	spec := desiredSpec(siteCluster(), releaseContent(r), []sitev1.ClusterHost{{Name: "cp-0", Role: sitev1.RoleControlPlane}}, 0, nil)
	if spec.KubernetesVersion != "v1.36.3" || spec.OSImage != r.Spec.OSImage || !equality.Semantic.DeepEqual(
		[][]sitev1.ArtifactRef{spec.Packages, spec.Charts, spec.Images}, [][]sitev1.ArtifactRef{r.Spec.Packages, r.Spec.Charts, r.Spec.Images}) {
		t.Errorf("spec %+v, want the release's content", spec)
	}
	if got := len(spec.Artifacts()); got != 4 {
		t.Errorf("the cluster needs %d artifacts cached, want 4 (OS image, package, chart, image)", got)
	}
}

// TestDesiredSpecRotations: the Site's rotations reach the site, and never fewer than the site
// was asked for already (a rotation cannot be taken back).
func TestDesiredSpecRotations(t *testing.T) {
	hosts := []sitev1.ClusterHost{{Name: "cp-0", Role: sitev1.RoleControlPlane}}
	withRotations := func(r sitev1.ClusterRotations) *fleetv1.SiteCluster {
		c := siteCluster()
		c.Rotations = &r
		return c
	}
	asked := func(n int64) *fleetv1.SiteCluster {
		return withRotations(sitev1.ClusterRotations{SecretEncryptionKey: n})
	}
	at := func(n int64) *sitev1.ApplicationCluster {
		return &sitev1.ApplicationCluster{Spec: sitev1.ApplicationClusterSpec{Rotations: &sitev1.ClusterRotations{SecretEncryptionKey: n}}}
	}
	for _, tc := range []struct {
		name     string
		site     *fleetv1.SiteCluster
		existing *sitev1.ApplicationCluster
		want     *sitev1.ClusterRotations
	}{
		{"none asked", siteCluster(), nil, nil},
		{"none asked, none at the site", siteCluster(), &sitev1.ApplicationCluster{}, nil},
		{"asked", asked(1), nil, &sitev1.ClusterRotations{SecretEncryptionKey: 1}},
		{"asked once more", asked(2), at(1), &sitev1.ClusterRotations{SecretEncryptionKey: 2}},
		{"lowered on the Site", asked(1), at(2), &sitev1.ClusterRotations{SecretEncryptionKey: 2}},
		{"removed from the Site", siteCluster(), at(2), &sitev1.ClusterRotations{SecretEncryptionKey: 2}},
		// Each count on its own: a CA roll-over asked beside a key rotation the site has.
		{"a CA roll-over asked", withRotations(sitev1.ClusterRotations{CertificateAuthorities: 1}), at(2),
			&sitev1.ClusterRotations{SecretEncryptionKey: 2, CertificateAuthorities: 1}},
		{"a CA roll-over lowered", withRotations(sitev1.ClusterRotations{SecretEncryptionKey: 3}),
			&sitev1.ApplicationCluster{Spec: sitev1.ApplicationClusterSpec{Rotations: &sitev1.ClusterRotations{CertificateAuthorities: 2}}},
			&sitev1.ClusterRotations{SecretEncryptionKey: 3, CertificateAuthorities: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredSpec(tc.site, testContent(), hosts, 0, tc.existing).Rotations
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rotations %+v, want %+v", got, tc.want)
			}
		})
	}
}
