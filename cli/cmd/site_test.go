package cmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// fleetFixture creates, in ns, two sites with their hosts and writes their status as the
// global controller would have (fixture data through the status subresource: no controller
// runs against this API server):
//
//   - store-1 is Ready; its application cluster is Provisioning and not Ready: one worker
//     (store-1-w1) is still provisioning and not a ready node, the webapp chart has 1 of 3 pods
//     ready, the BPA is draining a node to patch kubelet. Host store-1-w2 claims another
//     host's boot MAC.
//   - store-2 is unreachable; its cluster keeps the summary it last reported.
func fleetFixture(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	now := metav1.Now()
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now}
	}
	cluster := &fleetv1.SiteCluster{Release: "edge-1", Network: sitev1.ClusterNetwork{
		PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}, ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10"}}}
	sites := []struct {
		name   string
		region string
		status fleetv1.SiteStatus
	}{
		{"store-1", "eu-west", fleetv1.SiteStatus{
			Conditions: []metav1.Condition{
				cond(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid, ""),
				cond(fleetv1.SiteReachableCondition, metav1.ConditionTrue, fleetv1.ReasonAPIServerReachable, ""),
				cond(fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady, ""),
				cond(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, ""),
				cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReady, "WorkersNotReady: 1 of 2 workers ready"),
			},
			KubernetesVersion: "v1.36.3", LocalControllerVersion: "0.4.0", LastHeartbeatTime: &now, LastCheckTime: &now,
			Hosts: fleetv1.HostCounts{Total: 4, ControlPlane: 1, Worker: 3},
			LastOperation: &fleetv1.SiteOperationStatus{ID: "u1", Campaign: "install-eu", Action: fleetv1.ActionInstall, Stage: fleetv1.StageApply,
				Release: "edge-1", Phase: fleetv1.OperationInProgress, StartTime: &now, Message: "waiting for 1 worker"},
			Cluster: &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioning, KubernetesVersion: "v1.36.3",
				ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}, Workers: sitev1.NodeCounts{Ready: 1, Total: 2},
				Bootstrap: &sitev1.BootstrapStatus{Phase: sitev1.BootstrapPatching, Message: "2 nodes run kubelet 1.36.3; 2 charts deployed; patching kubelet 1.36.4",
					Step:             &sitev1.PatchStep{Package: "kubelet", Version: "1.36.4", Node: "store-1-w0", Index: 2, Of: 3, Step: "draining", Since: now},
					Packages:         []sitev1.InstalledPackage{{Name: "kubelet", Version: "1.36.3", SHA256: strings.Repeat("ab", 32)}},
					SecretEncryption: &sitev1.SecretEncryptionStatus{Key: "bpa-2", Phase: sitev1.RotationUseNew, Since: &now, Reencrypted: "bpa-1"},
					CertificateAuthorities: &sitev1.CARotationStatus{Rotations: 1, Phase: sitev1.RotationAddNew, Since: &now,
						Waiting: "restarting Deployment webapp/webapp so that their pods read the new cluster CA (0 of 1 rolled out)"},
					Charts: []sitev1.ChartRelease{
						{Name: "coredns", Namespace: "kube-system", Version: "1.12.0", Revision: 1, State: "deployed", PodsReady: 2, PodsDesired: 2},
						{Name: "webapp", Namespace: "webapp", Version: "0.1.0", Revision: 2, State: "deployed", PodsReady: 1, PodsDesired: 3},
					}}},
		}},
		{"store-2", "eu-north", fleetv1.SiteStatus{
			Conditions: []metav1.Condition{
				cond(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid, ""),
				cond(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable, "dial tcp 10.0.2.1:6443: i/o timeout"),
				cond(fleetv1.SiteReadyCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotReady, "Reachable is False"),
				cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked, "the site is not reachable"),
			},
			KubernetesVersion: "v1.36.3", LastHeartbeatTime: &now, LastCheckTime: &now,
			Cluster: &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: "v1.36.3",
				ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}},
		}},
	}
	for _, s := range sites {
		site := &fleetv1.Site{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name, Labels: map[string]string{"region": s.region}},
			Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: s.name + "-kubeconfig"},
				Location: &fleetv1.Location{Region: s.region}, Cluster: cluster},
		}
		if err := global.Client.Create(ctx, site); err != nil {
			t.Fatal(err)
		}
		site.Status = s.status
		if err := global.Client.Status().Update(ctx, site); err != nil {
			t.Fatal(err)
		}
	}
	hosts := []struct {
		name, site string
		role       fleetv1.HostRole
		mac        string
		conditions []metav1.Condition
		cluster    *fleetv1.HostClusterStatus
	}{
		{"store-1-cp", "store-1", fleetv1.RoleControlPlane, "52:54:00:01:00:01", nil,
			&fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3"}},
		{"store-1-w0", "store-1", fleetv1.RoleWorker, "52:54:00:01:00:02", nil,
			&fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3"}},
		{"store-1-w1", "store-1", fleetv1.RoleWorker, "52:54:00:01:00:03", nil,
			&fleetv1.HostClusterStatus{ProvisioningState: "provisioning", Message: "writing the OS image"}},
		{"store-1-w2", "store-1", fleetv1.RoleWorker, "52:54:00:01:00:02", []metav1.Condition{
			cond(fleetv1.HostSiteBoundCondition, metav1.ConditionTrue, fleetv1.ReasonSiteFound, ""),
			cond(fleetv1.HostBootMACUniqueCondition, metav1.ConditionFalse, fleetv1.ReasonDuplicateBootMAC, "host "+ns+"/store-1-w0 has this boot MAC"),
			cond(fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady, "BootMACUnique is False"),
		}, nil},
		{"store-2-cp", "store-2", fleetv1.RoleControlPlane, "52:54:00:02:00:01", nil,
			&fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3", Hardware: &sitev1.HostHardware{
				Manufacturer: "QEMU", ProductName: "Standard PC", CPUs: 2, CPUModel: "QEMU Virtual CPU", MemoryMiB: 4096,
				Disks: []sitev1.HostDisk{{Name: "/dev/vda", SizeBytes: 8 << 30, Type: "HDD"}},
				NICs:  []sitev1.HostNIC{{Name: "ens2", MAC: "52:54:00:02:00:01", SpeedGbps: 1}}}}},
	}
	for _, h := range hosts {
		host := &fleetv1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name},
			Spec: fleetv1.HostSpec{SiteRef: fleetv1.SiteReference{Name: h.site}, Role: h.role, BootMACAddress: h.mac,
				BMC: fleetv1.BMCDetails{Address: "redfish://bmc-" + h.name, CredentialsSecretRef: &fleetv1.SecretReference{Name: h.name + "-bmc"}}},
		}
		if err := global.Client.Create(ctx, host); err != nil {
			t.Fatal(err)
		}
		host.Status.Conditions = h.conditions
		if h.conditions == nil {
			host.Status.Conditions = []metav1.Condition{
				cond(fleetv1.HostSiteBoundCondition, metav1.ConditionTrue, fleetv1.ReasonSiteFound, ""),
				cond(fleetv1.HostBootMACUniqueCondition, metav1.ConditionTrue, fleetv1.ReasonBootMACUnique, ""),
				cond(fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady, ""),
			}
		}
		host.Status.Cluster = h.cluster
		if err := global.Client.Status().Update(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
}

