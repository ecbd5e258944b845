package cluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

const kubernetesVersion = "v" + builders.KubernetesVersion

func pkg(b builders.BuiltPackage) install.Package {
	return install.Package{Manifest: b.Manifest, Digest: b.Digest, Archive: b.Open}
}

// TestBringUpOnRealHosts brings an application cluster of the real node stack up on five real
// hosts (needs root): 3 control-plane hosts (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and 2 workers, each host running containerd, the pod network, kubelet and
// kube-proxy. The BPA's SSH key, the cluster PKI and the admin kubeconfig live in a real Vault.
func TestBringUpOnRealHosts(t *testing.T) {
	ctx := t.Context()
	vault := testvault.StartVault(t)
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")

	// The BPA's SSH key is made here, kept in Vault only, and read back from there as the BPA
	// does.
	sshKey, _ := testhosts.SSHKeyPEM(t)
	if err := store.Put(ctx, "bpa-ssh-key", map[string][]byte{"private-key": sshKey}); err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, "bpa-ssh-key")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sshexec.ParseSigner(stored["private-key"])
	if err != nil {
		t.Fatal(err)
	}
	hn := testhosts.StartHosts(t, 5, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), testhosts.HostOptions{})
	// Host keys are pinned in Vault too, so that they outlive the BPA.
	hostKeys := &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}
	exec := sshexec.New(signer, hostKeys, sshexec.Options{Parallelism: 5})

	pause := builders.BuildImage(t, "pause")
	spec := cluster.Spec{
		Name:              "app",
		KubernetesVersion: kubernetesVersion,
		Workers:           2,
		Images:            []install.Image{{Name: pause.Tag, Digest: pause.Digest, Archive: sshexec.Bytes(pause.Archive)}},
	}
	for _, p := range builders.StackPackages(builders.KubernetesVersion) {
		spec.Packages = append(spec.Packages, pkg(builders.BuildPackage(t, p.Name, p.Version, nil)))
	}
	for i, h := range hn.Hosts {
		spec.Hosts = append(spec.Hosts, cluster.Host{
			Name: h.Name, IP: h.IP, SSH: sshexec.Target{Name: h.Name, Addr: h.SSHAddr()},
			ControlPlane: i >= 2, ProviderID: "metal3://site/" + h.Name, // workers first, so that order shows
		})
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the test's context is done by now
		defer cancel()
		for _, h := range hn.Hosts {
			for _, u := range nodeStackUnits {
				out, _ := h.Exec(ctx, "journalctl", "--no-pager", "-n", "15", "-u", u)
				if !strings.Contains(string(out), "-- No entries --") {
					t.Logf("%s: journal of %s:\n%s", h.Name, u, out)
				}
			}
		}
	})
	// The BPA killed once etcd is active on the three control-plane hosts (containerd and the
	// pod network, of the same level, may be anywhere): the next run does not redo etcd.
	killCtx, kill := context.WithCancel(ctx)
	_, err = cluster.New(install.New(&killAfter{Runner: exec, step: "activate", pkg: "etcd", n: 3, kill: kill}), store).Run(killCtx, spec)
	kill()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("bring-up killed after etcd: %v, want cancelled", err)
	}
	// The BPA restarted: a new executor, its pins read back from Vault, where the killed run
	// left those of the control-plane hosts at least.
	for _, h := range spec.Hosts[2:] {
		if pinned, err := hostKeys.Get(ctx, h.Name); err != nil || pinned == nil {
			t.Fatalf("%s: pinned in Vault: %v (%v)", h.Name, pinned != nil, err)
		}
	}
	exec = sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}, sshexec.Options{Parallelism: 5})
	bu := cluster.New(install.New(exec), store)
	start := time.Now()
	res, err := bu.Run(ctx, spec)
	if err != nil {
		t.Fatalf("bring-up: %v\nran: %v", err, res.Ran())
	}
	t.Logf("bring-up after the kill: %d install steps and %d files in %s", len(res.Ran()), res.Files, time.Since(start).Round(time.Second))
	for _, r := range res.Ran() {
		if strings.Contains(r, "/etcd: ") {
			t.Errorf("etcd was done before the kill, but the run after it ran %s", r)
		}
	}
	if len(res.Ran()) == 0 {
		t.Error("the run after the kill ran nothing")
	}

	cs := appClient(t, store, "app")

	t.Run("the API server answers through the stored kubeconfig, with every node registered", func(t *testing.T) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := map[string]string{}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready[n.Name] = n.Status.NodeInfo.KubeletVersion + " " + n.Spec.ProviderID
				}
			}
		}
		for _, h := range spec.Hosts {
			if got, want := ready[h.Name], kubernetesVersion+" "+h.ProviderID; got != want {
				t.Errorf("node %s: %q, want Ready at %q", h.Name, got, want)
			}
		}
		if len(nodes.Items) != 5 {
			t.Errorf("%d nodes, want 5", len(nodes.Items))
		}
	})

	etcdClient := func(t *testing.T) *http.Client {
		t.Helper()
		bundle, err := pki.Ensure(ctx, store, cluster.PKISecret("app"), spec.PKISpec())
		if err != nil {
			t.Fatal(err)
		}
		files, err := bundle.ControlPlaneFiles(spec.Hosts[2].Name)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(files["pki/apiserver-etcd-client.crt"], files["pki/apiserver-etcd-client.key"])
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(files["pki/etcd/ca.crt"])
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}, Timeout: 10 * time.Second}
	}
	// etcdCall posts a request to the v3 JSON gateway of etcd on host h and decodes the answer.
	etcdCall := func(t *testing.T, hc *http.Client, h cluster.Host, path string, req, into any) {
		t.Helper()
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Post(fmt.Sprintf("https://%s:2379%s", h.IP, path), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(answer, into); err != nil {
			t.Fatalf("%s %s: %v: %s", h.Name, path, err, answer)
		}
	}

	// storedSecret is what etcd on host h holds for Secret default/name: its stored form,
	// encrypted or not.
	storedSecret := func(t *testing.T, h cluster.Host, name string) []byte {
		t.Helper()
		var kv struct {
			KVs []struct {
				Value []byte `json:"value"`
			} `json:"kvs"`
		}
		etcdCall(t, etcdClient(t), h, "/v3/kv/range", map[string][]byte{"key": []byte("/registry/secrets/default/" + name)}, &kv)
		if len(kv.KVs) != 1 {
			t.Fatalf("etcd holds %d values under the Secret's key, want 1", len(kv.KVs))
		}
		return kv.KVs[0].Value
	}
	// newSecret creates a Secret in default with a random name and value, starting with prefix.
	newSecret := func(t *testing.T, prefix string) (name, value string) {
		t.Helper()
		name, value = prefix+strings.ToLower(rand.Text()), prefix+rand.Text()
		if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"value": value},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return name, value
	}

	t.Run("etcd has three members", func(t *testing.T) {
		hc := etcdClient(t)
		for _, h := range spec.Hosts[2:] {
			var list struct {
				Members []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			etcdCall(t, hc, h, "/v3/cluster/member/list", struct{}{}, &list)
			var names []string
			for _, m := range list.Members {
				names = append(names, m.Name)
			}
			if len(names) != 3 {
				t.Errorf("etcd on %s lists members %v, want the three control-plane hosts", h.Name, names)
			}
		}
	})

	t.Run("Secrets are encrypted in etcd, with the key kept in Vault", func(t *testing.T) {
		name, value := newSecret(t, "at-rest-")
		if got, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{}); err != nil || string(got.Data["value"]) != value {
			t.Fatalf("the Secret read back through the API server: %v", err)
		}
		stored := storedSecret(t, spec.Hosts[2], name)
		if !bytes.HasPrefix(stored, []byte("k8s:enc:secretbox:v1:bpa-1:")) || bytes.Contains(stored, []byte(value)) {
			t.Errorf("etcd holds %.40q…, want it encrypted by secretbox key bpa-1", stored)
		}
		// Nowhere in the members' files either, write-ahead logs included; the Secret's name,
		// which etcd keeps in clear in the key, shows the scan looks in the right place.
		var dirs []string
		for _, h := range hn.Hosts[2:] {
			dirs = append(dirs, filepath.Join(h.Dir, "upper", "var/lib/etcd"))
		}
		found, _, err := testutil.FindSecrets(dirs, map[string][]byte{"the Secret's value": []byte(value), "the Secret's name": []byte(name)})
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, f := range found {
			if strings.Contains(f, "the Secret's value") {
				t.Error(f)
			} else {
				named++
			}
		}
		if named == 0 {
			t.Error("the Secret's name is in no file of etcd's data directories: the scan looked in the wrong place")
		}
		pkiData, err := store.Get(ctx, cluster.PKISecret("app"))
		if err != nil || len(pkiData["secretbox.key"]) == 0 {
			t.Errorf("the stored PKI has no secretbox.key (%v)", err)
		}
	})

	t.Run("the Secret encryption key rotates: every Secret stored again under the new key, the old one dropped last", func(t *testing.T) {
		if got := res.SecretEncryption; got.Key != "bpa-1" || got.Reencrypted != "bpa-1" || got.Phase != "" {
			t.Errorf("after bring-up: %+v, want key bpa-1 with every Secret stored under it", got)
		}
		name, value := newSecret(t, "rotated-")
		storedUnder := func(t *testing.T) string {
			t.Helper()
			stored := storedSecret(t, spec.Hosts[3], name)
			if bytes.Contains(stored, []byte(value)) {
				t.Fatalf("etcd holds the Secret's value in clear: %.40q…", stored)
			}
			key, _, _ := bytes.Cut(bytes.TrimPrefix(stored, []byte("k8s:enc:secretbox:v1:")), []byte(":"))
			return string(key)
		}
		if got := storedUnder(t); got != "bpa-1" {
			t.Fatalf("the Secret is stored under key %q, want bpa-1", got)
		}
		rotate := spec
		rotate.SecretEncryptionKeyRotations = 1
		for _, want := range []pki.SecretEncryption{
			{Key: "bpa-2", Phase: pki.RotationUseNew, Reencrypted: "bpa-1"},
			{Key: "bpa-2", Phase: pki.RotationDropOld, Reencrypted: "bpa-2"},
			{Key: "bpa-2", Generation: 1, Reencrypted: "bpa-2"},
		} {
			start := time.Now()
			res, err := bu.Run(ctx, rotate)
			if err != nil {
				t.Fatalf("run towards %+v: %v", want, err)
			}
			t.Logf("run towards %+v: %s", want, time.Since(start).Round(time.Millisecond))
			for i, l := range res.Levels {
				t.Logf("  level %d (%s): %s, slowest %s/%s %s", i, strings.Join(l.Packages, ", "), l.Took.Round(time.Millisecond), l.Slowest().Host, l.Slowest().Package, l.Slowest().Took.Round(time.Millisecond))
			}
			if res.SecretEncryption != want {
				t.Errorf("after a run: %+v, want %+v", res.SecretEncryption, want)
			}
			// The phase's configuration reached every API server, each restarted for it.
			for _, h := range spec.Hosts[2:] {
				if !slices.ContainsFunc(res.Ran(), func(r string) bool { return strings.HasPrefix(r, h.Name+"/kube-apiserver: ") }) {
					t.Errorf("run towards %s: kube-apiserver on %s not restarted (ran %v)", want.Phase, h.Name, res.Ran())
				}
			}
			if got, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{}); err != nil || string(got.Data["value"]) != value {
				t.Fatalf("the Secret read back after a run towards %+v: %v", want, err)
			}
		}
		if got := storedUnder(t); got != "bpa-2" {
			t.Errorf("after the rotation the Secret is stored under key %q, want bpa-2", got)
		}
		res, err := bu.Run(ctx, rotate)
		if err != nil || len(res.Ran()) != 0 || res.Files != 0 || res.Reencrypted != nil {
			t.Errorf("a run after the rotation: %v, ran %v, wrote %d files, re-encrypted %+v; want nothing done", err, res.Ran(), res.Files, res.Reencrypted)
		}
	})

	t.Run("running again redoes nothing", func(t *testing.T) {
		res, err := bu.Run(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Ran()) != 0 || res.Files != 0 {
			t.Errorf("second run: ran %v, wrote %d files", res.Ran(), res.Files)
		}
	})

	installer := install.New(exec)
	t.Run("a package the BPA has never heard of goes where its manifest says", func(t *testing.T) {
		hello := pkg(builders.BuildPackage(t, "edge-hello", "1.0.0", nil))
		withHello := spec
		withHello.Packages = append(slices.Clone(spec.Packages), hello)
		res, err := bu.Run(ctx, withHello)
		if err != nil {
			t.Fatalf("run: %v\nran: %v", err, res.Ran())
		}
		for _, r := range res.Ran() {
			if !strings.Contains(r, "/edge-hello: ") {
				t.Errorf("adding edge-hello ran %s", r)
			}
		}
		for _, h := range spec.Hosts {
			st, err := installer.Installed(ctx, h.SSH, "edge-hello")
			if err != nil {
				t.Fatal(err)
			}
			if h.ControlPlane {
				if st.Current != "" {
					t.Errorf("%s is control plane, but has edge-hello %+v (its manifest says hosts: worker)", h.Name, st)
				}
				continue
			}
			if st.Current != "1.0.0" || st.Active != "1.0.0" {
				t.Errorf("%s: edge-hello %+v, want 1.0.0 active", h.Name, st)
			}
			cidr, err := cluster.NodePodCIDR(cluster.DefaultPodCIDR, h.IP)
			if err != nil {
				t.Fatal(err)
			}
			out, err := hn.Hosts[slices.IndexFunc(hn.Hosts, func(th *testhosts.Host) bool { return th.Name == h.Name })].Exec(ctx, "cat", "/run/edge-hello/greeting")
			if want := fmt.Sprintf("hello from %s (%s), pods in %s, cluster app\n", h.Name, h.IP, cidr); err != nil || string(out) != want {
				t.Errorf("%s: the running service says %q (%v), want %q", h.Name, out, err, want)
			}
		}
	})

	versions := func(t *testing.T, name string) map[string]install.State {
		t.Helper()
		out := map[string]install.State{}
		for _, h := range spec.Hosts {
			st, err := installer.Installed(ctx, h.SSH, name)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = st
		}
		return out
	}
	// serving checks that the API server answers and every node is Ready and schedulable.
	serving := func(t *testing.T) {
		t.Helper()
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("the API server does not answer: %v", err)
		}
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			if !ready || n.Spec.Unschedulable || n.Annotations[cluster.CordonedAnnotation] != "" {
				t.Errorf("node %s: ready %v, unschedulable %v, annotations %v", n.Name, ready, n.Spec.Unschedulable, n.Annotations)
			}
		}
	}
	t.Run("a good patch rolls through every node, control plane first, one node at a time", func(t *testing.T) {
		// Watch cordons: never more than one node at once.
		w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cordons := map[string]int{}
		maxCordoned := 0
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			now := map[string]bool{}
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					continue
				}
				if n.Spec.Unschedulable && !now[n.Name] {
					cordons[n.Name]++
				}
				now[n.Name] = n.Spec.Unschedulable
				c := 0
				for _, u := range now {
					if u {
						c++
					}
				}
				maxCordoned = max(maxCordoned, c)
			}
		}()
		res, err := bu.Patch(ctx, withPackage(spec, pkg(builders.BuildPackage(t, "kubelet", "1.36.3-2", nil))), "kubelet")
		w.Stop()
		<-watched
		if err != nil {
			t.Fatal(err)
		}
		if got, want := order(res), []string{"host-2", "host-3", "host-4", "host-0", "host-1"}; !slices.Equal(got, want) {
			t.Errorf("patched %v, want %v", got, want)
		}
		for _, n := range res.Nodes {
			if n.From != "1.36.3" || n.To != "1.36.3-2" || n.Skipped {
				t.Errorf("node %+v", n)
			}
			if cordons[n.Host] != 1 {
				t.Errorf("node %s cordoned %d times, want once", n.Host, cordons[n.Host])
			}
		}
		if maxCordoned != 1 {
			t.Errorf("up to %d nodes cordoned at once, want 1", maxCordoned)
		}
		for h, st := range versions(t, "kubelet") {
			if st.Current != "1.36.3-2" || st.Previous != "1.36.3" || st.Active != "1.36.3-2" {
				t.Errorf("%s: kubelet %+v", h, st)
			}
		}
		serving(t)
		// Again: every node has it, nothing to do.
		res, err = bu.Patch(ctx, withPackage(spec, pkg(builders.BuildPackage(t, "kubelet", "1.36.3-2", nil))), "kubelet")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range res.Nodes {
			if !n.Skipped {
				t.Errorf("second patch touched %s", n.Host)
			}
		}
	})

	t.Run("an etcd patch goes member by member and keeps quorum", func(t *testing.T) {
		res, err := bu.Patch(ctx, withPackage(spec, pkg(builders.BuildPackage(t, "etcd", "3.6.16-edgefleet.1", nil))), "etcd")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := order(res), []string{"host-2", "host-3", "host-4"}; !slices.Equal(got, want) {
			t.Errorf("patched %v, want the control plane %v", got, want)
		}
		for h, st := range versions(t, "etcd") {
			cp := h == "host-2" || h == "host-3" || h == "host-4"
			if cp && st.Current != "3.6.16-edgefleet.1" || !cp && st.Current != "" {
				t.Errorf("%s: etcd %+v", h, st)
			}
		}
		serving(t)
	})

	t.Run("a patch failing its health check rolls the node back and stops", func(t *testing.T) {
		broken := builders.BuildPackage(t, "kubelet", "1.36.3-3", func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, "hooks", "health-check"), []byte("#!/bin/sh\necho 'kubelet 1.36.3-3 is broken' >&2\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			m, err := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), bytes.Replace(m, []byte("timeoutSeconds: 120"), []byte("timeoutSeconds: 5"), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		})
		res, err := bu.Patch(ctx, withPackage(spec, pkg(broken)), "kubelet")
		var herr *install.HealthError
		if !errors.As(err, &herr) {
			t.Fatalf("err %v, want a health-check failure", err)
		}
		if herr.Host != "host-2" || herr.RolledBackTo != "1.36.3-2" || !strings.Contains(err.Error(), "kubelet 1.36.3-3 is broken") || !strings.Contains(err.Error(), "stopped at host host-2") {
			t.Errorf("error %q (%+v)", err, herr)
		}
		if got := order(res); !slices.Equal(got, []string{"host-2"}) {
			t.Errorf("patch went through %v, want it to stop at host-2", got)
		}
		for h, st := range versions(t, "kubelet") {
			if st.Current != "1.36.3-2" || st.Active != "1.36.3-2" {
				t.Errorf("%s: kubelet %+v, want 1.36.3-2", h, st)
			}
		}
		for _, h := range hn.Hosts[3:] {
			out, err := h.Exec(ctx, "ls", install.DefaultRoot+"/kubelet/versions")
			if err != nil || strings.Contains(string(out), "1.36.3-3") {
				t.Errorf("%s has %q (%v): the patch went past the failed node", h.Name, out, err)
			}
		}
		serving(t)
	})

	t.Run("keys and kubeconfigs are only in Vault", func(t *testing.T) {
		pkiData, err := store.Get(ctx, cluster.PKISecret("app"))
		if err != nil {
			t.Fatal(err)
		}
		kc, err := store.Get(ctx, cluster.AdminKubeconfigSecret("app"))
		if err != nil {
			t.Fatal(err)
		}
		secret := map[string][]byte{"the BPA's SSH private key": sshKey, "the admin kubeconfig": kc["value"]}
		for _, k := range []string{"ca.key", "etcd-ca.key", "front-proxy-ca.key", "admin.key"} {
			if len(pkiData[k]) == 0 {
				t.Fatalf("the stored PKI has no %s", k)
			}
			secret[k] = pkiData[k]
		}
		// Where a key could leak to: every host's disk (its overlay's upper layer) and every
		// directory this test made (the hosts', Vault's, the packages').
		dirs := []string{filepath.Dir(t.TempDir())}
		for _, h := range hn.Hosts {
			dirs = append(dirs, filepath.Join(h.Dir, "upper"))
		}
		found, scanned, err := testutil.FindSecrets(dirs, secret)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Error(f)
		}
		// The check can fail: the hosts do hold their own keys, which the same scan finds.
		serverKey, err := os.ReadFile(filepath.Join(hn.Hosts[2].Dir, "upper", "etc/kubernetes/pki/etcd/server.key"))
		if err != nil || len(serverKey) == 0 {
			t.Errorf("host-2's etcd server key is not on its disk (%v): the scan looked in the wrong place", err)
		}
		t.Logf("scanned %d files for %d secrets", scanned, len(secret))
	})

	t.Run("a changed host key is refused after a restart: a worker is left out, a control-plane host stops the run", func(t *testing.T) {
		// A host reprovisioned behind the BPA's back: new host keys.
		newKeys := func(h *testhosts.Host) {
			t.Helper()
			if out, err := h.Exec(ctx, "sh", "-c", "rm /etc/ssh/ssh_host_* && systemctl restart ssh.service"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if _, err := h.WaitSSH(ctx); err != nil {
				t.Fatal(err)
			}
		}
		restarted := cluster.New(install.New(sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}, sshexec.Options{})), store)
		var hk *sshexec.HostKeyError
		newKeys(hn.Hosts[0]) // a worker
		res, err := restarted.Run(ctx, spec)
		if err != nil || len(res.LeftOut) != 1 || res.LeftOut[0].Host != hn.Hosts[0].Name || !errors.As(res.LeftOut[0].Err, &hk) {
			t.Fatalf("run: left out %+v, %v; want %s left out with a *HostKeyError", res.LeftOut, err, hn.Hosts[0].Name)
		}
		newKeys(hn.Hosts[2]) // a control-plane host
		_, err = restarted.Run(ctx, spec)
		if !errors.As(err, &hk) || hk.Host != hn.Hosts[2].Name {
			t.Fatalf("err %v, want a *HostKeyError for %s", err, hn.Hosts[2].Name)
		}
	})
}

