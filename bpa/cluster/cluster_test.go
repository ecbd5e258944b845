package cluster_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

const kubernetesVersion = "v1.36.3"

func pkg(b testenv.BuiltPackage) install.Package {
	return install.Package{Manifest: b.Manifest, Digest: b.Digest, Archive: b.Open}
}

// TestBringUpOnRealHosts brings an application cluster up on five real hosts (needs root): 3
// control-plane hosts running etcd and kube-apiserver, 2 workers, a node agent on each. The BPA's
// SSH key, the cluster PKI and the admin kubeconfig live in a real Vault.
func TestBringUpOnRealHosts(t *testing.T) {
	ctx := t.Context()
	vault := testenv.StartVault(t)
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")

	// The BPA's SSH key is made here, kept in Vault only, and read back from there as the BPA
	// does.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshKey := pem.EncodeToMemory(block)
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
	hn := testenv.StartHosts(t, 5, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), testenv.HostOptions{})
	exec := sshexec.New(signer, &sshexec.MemoryHostKeys{}, sshexec.Options{Parallelism: 5})

	spec := cluster.Spec{
		Name:              "app",
		KubernetesVersion: kubernetesVersion,
		Packages: cluster.Packages{
			Etcd:      pkg(testenv.BuildPackage(t, cluster.Etcd, "3.6.16", nil)),
			APIServer: pkg(testenv.BuildPackage(t, cluster.APIServer, "1.36.3", nil)),
			NodeAgent: pkg(testenv.BuildPackage(t, cluster.NodeAgent, "0.1.0", nil)),
		},
	}
	for i, h := range hn.Hosts {
		spec.Hosts = append(spec.Hosts, cluster.Host{
			Name: h.Name, IP: h.IP, SSH: sshexec.Target{Name: h.Name, Addr: h.SSHAddr()},
			ControlPlane: i < 3, ProviderID: "metal3://site/" + h.Name,
		})
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the test's context is done by now
		defer cancel()
		for _, h := range hn.Hosts {
			out, _ := h.Exec(ctx, "journalctl", "--no-pager", "-n", "15", "-u", "etcd", "-u", "kube-apiserver", "-u", "edgefleet-node-agent")
			t.Logf("%s journal:\n%s", h.Name, out)
		}
	})
	bu := cluster.New(exec, store)
	start := time.Now()
	res, err := bu.Run(ctx, spec)
	if err != nil {
		t.Fatalf("bring-up: %v\nran: %v", err, res.Ran())
	}
	t.Logf("bring-up: %d install steps and %d files in %s", len(res.Ran()), res.Files, time.Since(start).Round(time.Second))

	t.Run("the API server answers through the stored kubeconfig, with every node registered", func(t *testing.T) {
		kc, err := store.Get(ctx, cluster.AdminKubeconfigSecret("app"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc["value"])
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
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

	t.Run("etcd has three members", func(t *testing.T) {
		bundle, err := pki.Ensure(ctx, store, cluster.PKISecret("app"), spec.PKISpec())
		if err != nil {
			t.Fatal(err)
		}
		files, err := bundle.ControlPlaneFiles(spec.Hosts[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(files["pki/apiserver-etcd-client.crt"], files["pki/apiserver-etcd-client.key"])
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(files["pki/etcd/ca.crt"])
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}, Timeout: 10 * time.Second}
		for _, h := range spec.Hosts[:3] {
			resp, err := hc.Post(fmt.Sprintf("https://%s:2379/v3/cluster/member/list", h.IP), "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var list struct {
				Members []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("%s: %v: %s", h.Name, err, body)
			}
			var names []string
			for _, m := range list.Members {
				names = append(names, m.Name)
			}
			if len(names) != 3 {
				t.Errorf("etcd on %s lists members %v, want the three control-plane hosts", h.Name, names)
			}
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
		needles := map[string][]byte{}
		for what, s := range secret {
			needles[what] = s
			needles[what+" (base64)"] = []byte(base64.StdEncoding.EncodeToString(s))
			if b, _ := pem.Decode(s); b != nil {
				needles[what+" (DER)"] = b.Bytes
			}
		}
		scanned := 0
		for _, dir := range dirs {
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				scanned++
				for what, n := range needles {
					if bytes.Contains(data, n) {
						t.Errorf("%s is in %s", what, p)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// The check can fail: the hosts do hold their own keys, which the same scan finds.
		serverKey, err := os.ReadFile(filepath.Join(hn.Hosts[0].Dir, "upper", "etc/kubernetes/pki/etcd/server.key"))
		if err != nil || len(serverKey) == 0 {
			t.Errorf("host-0's etcd server key is not on its disk (%v): the scan looked in the wrong place", err)
		}
		t.Logf("scanned %d files for %d secrets", scanned, len(needles))
	})
}
