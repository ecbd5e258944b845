package site_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// withNetworkOnly describes a site's cluster without saying what it runs: a campaign (here the
// test) sets the release.
func withNetworkOnly(s *fleetv1.Site) {
	withCluster(s)
	s.Spec.Cluster.KubernetesVersion, s.Spec.Cluster.OSImage = "", nil
}

func createRelease(t *testing.T, ns, name, version string, packages ...string) *fleetv1.Release {
	t.Helper()
	r := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: version, OSImage: sitev1.OSImage{SHA256: osImageSHA}},
	}
	for _, p := range packages {
		r.Spec.Packages = append(r.Spec.Packages, sitev1.ArtifactRef{SHA256: p, Name: "package " + p[:8]})
	}
	if err := global.Client.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// dispatch patches spec.operation (and, for Apply, spec.cluster.release) in one merge patch, as
// the campaign controller does. The operation replaces the last one whole: fields it leaves out
// are removed (a merge patch would keep them).
func dispatch(t *testing.T, key types.NamespacedName, op fleetv1.SiteOperation) {
	t.Helper()
	raw, err := json.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{"previousRelease": nil, "deadline": nil}
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"operation": fields}
	if op.Stage == fleetv1.StageApply {
		spec["cluster"] = map[string]any{"release": op.Release}
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := global.Client.Patch(t.Context(), site, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func operationIs(id string, phase fleetv1.OperationPhase, inMessage ...string) func(*fleetv1.Site) error {
	return func(s *fleetv1.Site) error {
		last := s.Status.LastOperation
		if last == nil || last.ID != id || last.Phase != phase {
			return fmt.Errorf("status.lastOperation = %+v, want %s %s", last, id, phase)
		}
		for _, m := range inMessage {
			if !strings.Contains(last.Message, m) {
				return fmt.Errorf("lastOperation message %q does not contain %q", last.Message, m)
			}
		}
		return nil
	}
}

// TestOperations follows the operations a campaign dispatches to one site: a site described
// without a release waits for one; a pre-cache pushes the release's ArtifactSet and ends
// PreCached when the site cache reports it; an apply carries the release with one raise of the
// operation generation, however often it is pushed, and succeeds when the site reports the
// cluster Ready at the release's version; an operation the site never finishes times out at its
// deadline and keeps that verdict; a host failure fails the operation with the site's reason.
func TestOperations(t *testing.T) {
	t.Parallel()
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	site, _ := register(t, ns, "store-7", kc, withNetworkOnly)
	key := client.ObjectKeyFromObject(site)
	createBMCHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, mac(ns, 0x0701), creds("cp-0"))

	// Nothing to run yet: nothing is pushed, and the condition says why.
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonReleaseNotSet, "campaign"))
	if err := siteCP.Client.Get(t.Context(), types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: site.Name}, &sitev1.ApplicationCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an ApplicationCluster was pushed without a release (err %v)", err)
	}

	pkg := strings.Repeat("ab", 32)
	createRelease(t, ns, "r1", "v1.36.3", pkg, osImageSHA) // the image listed again as a package is cached once

	// Pre-cache: the site gets an ArtifactSet of the release; PreCached once the cache says so.
	dispatch(t, key, fleetv1.SiteOperation{ID: "c1-precache", Campaign: "c1", Action: fleetv1.ActionInstall, Stage: fleetv1.StagePreCache,
		Release: "r1", DispatchTime: metav1.Now()})
	waitSite(t, key, operationIs("c1-precache", fleetv1.OperationPreCaching, "waiting for the site cache to take in ArtifactSet"))
	set := &sitev1.ArtifactSet{}
	setKey := types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: site.Name + "-precache"}
	if err := siteCP.Client.Get(t.Context(), setKey, set); err != nil {
		t.Fatal(err)
	}
	if len(set.Spec.Artifacts) != 2 || set.Spec.Artifacts[0].SHA256 != osImageSHA || set.Spec.Artifacts[1].SHA256 != pkg {
		t.Fatalf("pre-cache set lists %+v, want the OS image then the package", set.Spec.Artifacts)
	}
	controlplane.UpdateStatus(t, siteCP.Client, set, func(set *sitev1.ArtifactSet) {
		set.Status.ObservedGeneration = set.Generation
		set.Status.Cached = 2
		set.Status.Conditions = []metav1.Condition{{Type: sitev1.ArtifactSetReadyCondition, Status: metav1.ConditionTrue,
			Reason: sitev1.ReasonAllCached, Message: "2 of 2 cached", LastTransitionTime: metav1.Now()}}
	})
	waitSite(t, key, operationIs("c1-precache", fleetv1.OperationPreCached, "2 artifact(s)"))

	// Apply: the release reaches the ApplicationCluster with operation generation 1.
	dispatch(t, key, fleetv1.SiteOperation{ID: "c1", Campaign: "c1", Action: fleetv1.ActionInstall, Stage: fleetv1.StageApply,
		Release: "r1", DispatchTime: metav1.Now()})
	ac := waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.Spec.OperationGeneration != 1 || ac.Annotations[sitev1.OperationAnnotation] != "c1" {
			return fmt.Errorf("operationGeneration %d, annotation %q", ac.Spec.OperationGeneration, ac.Annotations[sitev1.OperationAnnotation])
		}
		return nil
	})
	if ac.Spec.KubernetesVersion != "v1.36.3" || len(ac.Spec.Packages) != 2 || ac.Spec.OSImage.SHA256 != osImageSHA {
		t.Errorf("ApplicationCluster does not carry release r1: %+v", ac.Spec)
	}
	waitSite(t, key, operationIs("c1", fleetv1.OperationInProgress, "operation generation 1"))
	// The polls between heartbeats read the ApplicationCluster; only heartbeats list the BMC
	// Secrets on the site (nothing about the hosts changed).
	// Three heartbeats after the first one seen span at least two intervals: eight polls. The
	// window may hold one more heartbeat, the one first seen.
	before := siteRequests(t, siteCP)
	heartbeats(t, key, 3)
	served := siteRequests(t, siteCP).Sub(before)
	gets, lists := served["GET applicationclusters"], served["LIST secrets"]
	if gets < 6 || lists > 4 {
		t.Errorf("over 3 to 4 heartbeats with an operation polled every %s: %.0f reads of the ApplicationCluster (want ≥ 6), %.0f listings of the BMC Secrets (want ≤ 4, one a heartbeat)",
			heartbeat/4, gets, lists)
	}
	if got := waitCluster(t, siteCP, site.Name, func(*sitev1.ApplicationCluster) error { return nil }); got.Spec.OperationGeneration != 1 {
		t.Fatalf("operation generation raised again to %d by later pushes", got.Spec.OperationGeneration)
	}
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.ObservedOperationGeneration = 1
		ac.Status.KubernetesVersion = "v1.36.3"
		ac.Status.Phase = sitev1.ClusterProvisioned
		ac.Status.Conditions = readyStatus(metav1.ConditionTrue, sitev1.ReasonClusterReady, "1 of 1 nodes ready")
	})
	done := waitSite(t, key, operationIs("c1", fleetv1.OperationSucceeded, "release r1"))
	if done.Status.LastOperation.CompletionTime == nil || done.Status.LastOperation.OperationGeneration != 1 {
		t.Errorf("succeeded operation lacks its completion time or generation: %+v", done.Status.LastOperation)
	}
	// The pre-cache set goes once the apply is over (the cluster's own set holds what it runs).
	testutil.Eventually(t, wait, func() error {
		if err := siteCP.Client.Get(t.Context(), setKey, &sitev1.ArtifactSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pre-cache set still on the site (err %w)", err)
		}
		return nil
	})

	// An upgrade the site never finishes times out at its deadline, and the verdict sticks.
	createRelease(t, ns, "r2", "v1.36.4", pkg)
	deadline := metav1.NewTime(time.Now().Add(3 * time.Second))
	dispatch(t, key, fleetv1.SiteOperation{ID: "c2", Campaign: "c2", Action: fleetv1.ActionUpgrade, Stage: fleetv1.StageApply,
		Release: "r2", PreviousRelease: "r1", DispatchTime: metav1.Now(), Deadline: &deadline})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.Spec.OperationGeneration != 2 || ac.Spec.KubernetesVersion != "v1.36.4" {
			return fmt.Errorf("operationGeneration %d, version %s", ac.Spec.OperationGeneration, ac.Spec.KubernetesVersion)
		}
		return nil
	})
	waitSite(t, key, operationIs("c2", fleetv1.OperationTimedOut, "deadline"))
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.ObservedOperationGeneration = 2
		ac.Status.KubernetesVersion = "v1.36.4"
	})
	heartbeats(t, key, 1)
	waitSite(t, key, operationIs("c2", fleetv1.OperationTimedOut))

	// A host failure the site reports fails the operation with the site's words.
	dispatch(t, key, fleetv1.SiteOperation{ID: "c3", Campaign: "c3", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
		Release: "r1", PreviousRelease: "r2", DispatchTime: metav1.Now()})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.Spec.OperationGeneration != 3 {
			return fmt.Errorf("operationGeneration %d", ac.Spec.OperationGeneration)
		}
		return nil
	})
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.ObservedOperationGeneration = 3
		ac.Status.Phase = sitev1.ClusterDegraded
		ac.Status.Conditions = []metav1.Condition{{Type: sitev1.HostsProvisionedCondition, Status: metav1.ConditionFalse,
			Reason: sitev1.ReasonHostFailed, Message: "cp-0: power on failed", LastTransitionTime: metav1.Now()}}
	})
	waitSite(t, key, operationIs("c3", fleetv1.OperationFailed, "cp-0: power on failed"))

	// A release that does not exist is said so, and nothing changes on the site.
	dispatch(t, key, fleetv1.SiteOperation{ID: "c4", Campaign: "c4", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
		Release: "r9", DispatchTime: metav1.Now()})
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonReleaseNotFound, `"r9"`))
	waitSite(t, key, operationIs("c4", fleetv1.OperationPending, "ReleaseNotFound"))
	if got := waitCluster(t, siteCP, site.Name, func(*sitev1.ApplicationCluster) error { return nil }); got.Spec.OperationGeneration != 3 {
		t.Errorf("operation generation moved to %d for a release that does not exist", got.Spec.OperationGeneration)
	}
}

