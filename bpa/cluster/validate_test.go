package cluster_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// manifestPkg is a package of name, coming after after, without an archive: enough for the
// checks that run before anything is touched.
func manifestPkg(name string, after ...string) install.Package {
	return install.Package{Manifest: &packages.Manifest{Name: name, Version: "1", After: after}}
}

// TestRunRefusesABadSpec: a bad spec is refused before anything is touched (no installer, no
// secret store), with an error naming the field.
func TestRunRefusesABadSpec(t *testing.T) {
	good := func() cluster.Spec {
		return cluster.Spec{
			Name: "app", KubernetesVersion: "v1.36.3",
			Hosts: []cluster.Host{
				{Name: "cp-0", IP: netip.MustParseAddr("10.0.0.10"), SSH: sshexec.Target{Name: "cp-0", Addr: "10.0.0.10:22"}, ControlPlane: true},
				{Name: "w-0", IP: netip.MustParseAddr("10.0.0.20"), SSH: sshexec.Target{Name: "w-0", Addr: "10.0.0.20:22"}},
			},
			Packages: []install.Package{manifestPkg("etcd"), manifestPkg("kube-apiserver", "etcd")},
		}
	}
	writes := func(name, path, pki string) install.Package {
		p := manifestPkg(name)
		p.Manifest.Config = []packages.ConfigFile{{Path: path, PKI: pki}}
		return p
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
		{"same last byte", func(s *cluster.Spec) { s.Hosts[1].IP = netip.MustParseAddr("10.0.1.10") }, "hosts[1] (w-0): its address 10.0.1.10 ends in the same byte as cp-0's"},
		{"IPv6 pod CIDR", func(s *cluster.Spec) { s.PodCIDR = "fd00::/48" }, `pod CIDR "fd00::/48": want an IPv4 CIDR`},
		{"pod CIDR too small", func(s *cluster.Spec) { s.PodCIDR = "10.244.0.0/20" }, "at most a /18"},
		{"service CIDR too small", func(s *cluster.Spec) { s.ServiceCIDR = "10.96.0.0/30" }, "too small for the DNS service"},
		{"no packages", func(s *cluster.Spec) { s.Packages = nil }, "packages: none"},
		{"two of one name", func(s *cluster.Spec) { s.Packages = append(s.Packages, manifestPkg("etcd")) }, "two etcd packages"},
		{"after a missing package", func(s *cluster.Spec) { s.Packages = s.Packages[1:] }, "kube-apiserver comes after etcd, which is not among the packages"},
		{"images without an importer", func(s *cluster.Spec) {
			s.Images = []install.Image{{Name: "pause", Digest: strings.Repeat("a", 64)}}
		}, "images: 1 container images, but no package imports images"},
		{"two writers of a file", func(s *cluster.Spec) {
			s.Packages = append(s.Packages, writes("a", "/etc/x", "pki/ca.crt"), writes("b", "/etc/x", "pki/sa.pub"))
		}, "a and b both write /etc/x"},
		{"KMS over plain HTTP, without a CA or a token", func(s *cluster.Spec) {
			s.KMS = &cluster.KMS{KMSValues: packages.KMSValues{VaultAddr: "http://vault:8200", AuthMount: "kubernetes", Role: "edgefleet-kms", TransitMount: "transit", TransitKey: "k"}}
		}, `kms.vaultAddr "http://vault:8200": want an https URL`},
		{"KMS without a CA", func(s *cluster.Spec) {
			s.KMS = &cluster.KMS{KMSValues: packages.KMSValues{VaultAddr: "https://vault:8200", AuthMount: "kubernetes", Role: "edgefleet-kms", TransitMount: "transit", TransitKey: "k"}, Token: []byte("t")}
		}, "kms.vaultCA: required"},
		{"KMS with a quote in a name", func(s *cluster.Spec) {
			s.KMS = &cluster.KMS{KMSValues: packages.KMSValues{VaultAddr: "https://vault:8200", AuthMount: "kubernetes", Role: `x" --vault-auth=token`, TransitMount: "transit", TransitKey: "k"},
				VaultCA: []byte("CA"), Token: []byte("t")}
		}, `kms.role "x\" --vault-auth=token": required, without spaces, quotes`},
		{"a package that requires the KMS, left out, the one after it missing it", func(s *cluster.Spec) {
			plugin := manifestPkg("kms-plugin")
			plugin.Manifest.Requires = packages.RequiresKMS
			s.Packages = append(s.Packages, plugin, manifestPkg("needs-plugin", "kms-plugin"))
		}, "needs-plugin comes after kms-plugin, which is not among the packages"},
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

func TestLevels(t *testing.T) {
	names := func(levels [][]install.Package) [][]string {
		var out [][]string
		for _, l := range levels {
			var ns []string
			for _, p := range l {
				ns = append(ns, p.Manifest.Name)
			}
			out = append(out, ns)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		pkgs []install.Package
		want [][]string
		err  string
	}{
		{"the node stack", []install.Package{
			manifestPkg("kubelet", "containerd", "kube-apiserver"), manifestPkg("kube-apiserver", "etcd"), manifestPkg("etcd"),
			manifestPkg("containerd", "runc"), manifestPkg("runc"), manifestPkg("kube-proxy", "kubelet"), manifestPkg("kube-scheduler", "kube-apiserver"),
		}, [][]string{{"etcd", "runc"}, {"containerd", "kube-apiserver"}, {"kube-scheduler", "kubelet"}, {"kube-proxy"}}, ""},
		{"independent", []install.Package{manifestPkg("b"), manifestPkg("a")}, [][]string{{"a", "b"}}, ""},
		{"a cycle", []install.Package{manifestPkg("a", "c"), manifestPkg("b", "a"), manifestPkg("c", "b"), manifestPkg("d")}, nil, "a, b, c come after each other in a cycle"},
		{"a missing package", []install.Package{manifestPkg("kubelet", "containerd")}, nil, "kubelet comes after containerd, which is not among the packages"},
		{"two of one name", []install.Package{manifestPkg("a"), manifestPkg("a")}, nil, "two a packages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			levels, err := cluster.Levels(tc.pkgs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(levels); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("levels %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlaced: a package for worker hosts needs a cluster with one, unless the cluster leaves
// it out (a requirement it does not meet); packages for the control plane or all hosts always
// have one.
func TestPlaced(t *testing.T) {
	on := func(name string, hosts packages.HostSelector, requires packages.Requirement) install.Package {
		p := manifestPkg(name)
		p.Manifest.Hosts, p.Manifest.Requires = hosts, requires
		return p
	}
	stack := []install.Package{on("etcd", packages.HostsControlPlane, ""), on("kubelet", packages.HostsAll, ""), on("proxy", "", "")}
	for _, tc := range []struct {
		name    string
		pkgs    []install.Package
		workers int
		kms     bool
		want    string
	}{
		{"control plane and all hosts, no worker", stack, 0, false, ""},
		{"a package for workers, with a worker", append(slices.Clone(stack), on("hello", packages.HostsWorker, "")), 1, false, ""},
		{"packages for workers, no worker", append(slices.Clone(stack), on("hello", packages.HostsWorker, ""), on("agent", packages.HostsWorker, packages.RequiresKMS)), 0, true,
			"packages: hello, agent run on worker hosts only (their manifests' hosts), and the cluster has no worker host: add a worker Host to the site"},
		{"a package for workers the cluster leaves out", append(slices.Clone(stack), on("agent", packages.HostsWorker, packages.RequiresKMS)), 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cluster.Placed(tc.pkgs, tc.workers, tc.kms)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNodePodCIDR(t *testing.T) {
	for _, tc := range []struct {
		podCIDR, ip, want string
	}{
		{"10.244.0.0/16", "192.168.10.7", "10.244.7.0/24"},
		{"10.244.0.0/16", "192.168.10.254", "10.244.254.0/24"},
		{"10.244.0.0/18", "10.0.0.1", "10.244.0.64/26"},
		{"10.244.0.0/18", "10.0.0.255", "10.244.63.192/26"},
		{"10.128.0.0/9", "10.0.0.3", "10.129.128.0/17"}, // the fourth /17: 3 × 32,768 addresses on
	} {
		got, err := cluster.NodePodCIDR(tc.podCIDR, netip.MustParseAddr(tc.ip))
		if err != nil || got != tc.want {
			t.Errorf("NodePodCIDR(%s, %s) = %q, %v; want %q", tc.podCIDR, tc.ip, got, err, tc.want)
		}
	}
}
