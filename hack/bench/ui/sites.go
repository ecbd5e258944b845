package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

var regions = []string{"eu-west", "eu-north", "eu-south", "us-east", "us-west", "ap-south", "ap-east", "sa-east"}

// registerSites creates n Sites and writes a status on each, as the global controller would
// have: every 50th unreachable, every 37th degraded, every 23rd patching, the rest Ready; a
// third at release r1, the rest at r0; heartbeats spread over ten minutes.
func registerSites(ctx context.Context, c client.Client, n, workers int) error {
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := registerSite(ctx, c, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case jobs <- i:
		case err = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs // nil once closed and empty
}

func registerSite(ctx context.Context, c client.Client, i int) error {
	now := time.Now()
	release, version := "r0", "v1.36.2"
	if i%3 == 0 {
		release, version = "r1", "v1.36.3"
	}
	s := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("store-%05d", i)},
		Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "kubeconfig"},
			Location:            &fleetv1.Location{Region: regions[i%len(regions)], Zone: fmt.Sprintf("zone-%03d", i%500)},
			Cluster: &fleetv1.SiteCluster{Release: release, Network: sitev1.ClusterNetwork{
				PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "192.0.2.1"},
			}},
		},
	}
	patching := i%23 == 0 && i%50 != 0 && i%37 != 0
	if patching {
		s.Spec.Operation = &fleetv1.SiteOperation{ID: "bench-uid", Campaign: "patch-bench", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
			Release: release, DispatchTime: metav1.NewTime(now.Add(-time.Minute))}
	}
	if err := c.Create(ctx, s); err != nil {
		return fmt.Errorf("create site %s: %w", s.Name, err)
	}
	heartbeat := metav1.NewTime(now.Add(-time.Duration(i%600) * time.Second))
	cond := func(t string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: heartbeat, ObservedGeneration: 1}
	}
	st := &s.Status
	st.ObservedGeneration, st.LastCheckTime, st.LastHeartbeatTime, st.KubernetesVersion = 1, &heartbeat, &heartbeat, "v1.36.3"
	st.Hosts = fleetv1.HostCounts{Total: 3, ControlPlane: 1, Worker: 2}
	st.Cluster = &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: version, ObservedGeneration: 1,
		ControlPlane: sitev1.NodeCounts{Ready: 1, Total: 1}, Workers: sitev1.NodeCounts{Ready: 2, Total: 2}, Message: "all nodes ready"}
	st.Conditions = []metav1.Condition{
		cond(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid, "loaded"),
		cond(fleetv1.SiteReachableCondition, metav1.ConditionTrue, fleetv1.ReasonAPIServerReachable, "answered"),
		cond(fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady, "site reachable"),
		cond(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, "pushed"),
		cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady, "Ready"),
	}
	switch {
	case i%50 == 0:
		st.Conditions[1] = cond(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable, "dial tcp 10.0.2.1:6443: i/o timeout")
		st.Conditions[2] = cond(fleetv1.SiteReadyCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotReady, "Reachable is False")
		st.Conditions[4] = cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked, "the site is not reachable")
	case i%37 == 0:
		st.Cluster.Phase, st.Cluster.LastError = sitev1.ClusterDegraded, "host store-cp-0 failed: provisioning error"
		st.Conditions[4] = cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReady, "HostsProvisioned is False")
	case patching:
		st.Cluster.Phase = sitev1.ClusterUpdating
		st.Cluster.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapPatching, ObservedGeneration: 2, Nodes: 3,
			Step: &sitev1.PatchStep{Package: "kubelet", Version: "1.36.3", Node: "store-w0", Index: 2, Of: 3, Step: "draining", Since: heartbeat}}
		st.LastOperation = &fleetv1.SiteOperationStatus{ID: "bench-uid", Campaign: "patch-bench", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
			Release: release, Phase: fleetv1.OperationInProgress, StartTime: &heartbeat, Message: "patching kubelet"}
	}
	if err := c.Status().Update(ctx, s); err != nil {
		return fmt.Errorf("status of site %s: %w", s.Name, err)
	}
	return nil
}
