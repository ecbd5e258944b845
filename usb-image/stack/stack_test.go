// Package stack_test boots the site stack (usb-image/stack) on a real test host: Debian with
// systemd as PID 1, the stack installed by install.sh as the ISO build installs it.
package stack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// readyMarker starts the line edgefleet-site-ready.service writes; the image's boot test waits
// for it on the console.
const readyMarker = "EDGEFLEET-SITE-READY"

// TestSiteStackOnTestHost installs the stack into a test host's disk, boots it and checks, in
// order: the ready marker; through the site API server on the host's address (with the admin
// credentials read from the host), the CRDs, the local controller's info ConfigMap and the
// BPA's ConfigMap; the components' own identities are no admins; enrollment with a real global
// controller (the Site Ready on the global cluster); the components' recent log lines through
// the global controller (edgefleet site logs); a Secret not in clear in the host's etcd
// files; systemd restarting a killed service; and after a power cut and a boot in which etcd
// fails its first start, ready again with the same CA and the Secret still readable (site-init kept the PKI and the encryption key).
// The site's two other hosts start powered off; once the site is Ready, they are registered
// on the global cluster and the stack builds the application cluster on them from the
// stick's pack alone.
func TestSiteStackOnTestHost(t *testing.T) {
	hn := testhosts.NewHosts(t, 3, testhosts.HostOptions{Names: []string{"site-0", "node-0", "node-1"}})
	h := hn.Hosts[0]
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"local-controller", "bpa", "bmo", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			t.Fatalf("bin/%s: %v (make build tools)", b, err)
		}
	}
	upper := filepath.Join(h.Dir, "upper")
	if err := h.Provision(testhosts.UserData{}); err != nil {
		t.Fatal(err)
	}
	// The global side: its API over TLS on the hosts' gateway, a Site, and the site's identity
	// (URL, CA, a fresh enrollment token) on the host's disk, as the image carries it.
	fleet := installWithIdentity(t, hn, upper)
	release := writePack(t, fleet, upper)
	fixtureProvisioner(t, upper)
	t.Cleanup(func() {
		if t.Failed() && h.Running() {
			out, _ := h.Exec(context.Background(), "sh", "-c", "systemctl --no-pager list-units 'edgefleet*' etcd.service 'kube-*' baremetal-operator.service; journalctl --no-pager -u 'edgefleet*' -u etcd -u 'kube-*' -u baremetal-operator | grep -v 'healthz check failed' | tail -n 60")
			t.Logf("host's units and journal:\n%s", out)
		}
	})

	start := time.Now()
	if err := h.Boot(); err != nil {
		t.Fatal(err)
	}
	ready := waitReady(t, h)
	t.Logf("first boot: %q after %s", ready, time.Since(start).Round(time.Second))

	site := filepath.Join(upper, "var", "lib", "edgefleet", "site")
	ca := readFile(t, filepath.Join(site, "pki", "ca.crt"))
	c := siteClient(t, h.IP.String(), site)
	ctx := t.Context()

	t.Run("CRDs", func(t *testing.T) {
		for _, name := range []string{"applicationclusters.site.edgefleet.io", "artifactsets.site.edgefleet.io",
			"clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io", "baremetalhosts.metal3.io"} {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
				t.Errorf("CRD %s: %v", name, err)
			}
		}
	})
	t.Run("components' ConfigMaps", func(t *testing.T) {
		// Both are written just after the components report ready.
		deadline := time.Now().Add(30 * time.Second)
		for _, name := range []string{sitev1.InfoConfigMapName, sitev1.BPAConfigMapName} {
			for {
				err := c.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: name}, &corev1.ConfigMap{})
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ConfigMap %s/%s: %v", sitev1.InfoNamespace, name, err)
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
	})

	t.Run("components are not admins", func(t *testing.T) {
		for _, id := range []string{"local-controller", "bpa", "baremetal-operator"} {
			err := clientAs(t, h.IP.String(), site, id).List(ctx, &rbacv1.ClusterRoleBindingList{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s listing ClusterRoleBindings: %v; want Forbidden (least privilege)", id, err)
			}
		}
	})

	// The site cache on the site network: TLS with site-init's certificate, readers by their
	// site identity, authorized by the shipped roles and bindings.
	t.Run("the site cache serves its readers only, over TLS", func(t *testing.T) {
		path := h.IP.String() + ":8180/sha256/" + strings.Repeat("0", 64)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		get := func(t *testing.T, scheme, id string) (int, string) {
			t.Helper()
			cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			if id != "" {
				pair, err := tls.LoadX509KeyPair(filepath.Join(site, "pki", id+".crt"), filepath.Join(site, "pki", id+".key"))
				if err != nil {
					t.Fatal(err)
				}
				cfg.Certificates = []tls.Certificate{pair}
			}
			hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := hc.Get(scheme + "://" + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return resp.StatusCode, string(body)
		}
		for _, tc := range []struct {
			what, scheme, id string
			want             int
		}{
			{"plain HTTP", "http", "", http.StatusBadRequest},
			{"no credential", "https", "", http.StatusUnauthorized},
			// Allowed (ClusterRole edgefleet-bpa): the artifact is just not cached.
			{"the BPA's identity", "https", "bpa", http.StatusNotFound},
			{"the local controller's identity, not a reader", "https", "local-controller", http.StatusForbidden},
		} {
			if status, body := get(t, tc.scheme, tc.id); status != tc.want {
				t.Errorf("%s: %d %s, want %d", tc.what, status, body, tc.want)
			}
		}
	})

	t.Run("enrolls with the global controller", func(t *testing.T) {
		if err := fleet.WaitSitesReady(ctx, siteNamespace, siteName); err != nil {
			t.Fatalf("%v; global controller's log: %s", err, fleet.ControllerLog())
		}
		if _, err := os.Stat(filepath.Join(upper, "var", "lib", "edgefleet", "enrolled")); err != nil {
			t.Errorf("no done-marker after enrollment: %v", err)
		}
	})

	// The air-gapped site pack: the release's artifacts came from the medium at boot, before any
	// ArtifactSet named them, so a set of the release is complete without one fetch.
	t.Run("the site pack fills the site cache at first boot", func(t *testing.T) {
		want := fmt.Sprintf("EDGEFLEET-PACK release=%s/%s artifacts=%d imported=%d ", siteNamespace, release.Name, len(release.Spec.Artifacts()), len(release.Spec.Artifacts()))
		if out, err := h.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "edgefleet-pack.service"); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("the pack unit's journal: %v\n%s\nwant %q", err, out, want)
		}
		set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "air-gapped"},
			Spec: sitev1.ArtifactSetSpec{Artifacts: release.Spec.Artifacts()}}
		if err := c.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, time.Minute, "the release's ArtifactSet Ready", func() (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
				return false, err.Error()
			}
			ready := meta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
			return ready != nil && ready.Status == metav1.ConditionTrue && set.Status.ObservedGeneration == set.Generation, fmt.Sprintf("%+v", set.Status)
		})
		out, err := h.Exec(ctx, "curl", "-sS", "--max-time", "10", "http://127.0.0.1:8080/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^edgefleet_site_cache_fetches_total 0$`).Match(out) {
			t.Errorf("the local controller fetched artifacts the pack holds:\n%s", grepLines(out, "edgefleet_site_cache_"))
		}
	})

	// The whole path from the stick: the global controller pushes the site's Hosts and cluster
	// through the credential enrollment handed over; the stack's Metal3 provisions the hosts
	// (its fixture provisioner: the harness plays Ironic's deploy, booting each host with the
	// first-boot data the BareMetalHost carries); the stack's BPA, its keys in the Kubernetes
	// Secret store, installs over SSH what the site cache holds, all of it from the pack.
	t.Run("builds the application cluster on the site's other hosts from the stick alone", func(t *testing.T) {
		metal3Client, err := client.New(restConfigAs(t, h.IP.String(), site, "admin"), client.Options{Scheme: metal3.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		// Ironic's agent reads the image from the stack's site cache, whose certificate the site CA signs.
		stopIronic := hn.PlayIronic(context.Background(), metal3Client, sitev1.HostsNamespace, filepath.Join(site, "pki", "ca.crt"), func(err error) { t.Logf("ironic: %v", err) })
		defer stopIronic()
		opts := testfleet.RealSiteOptions{Name: siteName, Namespace: siteNamespace, Hosts: hn}
		for i, role := range map[int]fleetv1.HostRole{1: fleetv1.RoleControlPlane, 2: fleetv1.RoleWorker} {
			if err := fleet.RegisterRealHost(ctx, opts, i, role); err != nil {
				t.Fatal(err)
			}
		}
		network := hn.ClusterNetwork()
		network.ControlPlaneEndpoint.Host = hn.Hosts[1].IP.String()
		// controlplane.Update retries on a conflict: the global controller writes the Site's status as
		// the Hosts register.
		s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: siteNamespace, Name: siteName}}
		controlplane.Update(t, fleet.Global.Client, s, func(s *fleetv1.Site) {
			s.Spec.Cluster = &fleetv1.SiteCluster{Release: release.Name, Network: network}
		})
		start := time.Now()
		testutil.WaitFor(t, 15*time.Minute, "the site's cluster Provisioned and Installed, its charts' pods ready", func() (bool, string) {
			if err := fleet.Global.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return false, err.Error()
			}
			c := s.Status.Cluster
			if c == nil {
				return false, "no cluster status"
			}
			state := fmt.Sprintf("%s (%s %s), control plane %d/%d, workers %d/%d", c.Phase, c.Message, c.LastError, c.ControlPlane.Ready, c.ControlPlane.Total, c.Workers.Ready, c.Workers.Total)
			if c.Bootstrap == nil {
				return false, state + ", no bootstrap status"
			}
			state += fmt.Sprintf(", bootstrap %s: %s", c.Bootstrap.Phase, c.Bootstrap.Message)
			return c.Phase == sitev1.ClusterProvisioned && c.ControlPlane == (sitev1.NodeCounts{Ready: 1, Total: 1}) &&
				c.Workers == (sitev1.NodeCounts{Ready: 1, Total: 1}) && c.Bootstrap.Phase == sitev1.BootstrapInstalled &&
				strings.HasSuffix(c.Bootstrap.Message, "2 charts deployed, their pods 5/5 ready"), state
		})
		t.Logf("registered to installed, charts' pods ready: %s", time.Since(start).Round(time.Second))
		var installed []string
		for _, p := range s.Status.Cluster.Bootstrap.Packages {
			installed = append(installed, p.Name+" "+p.Version)
		}
		var want []string
		for _, p := range builders.StackPackages(builders.KubernetesVersion) {
			want = append(want, p.Name+" "+p.Version)
		}
		slices.Sort(installed)
		slices.Sort(want)
		if !slices.Equal(installed, want) {
			t.Errorf("installed packages %v, want the release's %v", installed, want)
		}
		// The test application answers at its Service's address, from a node (kube-proxy).
		kubeconfig := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: siteName + "-kubeconfig"}, kubeconfig); err != nil {
			t.Fatal(err)
		}
		appConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data["value"])
		if err != nil {
			t.Fatal(err)
		}
		appConfig.Timeout = 15 * time.Second
		appClient, err := client.New(appConfig, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{}
		if err := appClient.Get(ctx, client.ObjectKey{Namespace: "webapp", Name: "webapp"}, svc); err != nil {
			t.Fatal(err)
		}
		if out, err := hn.Hosts[2].Exec(ctx, "curl", "-fsS", "--max-time", "10", "http://"+svc.Spec.ClusterIP+"/"); err != nil || !strings.HasPrefix(string(out), "hello from webapp-") {
			t.Errorf("the test application at %s: %v %q", svc.Spec.ClusterIP, err, out)
		}
		// All of it from the stick: the site cache never fetched.
		out, err := h.Exec(ctx, "curl", "-sS", "--max-time", "10", "http://127.0.0.1:8080/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^edgefleet_site_cache_fetches_total 0$`).Match(out) {
			t.Errorf("the site cache fetched artifacts during the install:\n%s", grepLines(out, "edgefleet_site_cache_"))
		}
	})

	// The log viewer's whole path: the CLI, the global controller (a fresh review of get
	// sites/log), the LogRequest on the site with the credential enrollment handed over, and
	// each component answering under its own identity from the lines it keeps.
	t.Run("the components' logs reach the global controller", func(t *testing.T) {
		for component, want := range map[string]string{sitev1.LogComponentLocalController: "starting local controller", sitev1.LogComponentBPA: "starting BPA"} {
			out, err := fleet.Edgefleet(ctx, "site", "logs", siteName, "-n", siteNamespace, "--component", component, "--tail", "2000", "-o", "json")
			if err != nil {
				t.Fatalf("edgefleet site logs --component %s: %v\n%s", component, err, out)
			}
			var got restv1.SiteLog
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s's answer: %v\n%s", component, err, out)
			}
			if got.Component != component || !strings.Contains(got.Instance, h.Name) || !slices.ContainsFunc(got.Lines, func(l string) bool { return strings.Contains(l, want) }) {
				t.Errorf("%s's answer from %q: %d lines, none saying %q", component, got.Instance, len(got.Lines), want)
			}
		}
	})

	// A Secret's value must be nowhere in clear in etcd's files, while its name (keys are
	// not encrypted) is: the search looks where etcd writes.
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	value := "stack-test-" + hex.EncodeToString(raw)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "stack-test-" + hex.EncodeToString(raw[:4])},
		StringData: map[string]string{"value": value}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Run("Secrets encrypted at rest", func(t *testing.T) {
		etcdDir := filepath.Join(upper, "var", "lib", "edgefleet", "etcd")
		named, err := testutil.FilesContaining(etcdDir, []byte("/registry/secrets/"+secret.Namespace+"/"+secret.Name))
		if err != nil {
			t.Fatal(err)
		}
		if len(named) == 0 {
			t.Fatalf("no file of %s holds the Secret's key: not etcd's data directory?", etcdDir)
		}
		clear, err := testutil.FilesContaining(etcdDir, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		if len(clear) > 0 {
			t.Errorf("the Secret's value is in clear in %v", clear)
		}
	})

	t.Run("the renewal timer renews a certificate and restarts its reader only", func(t *testing.T) {
		if out, err := h.Exec(ctx, "systemctl", "is-active", "edgefleet-site-renew.timer"); err != nil || strings.TrimSpace(string(out)) != "active" {
			status, _ := h.Exec(ctx, "sh", "-c", "systemctl --no-pager status edgefleet-site-renew.timer; systemctl --no-pager show -p Wants,ActiveState edgefleet-site.target; journalctl --no-pager -u edgefleet-site-renew.timer | tail -n 20")
			t.Fatalf("edgefleet-site-renew.timer: %q %v\n%s", out, err, status)
		}
		bpaBefore, lcBefore := unitProps(t, h, "edgefleet-bpa.service"), unitProps(t, h, "edgefleet-local-controller.service")
		oldCert := readFile(t, filepath.Join(site, "pki", "bpa.crt"))
		// The BPA's client certificate gone stands for one near its end: site-init issues it again.
		if _, err := h.Exec(ctx, "rm", "/var/lib/edgefleet/site/pki/bpa.crt", "/var/lib/edgefleet/site/pki/bpa.key"); err != nil {
			t.Fatal(err)
		}
		if out, err := h.Exec(ctx, "systemctl", "start", "edgefleet-site-renew.service"); err != nil {
			t.Fatalf("edgefleet-site-renew.service: %v\n%s", err, out)
		}
		if newCert := readFile(t, filepath.Join(site, "pki", "bpa.crt")); bytes.Equal(newCert, oldCert) {
			t.Error("the BPA's certificate was not issued again")
		}
		bpaAfter, lcAfter := unitProps(t, h, "edgefleet-bpa.service"), unitProps(t, h, "edgefleet-local-controller.service")
		if bpaAfter["MainPID"] == bpaBefore["MainPID"] || bpaAfter["ActiveState"] != "active" || bpaAfter["SubState"] != "running" {
			t.Errorf("BPA not restarted for its new certificate: before %v, after %v", bpaBefore, bpaAfter)
		}
		if lcAfter["MainPID"] != lcBefore["MainPID"] {
			t.Errorf("the local controller was restarted though none of its files changed: %v → %v", lcBefore, lcAfter)
		}
		if _, err := h.Exec(ctx, "curl", "-fsS", "--max-time", "2", "http://127.0.0.1:8091/readyz"); err != nil {
			t.Errorf("BPA not ready with its new certificate: %v", err)
		}
		// Nothing due: the next run restarts nothing.
		if out, err := h.Exec(ctx, "systemctl", "start", "edgefleet-site-renew.service"); err != nil {
			t.Fatalf("edgefleet-site-renew.service again: %v\n%s", err, out)
		}
		if again := unitProps(t, h, "edgefleet-bpa.service"); again["MainPID"] != bpaAfter["MainPID"] {
			t.Errorf("a run with nothing due restarted the BPA: %v → %v", bpaAfter, again)
		}
	})

	t.Run("systemd restarts a killed service", func(t *testing.T) {
		before := unitProps(t, h, "edgefleet-bpa.service")
		if before["MainPID"] == "" || before["MainPID"] == "0" {
			t.Fatalf("edgefleet-bpa.service has no main process: %v", before)
		}
		if _, err := h.Exec(ctx, "kill", "-KILL", before["MainPID"]); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			now := unitProps(t, h, "edgefleet-bpa.service")
			restarts, _ := strconv.Atoi(now["NRestarts"])
			was, _ := strconv.Atoi(before["NRestarts"])
			if now["ActiveState"] == "active" && now["SubState"] == "running" && restarts > was && now["MainPID"] != before["MainPID"] {
				t.Logf("BPA restarted: PID %s → %s", before["MainPID"], now["MainPID"])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("BPA not restarted after SIGKILL: before %v, now %v", before, now)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if _, err := h.Exec(ctx, "curl", "-fsS", "--max-time", "2", "http://127.0.0.1:8091/readyz"); err != nil {
			t.Errorf("restarted BPA not ready: %v", err)
		}
	})

	t.Run("reboot keeps the site", func(t *testing.T) {
		if err := h.Stop(); err != nil {
			t.Fatal(err)
		}
		// etcd fails its first start of this boot, as a start that runs past its timeout on a
		// slow machine does: systemd restarts it, and the units after it come up all the same.
		dropIn := filepath.Join(upper, "etc", "systemd", "system", "etcd.service.d")
		if err := os.MkdirAll(dropIn, 0o755); err != nil {
			t.Fatal(err)
		}
		failOnce := "[Service]\nExecStartPre=/bin/sh -c 'test -e /run/etcd-failed-once || { touch /run/etcd-failed-once; exit 1; }'\n"
		if err := os.WriteFile(filepath.Join(dropIn, "fail-once.conf"), []byte(failOnce), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := h.Boot(); err != nil {
			t.Fatal(err)
		}
		t.Logf("after reboot: %q after %s", waitReady(t, h), time.Since(start).Round(time.Second))
		if p := unitProps(t, h, "etcd.service"); p["NRestarts"] == "0" {
			t.Errorf("etcd did not fail its first start (the test's drop-in): %v", p)
		}
		if out, err := h.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-b", "0", "-u", "edgefleet-pack.service"); err != nil || !strings.Contains(string(out), "imported at an earlier boot") {
			t.Errorf("the pack unit after reboot: %v\n%s\nwant it not read again", err, out)
		}
		if !bytes.Equal(readFile(t, filepath.Join(site, "pki", "ca.crt")), ca) {
			t.Error("the site CA changed across a reboot")
		}
		got := &corev1.Secret{}
		if err := siteClient(t, h.IP.String(), site).Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data["value"]) != value {
			t.Errorf("the Secret reads %q after reboot", got.Data["value"])
		}
	})
}