// lines returns out's lines that contain every one of parts.
func lines(out string, parts ...string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			found = append(found, l)
		}
	}
	return found
}

// index is the position of the first line of out with every one of parts, or -1.
func index(out string, parts ...string) int {
	for i, l := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return i
		}
	}
	return -1
}

func TestSiteList(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)

	out, err := run(t, "site", "list", "-n", ns)
	if err != nil {
		t.Fatalf("site list: %v\n%s", err, out)
	}
	// The columns are the kind's printer columns, drawn by the API server.
	if index(out, "NAME", "READY", "REACHABLE", "VERSION", "HOSTS", "RELEASE", "OPERATION", "AGE") != 0 ||
		len(lines(out, "store-1", "True", "True", "v1.36.3", "edge-1", "InProgress")) != 1 ||
		len(lines(out, "store-2", "False", "False", "v1.36.3")) != 1 || strings.Contains(out, "REGION") {
		t.Errorf("site list:\n%s", out)
	}
	out, err = run(t, "site", "list", "-n", ns, "-o", "wide", "-l", "region=eu-north")
	if err != nil {
		t.Fatalf("site list -o wide: %v\n%s", err, out)
	}
	if index(out, "REGION", "CLUSTER", "LOCAL-CONTROLLER", "HEARTBEAT") != 0 || len(lines(out, "store-2", "eu-north", "Provisioned")) != 1 || strings.Contains(out, "store-1") {
		t.Errorf("site list -o wide -l region=eu-north:\n%s", out)
	}
	out, err = run(t, "site", "list", "-A", "-l", "region=eu-north")
	if err != nil {
		t.Fatalf("site list -A: %v\n%s", err, out)
	}
	if index(out, "NAMESPACE", "NAME") != 0 || len(lines(out, ns, "store-2")) != 1 {
		t.Errorf("site list -A:\n%s", out)
	}
	out, err = run(t, "site", "list", "-n", ns, "-l", "region=nowhere")
	if err != nil || !strings.Contains(out, "No sites found in namespace "+ns) {
		t.Errorf("site list of nothing: %v\n%s", err, out)
	}
}