// TestOperationsOnABPASite: on a site whose BPA builds the cluster (it reports
// status.bootstrap), an operation succeeds only once the BPA has installed the operation's
// generation — a patch leaves the cluster Ready while it rolls — and fails with the BPA's words
// when it reports the patch failed.
func TestOperationsOnABPASite(t *testing.T) {
	t.Parallel()
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	site, _ := register(t, ns, "store-8", kc, withNetworkOnly)
	key := client.ObjectKeyFromObject(site)
	createBMCHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, mac(ns, 0x0801), creds("cp-0"))
	createRelease(t, ns, "r1", "v1.36.3", strings.Repeat("a1", 32))
	createRelease(t, ns, "r2", "v1.36.3", strings.Repeat("a2", 32))
	ready := func(ac *sitev1.ApplicationCluster, opGen int64) {
		ac.Status.ObservedOperationGeneration = opGen
		ac.Status.KubernetesVersion = "v1.36.3"
		ac.Status.Phase = sitev1.ClusterProvisioned
		ac.Status.Conditions = readyStatus(metav1.ConditionTrue, sitev1.ReasonClusterReady, "1 of 1 nodes ready")
	}

	dispatch(t, key, fleetv1.SiteOperation{ID: "i1", Campaign: "i", Action: fleetv1.ActionInstall, Stage: fleetv1.StageApply,
		Release: "r1", DispatchTime: metav1.Now()})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.Annotations[sitev1.OperationAnnotation] != "i1" {
			return fmt.Errorf("operation %q not carried yet", "i1")
		}
		return nil
	})
	// Nodes Ready, but the BPA has not seen this generation yet.
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ready(ac, 1)
		ac.Status.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapWaiting, ObservedGeneration: ac.Generation - 1}
	})
	waitSite(t, key, operationIs("i1", fleetv1.OperationInProgress, "waiting for the site's BPA to take in generation"))
	// The BPA is at it: still in progress, in its words.
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapInstalling, ObservedGeneration: ac.Generation,
			Message: "installing charts"}
	})
	waitSite(t, key, operationIs("i1", fleetv1.OperationInProgress, "the site's BPA is Installing: installing charts"))
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapInstalled, ObservedGeneration: ac.Generation}
	})
	waitSite(t, key, operationIs("i1", fleetv1.OperationSucceeded, "release r1"))

	// A patch: the cluster stays Ready throughout; the BPA's report decides.
	dispatch(t, key, fleetv1.SiteOperation{ID: "p1", Campaign: "p", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
		Release: "r2", PreviousRelease: "r1", DispatchTime: metav1.Now()})
	waitCluster(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) error {
		if ac.Spec.OperationGeneration != 2 {
			return fmt.Errorf("operationGeneration %d", ac.Spec.OperationGeneration)
		}
		return nil
	})
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) { ready(ac, 2) })
	heartbeats(t, key, 1)
	waitSite(t, key, operationIs("p1", fleetv1.OperationInProgress, "waiting for the site's BPA"))
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapFailed, ObservedGeneration: ac.Generation,
			FailedPackage: strings.Repeat("a2", 32), Message: "patch failed and was rolled back: node cp-0: health check failed"}
	})
	waitSite(t, key, operationIs("p1", fleetv1.OperationFailed, "the site's BPA reports: patch failed and was rolled back: node cp-0"))
}