// appConfig is the client config of the application cluster, from the admin kubeconfig the
// BPA saved in store.
func appConfig(t *testing.T, store secrets.Store, name string) *rest.Config {
	t.Helper()
	kc, err := store.Get(t.Context(), cluster.AdminKubeconfigSecret(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc["value"])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// appClient is a client of the application cluster (appConfig).
func appClient(t *testing.T, store secrets.Store, name string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(appConfig(t, store, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// order lists the hosts a patch went through, in order.
func order(r *cluster.PatchResult) []string {
	var hs []string
	for _, n := range r.Nodes {
		hs = append(hs, n.Host)
	}
	return hs
}

// withPackage is spec with p in place of its package of the same name.
func withPackage(spec cluster.Spec, p install.Package) cluster.Spec {
	spec.Packages = slices.Clone(spec.Packages)
	for i, old := range spec.Packages {
		if old.Manifest.Name == p.Manifest.Name {
			spec.Packages[i] = p
		}
	}
	return spec
}

// killAfter is a Runner that kills the BPA (cancels its context) once the step named step of
// package pkg has completed n times.
type killAfter struct {
	install.Runner
	step, pkg string
	n         int
	kill      context.CancelFunc

	mu   sync.Mutex
	seen int
}

func (k *killAfter) Run(ctx context.Context, target sshexec.Target, step sshexec.Step) (sshexec.Result, error) {
	res, err := k.Runner.Run(ctx, target, step)
	// The installer's steps name the package's directory, quoted for the shell.
	if step.Name == k.step && strings.Contains(step.Command, "'"+install.DefaultRoot+"/"+k.pkg+"'") && err == nil {
		k.mu.Lock()
		k.seen++
		if k.seen == k.n {
			k.kill()
		}
		k.mu.Unlock()
	}
	return res, err
}