// TestOutputFormats checks each structured format of a list and a describe verb, and the
// error that names the formats.
func TestOutputFormats(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)

	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	for _, format := range []string{"json", "yaml"} {
		out, err := run(t, "site", "list", "-n", ns, "-o", format)
		if err != nil {
			t.Fatalf("site list -o %s: %v\n%s", format, err, out)
		}
		if err := yaml.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("site list -o %s: %v\n%s", format, err, out)
		}
		if list.Kind != "SiteList" || len(list.Items) != 2 || list.Items[0].Kind != "Site" || list.Items[0].APIVersion != fleetv1.GroupVersion.String() {
			t.Errorf("site list -o %s: %+v", format, list)
		}
		if format == "json" && !json.Valid([]byte(out)) {
			t.Errorf("site list -o json is not JSON:\n%s", out)
		}

		out, err = run(t, "site", "describe", "store-1", "-n", ns, "-o", format)
		if err != nil {
			t.Fatalf("site describe -o %s: %v\n%s", format, err, out)
		}
		if err := yaml.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("site describe -o %s: %v\n%s", format, err, out)
		}
		// The Site and its four Hosts, not store-2's.
		if list.Kind != "List" || len(list.Items) != 5 || list.Items[0].Kind != "Site" || list.Items[0].Metadata.Name != "store-1" ||
			list.Items[1].Kind != "Host" || list.Items[1].APIVersion != fleetv1.GroupVersion.String() {
			t.Errorf("site describe -o %s: %+v", format, list)
		}
	}

	for _, c := range []struct{ args, want string }{
		{"site list -o jsonpath={.items[*].metadata.name}", "store-1 store-2"},
		{`site list -o jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Reachable")].status}{"\n"}{end}`, "store-1=True\nstore-2=False\n"},
		{"site describe store-2 -o jsonpath={.items[0].status.cluster.phase}", "Provisioned"},
		{"host list --site store-2 -o jsonpath={.items[*].metadata.name}", "store-2-cp"},
		{"host describe store-1-w2 -o jsonpath={.items[1].metadata.name}", "store-1"},
	} {
		args := strings.SplitN(c.args, " -o ", 2)
		out, err := run(t, append(strings.Fields(args[0]), "-n", ns, "-o", args[1])...)
		if err != nil || out != c.want {
			t.Errorf("%s: %v, got %q, want %q", c.args, err, out, c.want)
		}
	}

	for _, args := range [][]string{{"site", "list"}, {"site", "describe", "store-1"}, {"host", "list"}, {"release", "list"}, {"artifact", "list"}} {
		out, err := run(t, append(args, "-n", ns, "-o", "xml")...)
		if err == nil || !strings.Contains(err.Error(), `--output must be table (default), wide, json, yaml or jsonpath=TEMPLATE, got "xml"`) {
			t.Errorf("%v -o xml: %v\n%s", args, err, out)
		}
	}
	if out, err := run(t, "site", "list", "-n", ns, "-o", "jsonpath={.items["); err == nil || !strings.Contains(err.Error(), "--output jsonpath={.items[") {
		t.Errorf("site list with a bad jsonpath: %v\n%s", err, out)
	}
}

