package controlplane_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// TestRestartKeepsKubeconfigValid stops and restarts a control plane's API server and checks
// that a kubeconfig handed out before the restart still works after it, and that data survived.
func TestRestartKeepsKubeconfigValid(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "restart"})
	ns := cp.Namespace(t)
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, "kept"
	if err := cp.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	kc, err := cp.Kubeconfig("site-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := siteclient.Load(kc)
	if err != nil {
		t.Fatalf("testenv kubeconfig is not accepted as a site kubeconfig: %v", err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatalf("before restart: %v", err)
	}

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err == nil {
		t.Fatal("API server still answers after StopAPIServer")
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatalf("after restart, the old kubeconfig no longer works: %v", err)
	}
	if err := cp.Client.Get(t.Context(), clientKey(ns, "kept"), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("after restart, data is gone: %v", err)
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestKillAPIServer kills a control plane's API server: it stops answering at once, and the
// control plane still stops cleanly.
func TestKillAPIServer(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{Name: "killed"})
	if err != nil {
		t.Fatal(err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config)
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatalf("before the kill: %v", err)
	}
	if err := cp.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err == nil {
		t.Fatal("the API server still answers after KillAPIServer")
	}
	if err := cp.KillAPIServer(); err == nil {
		t.Error("a second KillAPIServer found an API server to kill")
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("Stop after KillAPIServer: %v", err)
	}
}
