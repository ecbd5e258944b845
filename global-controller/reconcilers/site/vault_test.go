package site_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// putVault writes an entry under the reconciler's prefix, as an operator would with `vault kv put`.
func putVault(t *testing.T, ns, path string, data map[string]string) {
	t.Helper()
	if _, err := vaultref.New(vault.Client, "secret", vaultPrefix).Write(t.Context(), ns, path, data); err != nil {
		t.Fatal(err)
	}
}

// createVaultHost creates a Host whose BMC credentials are the Vault entry bmc/<name>.
func createVaultHost(t *testing.T, ns, name, site string, role fleetv1.HostRole, mac string) {
	t.Helper()
	createRedfishHost(t, ns, name, site, role, mac, func(b *fleetv1.BMCDetails) {
		b.CredentialsVaultRef = &fleetv1.VaultReference{Path: "bmc/" + name}
	})
}

// TestVaultReferences: a Site whose kubeconfig and Hosts whose BMC credentials are entries of a
// real Vault. The site is reached with the kubeconfig from Vault; the credentials reach the site,
// follow a new version written in Vault (no event: the next reconcile reads it), and a missing
// entry is named; while Vault does not answer the site keeps working with what was read, and its
// status says so.
func TestVaultReferences(t *testing.T) {
	t.Parallel() // with the other cluster tests: it mostly waits for heartbeats
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	where := "secret/" + vaultPrefix + "/" + ns

	putVault(t, ns, "sites/plant-v", map[string]string{"kubeconfig": string(kc)})
	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plant-v"},
		Spec:       fleetv1.SiteSpec{KubeconfigVaultRef: &fleetv1.VaultKeyReference{Path: "sites/plant-v"}},
	}
	withCluster(site)
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(site)
	waitSite(t, key, conditionIs(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid,
		`kubeconfig from Vault entry `+where+`/sites/plant-v key "kubeconfig" loaded`))
	waitSite(t, key, conditionIs(fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady))

	putVault(t, ns, "bmc/cp-0", creds("cp-0"))
	createVaultHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, mac(ns, 0x0701))
	createVaultHost(t, ns, "w-0", site.Name, fleetv1.RoleWorker, mac(ns, 0x0702))

	// cp-0's credentials reach the site; w-0 has no entry yet and is left out, naming it.
	waitCluster(t, siteCP, site.Name, hostsAre("cp-0"))
	s := waitSecretData(t, siteCP, "cp-0", creds("cp-0"))
	if got := s.Annotations[sitev1.SourceAnnotation]; got != "Vault "+where+"/bmc/cp-0" {
		t.Errorf("source of the site's copy = %q", got)
	}
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonHostsLeftOut,
		"w-0 (Vault entry "+where+"/bmc/w-0 (spec.bmc.credentialsVaultRef.path) does not exist"))

	// The entry written: w-0 joins at the next reconcile (a heartbeat; Vault sends no event).
	putVault(t, ns, "bmc/w-0", creds("w-0"))
	waitCluster(t, siteCP, site.Name, hostsAre("cp-0", "w-0"))
	waitSecretData(t, siteCP, "w-0", creds("w-0"))

	// A new version of cp-0's credentials replaces the site's copy.
	rotated := map[string]string{"username": "admin-cp-0", "password": "rotated-pw-cp-0"}
	putVault(t, ns, "bmc/cp-0", rotated)
	waitSecretData(t, siteCP, "cp-0", rotated)

	// Vault frozen: the site stays reached with the kubeconfig read before, its hosts stay, and
	// KubeconfigValid says that Vault cannot be read.
	if err := vault.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := vault.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	waitSite(t, key, conditionIs(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid,
		"loaded before; Vault cannot be read now"))
	got := waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced,
		"cp-0 (its BMC credentials cannot be read from Vault", "w-0 (its BMC credentials cannot be read from Vault"))
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReachableCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Reachable while Vault is frozen: %+v", c)
	}
	waitCluster(t, siteCP, site.Name, hostsAre("cp-0", "w-0"))
	resume()
	waitSite(t, key, conditionIs(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid,
		`kubeconfig from Vault entry `+where+`/sites/plant-v key "kubeconfig" loaded`))
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, "2 host(s)"))

	// A Site naming an entry that does not exist, or a key the entry lacks.
	missing := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plant-missing"},
		Spec:       fleetv1.SiteSpec{KubeconfigVaultRef: &fleetv1.VaultKeyReference{Path: "sites/plant-missing"}},
	}
	if err := global.Client.Create(t.Context(), missing); err != nil {
		t.Fatal(err)
	}
	waitSite(t, client.ObjectKeyFromObject(missing), conditionIs(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, fleetv1.ReasonVaultEntryNotFound,
		"Vault entry "+where+"/sites/plant-missing (spec.kubeconfigVaultRef.path) does not exist"))
	putVault(t, ns, "sites/plant-missing", map[string]string{"other": "x"})
	waitSite(t, client.ObjectKeyFromObject(missing), conditionIs(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, fleetv1.ReasonVaultEntryNotFound,
		`Vault entry `+where+`/sites/plant-missing has no key "kubeconfig" (spec.kubeconfigVaultRef.key)`))
}