func TestSiteDescribe(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)

	out, err := run(t, "site", "describe", "store-1", "-n", ns)
	if err != nil {
		t.Fatalf("site describe: %v\n%s", err, out)
	}
	t.Logf("site describe store-1:\n%s", out)
	for _, want := range [][]string{
		{"NAME", "STATUS", "SINCE", "MESSAGE"},
		{"Site/store-1", "Ready", "Kubernetes v1.36.3, local controller 0.4.0, last heartbeat", "region eu-west"},
		{"Operation/install-eu", "InProgress", "install to release edge-1 (stage Apply): waiting for 1 worker"},
		{"Cluster", "Provisioning", "Kubernetes v1.36.3, release edge-1"},
		{"ClusterReady", "False", "ClusterNotReady: WorkersNotReady: 1 of 2 workers ready"},
		{"ControlPlane", "1/1"},
		{"Workers", "1/2"},
		{"Node/store-1-w1", "NotReady"},
		{"Node/store-1-w0", "Ready", "v1.36.3"},
		{"Bootstrap", "Patching", "2 nodes run kubelet 1.36.3; 2 charts deployed; patching kubelet 1.36.4"},
		{"Step", "draining", "kubelet 1.36.4 on node store-1-w0 (2 of 3)"},
		{"Package/kubelet", "Installed", "1.36.3"},
		{"SecretEncryption/bpa-2", "Rotating", "0 rotations done, phase UseNew of AddNew, UseNew, DropOld; Secrets stored under an older key or in clear are stored again"},
		{"CertificateAuthorities", "RollingOver", "1 roll-overs done, phase AddNew of AddNew (trust both), UseNew (new certificates), DropOld; waiting: restarting Deployment webapp/webapp"},
		{"Chart/webapp", "deployed", "0.1.0 in webapp, revision 2, pods 1/3 ready"},
		{"Chart/coredns", "deployed", "pods 2/2 ready"},
		{"Hosts", "4", "1 control plane, 3 workers"},
		{"Host/store-1-w1", "provisioning", "worker: writing the OS image"},
		{"Host/store-1-w2", "NotReported", "worker"},
		{"BootMACUnique", "False", "DuplicateBootMAC: host " + ns + "/store-1-w0 has this boot MAC"},
		{"Host/store-1-cp", "provisioned", "control-plane"},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("no one line with %q", want)
		}
	}
	// True conditions and digests only with -o wide.
	if strings.Contains(out, "ClusterSynced") || strings.Contains(out, "sha256:") || strings.Contains(out, "boot MAC 52:54") {
		t.Errorf("site describe without -o wide shows True conditions, digests or boot MACs:\n%s", out)
	}
	// Problems first: the cluster (not Ready) before the operation and the hosts; among the
	// workers the one not ready first; among the charts the one short of pods; among the hosts
	// the ones with a problem, then the one not reported, then the fine one.
	for _, order := range [][2]string{
		{"ClusterReady", "Operation/install-eu"}, {"Cluster ", "Hosts"}, {"Workers", "Bootstrap"}, {"Node/store-1-w1", "Node/store-1-w0"},
		{"Chart/webapp", "Chart/coredns"}, {"Host/store-1-w1", "Host/store-1-cp"}, {"Host/store-1-w2", "Host/store-1-cp"}, {"Host/store-1-w1", "Host/store-1-w0"},
	} {
		if a, b := index(out, order[0]), index(out, order[1]); a < 0 || b < 0 || a > b {
			t.Errorf("%q (line %d) is not before %q (line %d)", order[0], a, order[1], b)
		}
	}

	out, err = run(t, "site", "describe", "store-1", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatalf("site describe -o wide: %v\n%s", err, out)
	}
	for _, want := range [][]string{
		{"ClusterSynced", "True", "ClusterSynced"},
		{"Reachable", "True", "APIServerReachable"},
		{"Package/kubelet", "1.36.3  sha256:" + strings.Repeat("ab", 32)},
		{"Host/store-1-cp", "boot MAC 52:54:00:01:00:01, BMC redfish://bmc-store-1-cp"},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("site describe -o wide: no one line with %q\n%s", want, out)
		}
	}

	// An unreachable site says so, and its cluster is what it last reported.
	out, err = run(t, "site", "describe", "store-2", "-n", ns)
	if err != nil {
		t.Fatalf("site describe: %v\n%s", err, out)
	}
	t.Logf("site describe store-2:\n%s", out)
	for _, want := range [][]string{
		{"Site/store-2", "Unreachable", "last heartbeat"},
		{"Reachable", "False", "APIServerUnreachable: dial tcp 10.0.2.1:6443: i/o timeout"},
		{"Cluster", "Provisioned", "as last reported, Kubernetes v1.36.3"},
		{"ClusterReady", "Unknown", "NotChecked: the site is not reachable"},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("no one line with %q", want)
		}
	}
	if strings.Contains(strings.ToLower(out), "fail") {
		t.Errorf("an unreachable site is described as failed:\n%s", out)
	}
	if a, b := index(out, "Reachable"), index(out, "Cluster"); a < 0 || a > b {
		t.Errorf("the site's problem is not first:\n%s", out)
	}

	if out, err := run(t, "site", "describe", "store-9", "-n", ns); err == nil || err.Error() != `site "store-9" not found in namespace "`+ns+`"` {
		t.Errorf("describe of a site that does not exist: %v\n%s", err, out)
	}
}

