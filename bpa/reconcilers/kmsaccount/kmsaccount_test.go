package kmsaccount_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/clusterkms"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/kmsaccount"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// forgotten is a fake of the KMS source's token memory: it records what it was told to forget.
type forgotten struct {
	mu   sync.Mutex
	keys []types.NamespacedName
}

func (f *forgotten) Forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
}

func (f *forgotten) has(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.keys, key)
}

func (f *forgotten) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.keys)
}

// account is a plugin ServiceAccount as clusterkms makes it, for the cluster ns/name.
func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: clusterkms.Namespace, Name: clusterkms.ServiceAccountPrefix + name,
		Labels: map[string]string{sitev1.ClusterLabel: name, clusterkms.ClusterNamespaceLabel: ns}}}
}

func applicationCluster(ns, name string) *sitev1.ApplicationCluster {
	return &sitev1.ApplicationCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sitev1.ApplicationClusterSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: strings.Repeat("0", 64)},
			Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
			Hosts: []sitev1.ClusterHost{{Name: name + "-cp-0", Role: sitev1.RoleControlPlane, BootMACAddress: "52:54:00:00:00:01", Address: "10.0.0.10",
				BMC: sitev1.BMC{Address: "redfish+https://192.0.2.1/redfish/v1/Systems/1", CredentialsName: name + "-bmc"}}},
		},
	}
}

// TestReconciler runs the reconciler on a real API server with the BPA's cache layout (the
// ServiceAccounts of clusterkms.Namespace only): an account whose cluster is gone before the
// BPA starts is deleted at the start, one whose cluster is deleted later at that deletion, and
// the accounts of clusters that exist, new or old, and other ServiceAccounts stay.
func TestReconciler(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "site", InstallSiteCRDs: true})
	ctx := t.Context()
	for _, ns := range []string{clusterkms.Namespace, sitev1.InfoNamespace} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	kept := applicationCluster(sitev1.InfoNamespace, "kept")
	if err := cp.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	// Left by a BPA that was stopped while its cluster was deleted.
	orphan := account(sitev1.InfoNamespace, "gone")
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: clusterkms.Namespace, Name: "edgefleet-kms-someone"}}
	for _, sa := range []*corev1.ServiceAccount{account(sitev1.InfoNamespace, "kept"), orphan, other} {
		if err := cp.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
	}

	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 controlplane.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{sitev1.InfoNamespace: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.ServiceAccount{}: {Namespaces: map[string]cache.Config{clusterkms.Namespace: {}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := &forgotten{}
	if err := (&kmsaccount.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Tokens: tokens}).SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// gone: the account is deleted and its cluster's token forgotten (the reconciler forgets it
	// right after the deletion, so the test may see the one before the other).
	gone := func(sa *corev1.ServiceAccount, cluster types.NamespacedName) func() (bool, string) {
		return func() (bool, string) {
			err := cp.Client.Get(ctx, client.ObjectKeyFromObject(sa), &corev1.ServiceAccount{})
			if !apierrors.IsNotFound(err) {
				return false, "ServiceAccount " + sa.Name + " still there"
			}
			return tokens.has(cluster), fmt.Sprintf("the token of %s not forgotten: %s", cluster, tokens)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "the orphan account deleted at the start, its token forgotten", gone(orphan, types.NamespacedName{Namespace: sitev1.InfoNamespace, Name: "gone"}))

	// A cluster made now, and its account just after, as the ApplicationCluster reconciler
	// makes them: the account stays.
	fresh := applicationCluster(sitev1.InfoNamespace, "fresh")
	if err := cp.Client.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, account(sitev1.InfoNamespace, "fresh")); err != nil {
		t.Fatal(err)
	}

	if err := cp.Client.Delete(ctx, kept); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the deleted cluster's account deleted, its token forgotten", gone(account(sitev1.InfoNamespace, "kept"), client.ObjectKeyFromObject(kept)))
	for _, sa := range []*corev1.ServiceAccount{account(sitev1.InfoNamespace, "fresh"), other} {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(sa), &corev1.ServiceAccount{}); err != nil {
			t.Errorf("ServiceAccount %s: %v, want it kept", sa.Name, err)
		}
	}
}
