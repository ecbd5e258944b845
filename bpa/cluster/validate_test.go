package cluster_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// TestRunRefusesABadSpec: a bad spec is refused before anything is touched (no runner, no
// secret store), with an error naming the field.
func TestRunRefusesABadSpec(t *testing.T) {
	pkgOf := func(name string) install.Package {
		return install.Package{Manifest: &packages.Manifest{Name: name}}
	}
	good := func() cluster.Spec {
		return cluster.Spec{
			Name: "app", KubernetesVersion: "v1.36.3",
			Hosts:    []cluster.Host{{Name: "cp-0", IP: netip.MustParseAddr("10.0.0.10"), SSH: sshexec.Target{Name: "cp-0", Addr: "10.0.0.10:22"}, ControlPlane: true}},
			Packages: cluster.Packages{Etcd: pkgOf(cluster.Etcd), APIServer: pkgOf(cluster.APIServer), NodeAgent: pkgOf(cluster.NodeAgent)},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*cluster.Spec)
		want   string
	}{
		{"bad name", func(s *cluster.Spec) { s.Name = "App_1" }, `name "App_1"`},
		{"no version", func(s *cluster.Spec) { s.KubernetesVersion = "" }, "kubernetesVersion: required"},
		{"no control plane", func(s *cluster.Spec) { s.Hosts[0].ControlPlane = false }, "hosts: no control-plane host"},
		{"no IP", func(s *cluster.Spec) { s.Hosts[0].IP = netip.Addr{} }, "hosts[0] (cp-0): ip: required"},
		{"no SSH address", func(s *cluster.Spec) { s.Hosts[0].SSH.Addr = "" }, "hosts[0] (cp-0): ssh"},
		{"missing package", func(s *cluster.Spec) { s.Packages.Etcd = install.Package{} }, "packages.etcd: missing"},
		{"wrong package", func(s *cluster.Spec) { s.Packages.NodeAgent = pkgOf("etcd") }, `packages.node-agent: got package "etcd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mutate(&s)
			_, err := cluster.New(nil, nil).Run(t.Context(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}