func TestHostListAndDescribe(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)

	out, err := run(t, "host", "list", "-n", ns, "--site", "store-1")
	if err != nil {
		t.Fatalf("host list --site: %v\n%s", err, out)
	}
	if index(out, "NAME", "SITE", "ROLE", "BOOT-MAC", "READY", "PROVISIONING") != 0 || len(lines(out, "store-1-")) != 4 || strings.Contains(out, "store-2") ||
		len(lines(out, "store-1-w1", "worker", "52:54:00:01:00:03", "True", "provisioning")) != 1 {
		t.Errorf("host list --site store-1:\n%s", out)
	}
	out, err = run(t, "host", "list", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatalf("host list -o wide: %v\n%s", err, out)
	}
	if len(lines(out, "store-")) != 5 || len(lines(out, "store-1-w2", "False", "HostNotReady", "redfish://bmc-store-1-w2")) != 1 {
		t.Errorf("host list -o wide:\n%s", out)
	}
	if out, err := run(t, "host", "list", "-n", ns, "--site", "x"); err == nil || err.Error() != `site "x" not found in namespace "`+ns+`"` {
		t.Errorf("host list --site of a site that does not exist: %v\n%s", err, out)
	}
	if out, err := run(t, "host", "list", "-A", "--site", "x"); err == nil || err.Error() != `site "x" not found in any namespace` {
		t.Errorf("host list -A --site of a site that does not exist: %v\n%s", err, out)
	}
	// Other tests' namespaces may have a store-1 too.
	if out, err := run(t, "host", "list", "-A", "--site", "store-1"); err != nil || len(lines(out, ns, "store-1-")) != 4 || strings.Contains(out, "store-2") {
		t.Errorf("host list -A --site store-1: %v\n%s", err, out)
	}

	out, err = run(t, "host", "describe", "store-1-w2", "-n", ns)
	if err != nil {
		t.Fatalf("host describe: %v\n%s", err, out)
	}
	t.Logf("host describe store-1-w2:\n%s", out)
	for _, want := range [][]string{
		{"Host/store-1-w2", "NotReported", "worker"},
		{"BootMACUnique", "False", "DuplicateBootMAC"},
		{"Ready", "False", "HostNotReady: BootMACUnique is False"},
		{"Site/store-1", "Ready"},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("no one line with %q", want)
		}
	}
	out, err = run(t, "host", "describe", "store-2-cp", "-n", ns)
	if err != nil {
		t.Fatalf("host describe: %v\n%s", err, out)
	}
	for _, want := range [][]string{{"Host/store-2-cp", "provisioned", "control-plane"}, {"Site/store-2", "Unreachable"}, {"Node/store-2-cp", "Ready", "v1.36.3"},
		{"Hardware", "Inspected", "2 CPUs, 4Gi memory, 1 disk (8Gi), 1 NIC"}} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("host describe store-2-cp: no one line with %q\n%s", want, out)
		}
	}
	if a, b := index(out, "Site/store-2"), index(out, "Node/store-2-cp"); a < 0 || a > b {
		t.Errorf("the unreachable site is not first:\n%s", out)
	}
	if strings.Contains(out, "Disk/") {
		t.Errorf("host describe store-2-cp lists the disks without -o wide:\n%s", out)
	}
	// -o wide: each disk and NIC, the system and the CPU model; host list -o wide: CPUs and memory.
	out, err = run(t, "host", "describe", "store-2-cp", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatalf("host describe -o wide: %v\n%s", err, out)
	}
	for _, want := range [][]string{{"Hardware", "QEMU Standard PC", "CPU QEMU Virtual CPU"}, {"Disk//dev/vda", "8Gi", "HDD"}, {"NIC/ens2", "52:54:00:02:00:01, 1 Gbps"}} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("host describe store-2-cp -o wide: no one line with %q\n%s", want, out)
		}
	}
	out, err = run(t, "host", "list", "-n", ns, "-o", "wide")
	if err != nil || index(out, "CPUS", "MEMORY-MIB") < 0 || len(lines(out, "store-2-cp", "2", "4096")) != 1 {
		t.Errorf("host list -o wide: no CPUs and memory of store-2-cp: %v\n%s", err, out)
	}
	if out, err := run(t, "host", "describe", "nope", "-n", ns); err == nil || err.Error() != `host "nope" not found in namespace "`+ns+`"` {
		t.Errorf("describe of a host that does not exist: %v\n%s", err, out)
	}
}