// installWithIdentity starts the global side for the test host of hn whose disk is upper — its API
// over TLS on the hosts' gateway, stopped in the cleanup — writes the site's identity on the
// disk (writeIdentity) and installs the site stack there, as the image carries both.
func installWithIdentity(t testing.TB, hn *testhosts.HostNet, upper string) *testfleet.Fleet {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := testfleet.StartFleet(t.Context(), testfleet.FleetOptions{TLS: true, APIHost: hn.Gateway.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Errorf("stop fleet: %v", err)
		}
	})
	writeIdentity(t, fleet, upper)
	install := exec.CommandContext(t.Context(), filepath.Join(root, "usb-image", "stack", "install.sh"), upper, filepath.Join(root, "bin"))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	return fleet
}

// writePack makes a release of the real node stack on fleet's global cluster and the site's image
// with it (edgefleet site image --with-release, on a small base) on the host's disk, named by
// /etc/edgefleet/pack-source as the boot medium would be; it returns the release.
func writePack(t testing.TB, fleet *testfleet.Fleet, upper string) *fleetv1.Release {
	t.Helper()
	ctx := t.Context()
	release, err := fleet.CreateStackRelease(ctx, siteNamespace, "edge-1", t.TempDir(), builders.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	medium := filepath.Join(upper, "var", "lib", "edgefleet-medium")
	if err := os.MkdirAll(medium, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet.Edgefleet(ctx, "site", "image", siteName, "-n", siteNamespace, "-o", filepath.Join(medium, "site.iso"),
		"--base", siteimagetest.Base(t), "--with-release", release.Name); err != nil {
		t.Fatalf("site image --with-release: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(upper, "etc", "edgefleet", "pack-source"), []byte("/var/lib/edgefleet-medium/site.iso\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return release
}

// fixtureProvisioner has the stack's Metal3 on the host's disk upper run with its fixture
// provisioner (a drop-in): no Ironic runs on the stack (see baremetal-operator.service), so the
// test harness plays Ironic's part (HostNet.PlayIronic).
func fixtureProvisioner(t testing.TB, upper string) {
	t.Helper()
	unit := readFile(t, filepath.Join(upper, "usr", "lib", "systemd", "system", "baremetal-operator.service"))
	exec := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/bmo `).FindIndex(unit)
	if exec == nil {
		t.Fatalf("baremetal-operator.service starts no /usr/local/bin/bmo:\n%s", unit)
	}
	line, _, _ := strings.Cut(string(unit[exec[0]:]), "\n")
	dir := filepath.Join(upper, "etc", "systemd", "system", "baremetal-operator.service.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := "[Service]\nExecStart=\n" + strings.Replace(line, "/usr/local/bin/bmo ", "/usr/local/bin/bmo -test-mode ", 1) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "fixture-provisioner.conf"), []byte(dropIn), 0o644); err != nil {
		t.Fatal(err)
	}
}

// grepLines are the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The Site the test host stands for on the global cluster.
const siteNamespace, siteName = "fleet", "site-0"

// writeIdentity creates the Site on fleet's global cluster, issues an enrollment token for it
// (edgefleet site token create, as the fleet admin) and writes the site identity into the
// host's /etc/edgefleet/identity, root-only.
func writeIdentity(t testing.TB, fleet *testfleet.Fleet, upper string) {
	t.Helper()
	ctx := t.Context()
	if err := fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: siteNamespace}}); err != nil {
		t.Fatal(err)
	}
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: siteNamespace, Name: siteName},
		Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: siteName + "-kubeconfig"}}}
	if err := fleet.Global.Client.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	token, err := fleet.Edgefleet(ctx, "site", "token", "create", siteName, "-n", siteNamespace, "--ttl", "1h")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(upper, "etc", "edgefleet", "identity")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"url":    []byte(fleet.APIURL + "\n"),
		"ca.crt": readFile(t, fleet.APICAFile),
		"token":  bytes.TrimSpace(token),
		"site":   []byte(siteNamespace + "/" + siteName + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits for /run/edgefleet/ready on the host and returns its line.
func waitReady(t testing.TB, h *testhosts.Host) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	for {
		out, err := h.Exec(ctx, "cat", "/run/edgefleet/ready")
		if line := strings.TrimSpace(string(out)); err == nil && strings.HasPrefix(line, readyMarker+" ") {
			return line
		}
		select {
		case <-ctx.Done():
			t.Fatalf("host %s: no %s in /run/edgefleet/ready: %v", h.Name, readyMarker, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// siteClient is an admin client of the host's site API server at its address, with the
// credentials site-init made on the host.
func siteClient(t *testing.T, ip, site string) client.Client {
	t.Helper()
	return clientAs(t, ip, site, "admin")
}

// clientAs is a client of the host's site API server with the certificate of identity id
// (pki/<id>.crt) made by site-init.
func clientAs(t *testing.T, ip, site, id string) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := sitev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(restConfigAs(t, ip, site, id), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// restConfigAs is the configuration of a client of the host's site API server with the
// certificate of identity id.
func restConfigAs(t *testing.T, ip, site, id string) *rest.Config {
	t.Helper()
	return &rest.Config{
		Host:    "https://" + ip + ":6443",
		Timeout: 15 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   readFile(t, filepath.Join(site, "pki", "ca.crt")),
			CertData: readFile(t, filepath.Join(site, "pki", id+".crt")),
			KeyData:  readFile(t, filepath.Join(site, "pki", id+".key")),
		},
	}
}

// unitProps are a unit's MainPID, NRestarts, ActiveState and SubState.
func unitProps(t *testing.T, h *testhosts.Host, unit string) map[string]string {
	t.Helper()
	out, err := h.Exec(t.Context(), "systemctl", "show", "-p", "MainPID,NRestarts,ActiveState,SubState", unit)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			props[k] = v
		}
	}
	return props
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(fmt.Errorf("read from the host's disk: %w", err))
	}
	return b
}