// TestOperationAnsweredBeforeThePoll: a site that answers before the next operation poll gets
// one status write for the operation, with its verdict, and one operation event. The reconcile
// that carries the operation to the site writes neither: it could only say InProgress.
func TestOperationAnsweredBeforeThePoll(t *testing.T) {
	t.Parallel()
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	createRelease(t, ns, "r0", "v1.36.3")
	createRelease(t, ns, "r1", "v1.36.4", strings.Repeat("cd", 32))
	site, _ := register(t, ns, "quick", kc, withNetworkOnly, func(s *fleetv1.Site) { s.Spec.Cluster.Release = "r0" })
	key := client.ObjectKeyFromObject(site)
	createBMCHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, mac(ns, 0x0801), creds("cp-0"))
	waitSite(t, key, conditionIs(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced))

	w := watchSite(t, key)

	dispatch(t, key, fleetv1.SiteOperation{ID: "q1", Campaign: "q", Action: fleetv1.ActionInstall, Stage: fleetv1.StageApply,
		Release: "r1", DispatchTime: metav1.Now()})
	// The site answers as soon as the operation reaches it, as a local controller with no work
	// to do would: within 10ms, well before the next operation poll (testutil.WaitFor's 200ms
	// would come too close to it).
	acKey := types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: site.Name}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		ac := &sitev1.ApplicationCluster{}
		err := siteCP.Client.Get(t.Context(), acKey, ac)
		if err == nil && ac.Annotations[sitev1.OperationAnnotation] == "q1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation q1 not carried to the site after %s (last read: %v)", wait, err)
		}
	}
	reportStatus(t, siteCP, site.Name, func(ac *sitev1.ApplicationCluster) {
		ac.Status.ObservedOperationGeneration = ac.Spec.OperationGeneration
		ac.Status.KubernetesVersion = "v1.36.4"
		ac.Status.Phase = sitev1.ClusterProvisioned
		ac.Status.Conditions = readyStatus(metav1.ConditionTrue, sitev1.ReasonClusterReady, "1 of 1 nodes ready")
	})

	var phases []fleetv1.OperationPhase
	for ev := range w.ResultChan() {
		s, ok := ev.Object.(*fleetv1.Site)
		if !ok {
			t.Fatalf("watch of Site %s: %s %T", key, ev.Type, ev.Object)
		}
		if last := s.Status.LastOperation; last != nil && last.ID == "q1" && !slices.Contains(phases, last.Phase) {
			phases = append(phases, last.Phase)
			if last.Phase == fleetv1.OperationSucceeded {
				break
			}
		}
	}
	if !slices.Equal(phases, []fleetv1.OperationPhase{fleetv1.OperationSucceeded}) {
		t.Errorf("status.lastOperation of q1 went through %v, want only its verdict Succeeded", phases)
	}
	reasons := func() []string {
		list := &eventsv1.EventList{}
		if err := global.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var r []string
		for _, e := range list.Items {
			if strings.HasPrefix(e.Reason, "Operation") {
				r = append(r, e.Reason)
			}
		}
		return r
	}
	testutil.Eventually(t, wait, func() error {
		if r := reasons(); !slices.Equal(r, []string{"OperationSucceeded"}) {
			return fmt.Errorf("operation events %v, want one OperationSucceeded", r)
		}
		return nil
	})
}