// TestSiteRotate: rotate-key and rotate-ca each raise their own count of the Site's
// spec.cluster.rotations by one.
func TestSiteRotate(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)
	asked := func() sitev1.ClusterRotations {
		t.Helper()
		s := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "store-1"}, s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.Cluster.Rotations == nil {
			return sitev1.ClusterRotations{}
		}
		return *s.Spec.Cluster.Rotations
	}
	for want := int64(1); want <= 2; want++ {
		out, err := run(t, "site", "rotate-key", "store-1", "-n", ns)
		if err != nil || !strings.Contains(out, fmt.Sprintf("site %s/store-1: Secret encryption key rotation %d asked", ns, want)) {
			t.Fatalf("site rotate-key: %v\n%s", err, out)
		}
		if got := asked(); got != (sitev1.ClusterRotations{SecretEncryptionKey: want}) {
			t.Errorf("spec.cluster.rotations = %+v, want secretEncryptionKey %d", got, want)
		}
	}
	out, err := run(t, "site", "rotate-ca", "store-1", "-n", ns)
	if err != nil || !strings.Contains(out, fmt.Sprintf("site %s/store-1: CA roll-over 1 asked", ns)) {
		t.Fatalf("site rotate-ca: %v\n%s", err, out)
	}
	if got := asked(); got != (sitev1.ClusterRotations{SecretEncryptionKey: 2, CertificateAuthorities: 1}) {
		t.Errorf("after rotate-ca spec.cluster.rotations = %+v, want certificateAuthorities 1 beside secretEncryptionKey 2", got)
	}

	bare := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"},
		Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "bare-kubeconfig"}}}
	if err := global.Client.Create(t.Context(), bare); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "site", "rotate-key", "bare", "-n", ns); err == nil || !strings.Contains(err.Error(), "has no spec.cluster") {
		t.Errorf("rotate-key of a site without a cluster: %v\n%s", err, out)
	}
	if out, err := run(t, "site", "rotate-key", "store-9", "-n", ns); err == nil || err.Error() != `site "store-9" not found in namespace "`+ns+`"` {
		t.Errorf("rotate-key of a site that does not exist: %v\n%s", err, out)
	}
	if out, err := run(t, "site", "rotate-ca", "bare", "-n", ns); err == nil || !strings.Contains(err.Error(), "has no spec.cluster: it has no application cluster to ask a CA roll-over of") {
		t.Errorf("rotate-ca of a site without a cluster: %v\n%s", err, out)
	}
	if got := asked(); got != (sitev1.ClusterRotations{SecretEncryptionKey: 2, CertificateAuthorities: 1}) {
		t.Errorf("after the refusals spec.cluster.rotations = %+v, want them unchanged", got)
	}
}
