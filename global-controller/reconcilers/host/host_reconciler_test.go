package host_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const wait = 30 * time.Second

func createSite(t *testing.T, ns, name string) *fleetv1.Site {
	t.Helper()
	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: name + "-kubeconfig"}},
	}
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	return site
}

// createHost creates a Host and, first, its BMC credentials Secret.
func createHost(t *testing.T, ns, name, site, mac string) *fleetv1.Host {
	t.Helper()
	createBMCSecret(t, ns, name+"-bmc")
	return createHostOnly(t, ns, name, site, mac)
}

// createBMCSecret creates a BMC credentials Secret.
func createBMCSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"username": "admin", "password": "pw"}}
	if err := global.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// createHostOnly creates a Host whose BMC credentials are the Secret NAME-bmc, without it.
func createHostOnly(t *testing.T, ns, name, site, mac string) *fleetv1.Host {
	t.Helper()
	host := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1.HostSpec{
			SiteRef: fleetv1.SiteReference{Name: site}, Role: fleetv1.RoleWorker, BootMACAddress: mac,
			BMC: fleetv1.BMCDetails{Address: "redfish://192.0.2.10/redfish/v1/Systems/1", CredentialsSecretRef: &fleetv1.SecretReference{Name: name + "-bmc"}},
		},
	}
	if err := global.Client.Create(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	return host
}

// waitFor waits until the host's condition has this status and reason, and returns its message.
func waitFor(t *testing.T, key types.NamespacedName, condType string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	testutil.Eventually(t, wait, func() error {
		h := &fleetv1.Host{}
		if err := global.Client.Get(t.Context(), key, h); err != nil {
			return err
		}
		c := meta.FindStatusCondition(h.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("host %s: %s is %+v, want %s/%s", key, condType, c, status, reason)
		}
		msg = c.Message
		return nil
	})
	return msg
}

// TestDuplicateBootMACIsFlagged registers the same boot MAC twice, in two namespaces and with a
// different case: the later host is flagged naming the earlier one, and is freed once the
// earlier host is deleted.
func TestDuplicateBootMACIsFlagged(t *testing.T) {
	ns1, ns2 := global.Namespace(t), global.Namespace(t)
	createSite(t, ns1, "site-a")
	createSite(t, ns2, "site-b")
	first := createHost(t, ns1, "first", "site-a", "52:54:00:aa:bb:01")
	firstKey := client.ObjectKeyFromObject(first)
	waitFor(t, firstKey, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)

	// Creation times have a resolution of one second (ties go to the lower namespace/name):
	// make sure the second host is registered in a later second.
	time.Sleep(time.Until(first.CreationTimestamp.Add(1100 * time.Millisecond)))
	second := createHost(t, ns2, "second", "site-b", "52:54:00:AA:BB:01")
	secondKey := client.ObjectKeyFromObject(second)
	msg := waitFor(t, secondKey, fleetv1.HostBootMACUniqueCondition, metav1.ConditionFalse, fleetv1.ReasonDuplicateBootMAC)
	if !strings.Contains(msg, ns1+"/first") {
		t.Errorf("BootMACUnique message does not name the other host %s/first: %q", ns1, msg)
	}
	waitFor(t, secondKey, fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady)
	// The first host keeps its MAC.
	if msg := waitFor(t, firstKey, fleetv1.HostBootMACUniqueCondition, metav1.ConditionTrue, fleetv1.ReasonBootMACUnique); !strings.Contains(msg, "1 later host") {
		t.Errorf("the first host's BootMACUnique message does not mention the later claim: %q", msg)
	}
	waitFor(t, firstKey, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)

	// A third, unrelated MAC is not affected.
	third := createHost(t, ns2, "third", "site-b", "52:54:00:aa:bb:02")
	waitFor(t, client.ObjectKeyFromObject(third), fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)

	if err := global.Client.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, secondKey, fleetv1.HostBootMACUniqueCondition, metav1.ConditionTrue, fleetv1.ReasonBootMACUnique)
	waitFor(t, secondKey, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)
}

// TestHostBindsToItsSite registers a host before its site: it waits with SiteBound=False naming
// the site, and binds once the site exists.
func TestHostBindsToItsSite(t *testing.T) {
	ns := global.Namespace(t)
	host := createHost(t, ns, "early", "later-site", "52:54:00:cc:dd:01")
	key := client.ObjectKeyFromObject(host)
	msg := waitFor(t, key, fleetv1.HostSiteBoundCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotFound)
	if !strings.Contains(msg, `"later-site"`) || !strings.Contains(msg, "spec.siteRef.name") {
		t.Errorf("SiteBound message does not name the site and field: %q", msg)
	}
	waitFor(t, key, fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady)

	createSite(t, ns, "later-site")
	waitFor(t, key, fleetv1.HostSiteBoundCondition, metav1.ConditionTrue, fleetv1.ReasonSiteFound)
	waitFor(t, key, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)
}

// TestHostWithoutBMCSecretIsNotReady registers a host whose BMC credentials Secret does not
// exist: it is not Ready, and says which Secret is missing where; it turns Ready once the Secret
// is created (the Secret's watch, not a periodic recheck) and not Ready again once it is deleted.
func TestHostWithoutBMCSecretIsNotReady(t *testing.T) {
	ns := global.Namespace(t)
	createSite(t, ns, "site-a")
	host := createHostOnly(t, ns, "no-creds", "site-a", "52:54:00:ee:ff:01")
	key := client.ObjectKeyFromObject(host)
	msg := waitFor(t, key, fleetv1.HostBMCCredentialsCondition, metav1.ConditionFalse, fleetv1.ReasonBMCCredentialsNotFound)
	for _, want := range []string{`"no-creds-bmc"`, "spec.bmc.credentialsSecretRef.name", ns, `"username" and "password"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("BMCCredentialsFound message %q does not contain %q", msg, want)
		}
	}
	if msg := waitFor(t, key, fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady); !strings.Contains(msg, `"no-creds-bmc"`) {
		t.Errorf("Ready message %q does not name the missing Secret", msg)
	}

	secret := createBMCSecret(t, ns, "no-creds-bmc")
	waitFor(t, key, fleetv1.HostBMCCredentialsCondition, metav1.ConditionTrue, fleetv1.ReasonBMCCredentialsFound)
	waitFor(t, key, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady)

	if err := global.Client.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, fleetv1.HostBMCCredentialsCondition, metav1.ConditionFalse, fleetv1.ReasonBMCCredentialsNotFound)
	waitFor(t, key, fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady)
}
