package cmd

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// TestHostDescribeShowsMissingBMCSecret describes a host whose BMC credentials Secret does not
// exist, with the status the host controller writes then: the tree shows the condition that
// says so, and Ready with the reason, not only the Site's HostsLeftOut.
func TestHostDescribeShowsMissingBMCSecret(t *testing.T) {
	ns := global.Namespace(t)
	ctx := t.Context()
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-9"},
		Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "store-9-kubeconfig"}}}
	if err := global.Client.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	host := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-9-w0"},
		Spec: fleetv1.HostSpec{SiteRef: fleetv1.SiteReference{Name: "store-9"}, Role: fleetv1.RoleWorker, BootMACAddress: "52:54:00:09:00:01",
			BMC: fleetv1.BMCDetails{Address: "redfish://bmc-store-9-w0", CredentialsSecretRef: &fleetv1.SecretReference{Name: "store-9-w0-bmc"}}},
	}
	if err := global.Client.Create(ctx, host); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	missing := `BMC Secret "store-9-w0-bmc" (spec.bmc.credentialsSecretRef.name) does not exist in namespace "` + ns + `"`
	host.Status.Conditions = []metav1.Condition{
		{Type: fleetv1.HostSiteBoundCondition, Status: metav1.ConditionTrue, Reason: fleetv1.ReasonSiteFound, LastTransitionTime: now},
		{Type: fleetv1.HostBootMACUniqueCondition, Status: metav1.ConditionTrue, Reason: fleetv1.ReasonBootMACUnique, LastTransitionTime: now},
		{Type: fleetv1.HostBMCCredentialsCondition, Status: metav1.ConditionFalse, Reason: fleetv1.ReasonBMCCredentialsNotFound, Message: missing, LastTransitionTime: now},
		{Type: fleetv1.HostReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.ReasonHostNotReady, Message: "BMCCredentialsFound is False: " + missing, LastTransitionTime: now},
	}
	if err := global.Client.Status().Update(ctx, host); err != nil {
		t.Fatal(err)
	}
	for _, wide := range []bool{false, true} {
		args := []string{"host", "describe", "store-9-w0", "-n", ns}
		if wide {
			args = append(args, "-o", "wide")
		}
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("host describe: %v\n%s", err, out)
		}
		for _, want := range [][]string{
			{"BMCCredentialsFound", "False", "BMCCredentialsNotFound: " + missing},
			{"Ready", "False", "HostNotReady: BMCCredentialsFound is False"},
		} {
			if len(lines(out, want...)) != 1 {
				t.Errorf("host describe %s: no one line with %q\n%s", strings.Join(args[3:], " "), want, out)
			}
		}
	}
}
