package pki_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// TestRealEtcdAndAPIServer proves the PKI with the real programs: the PKI is ensured in a real
// Vault, the control-plane member's files are written to disk, and bin/etcd (client and peer
// TLS with client-certificate authentication) and bin/kube-apiserver (x509 client
// authentication, Node and RBAC authorization, NodeRestriction, the front proxy's request
// headers, service-account tokens) run on them. Clients then use the bundle's kubeconfigs.
func TestRealEtcdAndAPIServer(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	etcdBin, apiserverBin := filepath.Join(root, "bin", "etcd"), filepath.Join(root, "bin", "kube-apiserver")
	for _, bin := range []string{etcdBin, apiserverBin} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: run make tools", bin)
		}
	}
	ctx := t.Context()
	vault := testvault.StartVault(t)
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")

	loopback := netip.MustParseAddr("127.0.0.1")
	etcdClientPort, etcdPeerPort, apiPort := freePort(t), freePort(t), freePort(t)
	spec := pki.Spec{
		ClusterName:  "app",
		APIEndpoint:  "127.0.0.1",
		APIPort:      apiPort,
		ControlPlane: []pki.Member{{Name: "cp-0", IP: loopback}},
		Nodes:        []pki.Member{{Name: "worker-0", IP: netip.MustParseAddr("127.0.0.2")}},
	}
	const name = "app.pki"
	bundle, err := pki.Ensure(ctx, store, name, spec)
	if err != nil {
		t.Fatalf("Ensure in Vault: %v", err)
	}
	// Again, as after a restart of the BPA: Vault keeps one version of the secret.
	if _, err := pki.Ensure(ctx, store, name, spec); err != nil {
		t.Fatalf("second Ensure in Vault: %v", err)
	}
	meta, err := vault.Client.KVv2("secret").GetMetadata(ctx, "edgefleet/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if meta.CurrentVersion != 1 {
		t.Errorf("the secret is at version %d after two Ensures of one spec, want 1", meta.CurrentVersion)
	}

	dir := t.TempDir()
	cpFiles, err := bundle.ControlPlaneFiles("cp-0")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, cpFiles)
	p := func(rel string) string { return filepath.Join(dir, "pki", rel) }

	// etcd, one member, TLS everywhere.
	clientURL := "https://127.0.0.1:" + strconv.Itoa(etcdClientPort)
	peerURL := "https://127.0.0.1:" + strconv.Itoa(etcdPeerPort)
	etcd := startEtcd(t, etcdBin, dir, "cp-0", clientURL, peerURL, "cp-0="+peerURL)
	etcdCAs := certPool(t, cpFiles["pki/etcd/ca.crt"])
	apiserverEtcdClient := keyPairOf(t, cpFiles, "pki/apiserver-etcd-client")
	waitFor(t, "etcd to be healthy", []*process{etcd}, func() error {
		return httpsGet(clientURL+"/health", etcdCAs, &apiserverEtcdClient, `"health":"true"`)
	})
	// The peer port serves the peer certificate and wants one signed by the etcd CA.
	peer := keyPairOf(t, cpFiles, "pki/etcd/peer")
	if err := httpsGet(peerURL+"/members", etcdCAs, &peer, "cp-0"); err != nil {
		t.Errorf("etcd peer endpoint with the peer certificate: %v", err)
	}
	nodeFiles, err := bundle.NodeFiles("worker-0")
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := keyPairOf(t, map[string][]byte{"n.crt": nodeFiles["pki/node-client.crt"], "n.key": nodeFiles["pki/node-client.key"]}, "n")
	for _, tc := range []struct {
		what string
		url  string
		cert *tls.Certificate
	}{
		{"client port without a client certificate", clientURL + "/health", nil},
		{"client port with a certificate of the cluster CA", clientURL + "/health", &nodeClient},
		{"peer port without a client certificate", peerURL + "/members", nil},
	} {
		if err := httpsGet(tc.url, etcdCAs, tc.cert, ""); err == nil {
			t.Errorf("etcd %s: accepted, want refused", tc.what)
		}
	}

	apiserver := startProcess(t, dir, "kube-apiserver", apiserverBin,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--etcd-servers="+clientURL,
		"--etcd-cafile="+p("etcd/ca.crt"), "--etcd-certfile="+p("apiserver-etcd-client.crt"), "--etcd-keyfile="+p("apiserver-etcd-client.key"),
		"--client-ca-file="+p("ca.crt"),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range="+pki.DefaultServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--requestheader-client-ca-file="+p("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+p("front-proxy-client.crt"), "--proxy-client-key-file="+p("front-proxy-client.key"),
	)
	running := []*process{etcd, apiserver}

	adminKubeconfig, err := bundle.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	adminConfig := restConfig(t, adminKubeconfig)
	admin := kubernetes.NewForConfigOrDie(adminConfig)
	// Ready means every post-start hook ran: RBAC's default roles are in place.
	waitFor(t, "kube-apiserver to be ready", running, func() error {
		_, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	var namespaces []string
	waitFor(t, "the admin to list namespaces with the default one", running, func() error {
		list, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		namespaces = namespaces[:0]
		for _, ns := range list.Items {
			namespaces = append(namespaces, ns.Name)
		}
		if !slices.Contains(namespaces, "default") {
			return fmt.Errorf("namespaces %v", namespaces)
		}
		return nil
	})
	assertUser(t, "admin", admin, "kubernetes-admin", "system:masters")

	// The node creates its own Node object, and no other.
	nodeKubeconfig, err := bundle.NodeKubeconfig("worker-0")
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(restConfig(t, nodeKubeconfig))
	assertUser(t, "node", node, "system:node:worker-0", "system:nodes")
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("worker-0 creating its Node: %v", err)
	}
	if _, err := node.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{}); err != nil {
		t.Errorf("worker-0 reading its Node: %v", err)
	}
	_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("worker-0 creating another node's Node: %v, want forbidden", err)
	}
	if _, err := node.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("worker-0 listing namespaces: %v, want forbidden", err)
	}

	// A client certificate of another CA is refused, though the server is trusted.
	other, err := pki.Ensure(ctx, store, "other.pki", spec)
	if err != nil {
		t.Fatal(err)
	}
	otherKubeconfig, err := other.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	foreign := restConfig(t, otherKubeconfig)
	foreign.CAData = adminConfig.CAData
	_, err = kubernetes.NewForConfigOrDie(foreign).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("admin certificate of another CA: %v, want 401 Unauthorized", err)
	}
	// And the server's certificate is not trusted by the other cluster's kubeconfig.
	if _, err := kubernetes.NewForConfigOrDie(restConfig(t, otherKubeconfig)).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil ||
		!errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("another cluster's kubeconfig: %v, want a certificate verification error", err)
	}

	// The front proxy's client certificate carries a user in request headers.
	proxied := rest.CopyConfig(adminConfig)
	proxied.CertData, proxied.KeyData = cpFiles["pki/front-proxy-client.crt"], cpFiles["pki/front-proxy-client.key"]
	proxied.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Remote-User", "alice")
			r.Header.Set("X-Remote-Group", "developers")
			return rt.RoundTrip(r)
		})
	}
	assertUser(t, "front proxy", kubernetes.NewForConfigOrDie(proxied), "alice", "developers")

	// A service-account token signed with sa.key is accepted with sa.pub.
	sa, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	bearer := rest.AnonymousClientConfig(adminConfig)
	bearer.BearerToken = tok.Status.Token
	assertUser(t, "service account", kubernetes.NewForConfigOrDie(bearer), "system:serviceaccount:default:probe", "system:serviceaccounts")

	// The ClusterRole view is aggregated: kube-controller-manager fills in its rules, as in
	// the clusters the BPA builds (its controller's own identity there; the admin's here).
	writeFiles(t, dir, map[string][]byte{"admin.conf": adminKubeconfig})
	kcm := startProcess(t, dir, "kube-controller-manager", filepath.Join(root, "bin", "kube-controller-manager"),
		"--kubeconfig="+filepath.Join(dir, "admin.conf"), "--controllers=clusterrole-aggregation",
		"--leader-elect=false", "--secure-port=0")
	running = append(running, kcm)
	waitFor(t, "kube-controller-manager to aggregate the ClusterRole view", running, func() error {
		view, err := admin.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(view.Rules) == 0 {
			return errors.New("view has no rules yet")
		}
		return nil
	})
	clusterUsers(t, store, name, adminConfig.Host, admin, root)
}

// clusterUsers proves cluster users' certificates (issue 17) on the running kube-apiserver:
// SignClient signs the public key of a CSR made on the user's side for the identity
// clustercred makes; with the BPA's binding of edgefleet:cluster-users to view, kubectl lists
// pods and is refused Secrets; a global user in system:masters stays a plain cluster user; an
// expired certificate is refused.
func clusterUsers(t *testing.T, store pki.Store, pkiName, server string, admin kubernetes.Interface, root string) {
	ctx := t.Context()
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, clustercred.UsersBinding(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the BPA's binding of cluster users: %v", err)
	}
	kubectl := func(kubeconfig []byte, args ...string) (string, error) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig", path, "--request-timeout=20s"}, args...)...).CombinedOutput()
		return string(out), err
	}
	// A global identity in system:masters asks: it is prefixed, never a system: identity here.
	id, err := clustercred.IdentityOf("alice", []string{"dev", "system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(ttl time.Duration) []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		csr, err := clustercred.NewCSR(key)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := clustercred.PublicKey(csr, id)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		cert, ca, err := pki.SignClient(ctx, store, pkiName, pki.ClientRequest{PublicKey: pub, User: id.User, Groups: id.Groups, Now: now, NotAfter: now.Add(ttl)})
		if err != nil {
			t.Fatalf("SignClient: %v", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clustercred.Kubeconfig("app", server, id.User, ca, cert, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err != nil {
			t.Fatal(err)
		}
		return kc
	}
	// A certificate of a few seconds works, then expires.
	const shortTTL = 5 * time.Second
	shortExpiry := time.Now().Add(shortTTL)
	short := kubeconfig(shortTTL)
	if out, err := kubectl(short, "get", "pods", "-n", "default"); err != nil {
		t.Errorf("kubectl get pods with a certificate of %s, just issued: %v: %s", shortTTL, err, out)
	}
	user := kubeconfig(time.Hour)
	if out, err := kubectl(user, "get", "pods", "-n", "default"); err != nil {
		t.Errorf("kubectl get pods as a cluster user: %v: %s", err, out)
	}
	out, err := kubectl(user, "get", "secrets", "-n", "kube-system")
	if err == nil || !strings.Contains(out, "Forbidden") || !strings.Contains(out, `"edgefleet:alice"`) {
		t.Errorf("kubectl get secrets -n kube-system as a cluster user: %v: %s; want Forbidden for edgefleet:alice", err, out)
	}
	out, err = kubectl(user, "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}")
	if err != nil || strings.Contains(out, `"system:masters"`) || !strings.Contains(out, "edgefleet:system:masters") {
		t.Errorf("kubectl auth whoami: %v: %s; want edgefleet:system:masters, never system:masters", err, out)
	}
	time.Sleep(time.Until(shortExpiry.Add(time.Second)))
	out, err = kubectl(short, "get", "pods", "-n", "default")
	if err == nil || !strings.Contains(out, "Unauthorized") {
		t.Errorf("kubectl get pods with an expired certificate: %v: %s; want Unauthorized", err, out)
	}
	// A PKI the store does not hold cannot sign.
	if _, _, err := pki.SignClient(ctx, store, "nothing.pki", pki.ClientRequest{User: id.User, Now: time.Now(), NotAfter: time.Now().Add(time.Hour)}); !errors.Is(err, pki.ErrNoPKI) {
		t.Errorf("SignClient without a PKI: %v, want ErrNoPKI", err)
	}
}

// TestRealEtcdClusterPeerTLS proves the etcd peer certificates with the real bin/etcd: three
// members on three loopback addresses form one cluster over mutually authenticated TLS, each
// checking the others' certificates against the etcd CA and their addresses.
func TestRealEtcdClusterPeerTLS(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	etcdBin := filepath.Join(root, "bin", "etcd")
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("%s is missing: run make tools", etcdBin)
	}
	vault := testvault.StartVault(t)
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")
	spec := pki.Spec{ClusterName: "app", APIEndpoint: "127.0.0.1"}
	for i := range 3 {
		spec.ControlPlane = append(spec.ControlPlane, pki.Member{Name: fmt.Sprintf("cp-%d", i), IP: netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})})
	}
	bundle, err := pki.Ensure(t.Context(), store, "app.pki", spec)
	if err != nil {
		t.Fatalf("Ensure in Vault: %v", err)
	}
	type member struct {
		name, ip, clientURL, peerURL, dir string
	}
	var members []member
	var initialCluster []string
	for _, m := range spec.ControlPlane {
		ip := m.IP.String()
		mb := member{name: m.Name, ip: ip, clientURL: "https://" + net.JoinHostPort(ip, strconv.Itoa(freePort(t))),
			peerURL: "https://" + net.JoinHostPort(ip, strconv.Itoa(freePort(t))), dir: t.TempDir()}
		members = append(members, mb)
		initialCluster = append(initialCluster, mb.name+"="+mb.peerURL)
	}
	var procs []*process
	for _, m := range members {
		files, err := bundle.ControlPlaneFiles(m.name)
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, m.dir, files)
		procs = append(procs, startEtcd(t, etcdBin, m.dir, m.name, m.clientURL, m.peerURL, strings.Join(initialCluster, ",")))
	}
	files, err := bundle.ControlPlaneFiles("cp-0")
	if err != nil {
		t.Fatal(err)
	}
	etcdCAs := certPool(t, files["pki/etcd/ca.crt"])
	client := keyPairOf(t, files, "pki/apiserver-etcd-client")
	for _, m := range members {
		// Healthy means the member has a leader: the cluster reached quorum over peer TLS.
		waitFor(t, m.name+" to be healthy", procs, func() error {
			return httpsGet(m.clientURL+"/health", etcdCAs, &client, `"health":"true"`)
		})
	}
	peer := keyPairOf(t, files, "pki/etcd/peer")
	for _, m := range members {
		if err := httpsGet(m.peerURL+"/members", etcdCAs, &peer, `"name":"cp-2"`); err != nil {
			t.Errorf("members seen by %s: %v", m.name, err)
		}
	}
}

// startEtcd starts one etcd member on the files written under dir, TLS with client
// certificates on both its client and its peer URL.
func startEtcd(t *testing.T, bin, dir, name, clientURL, peerURL, initialCluster string) *process {
	t.Helper()
	p := func(rel string) string { return filepath.Join(dir, "pki", rel) }
	return startProcess(t, dir, "etcd-"+name, bin,
		"--name="+name, "--data-dir="+filepath.Join(dir, "etcd-data"), "--unsafe-no-fsync",
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster="+initialCluster, "--initial-cluster-state=new",
		"--listen-metrics-urls=http://127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--cert-file="+p("etcd/server.crt"), "--key-file="+p("etcd/server.key"),
		"--client-cert-auth", "--trusted-ca-file="+p("etcd/ca.crt"),
		"--peer-cert-file="+p("etcd/peer.crt"), "--peer-key-file="+p("etcd/peer.key"),
		"--peer-client-cert-auth", "--peer-trusted-ca-file="+p("etcd/ca.crt"),
		// The members share the loopback device, where every connection comes from 127.0.0.1
		// whatever member address it is for: a peer's certificate (the CA's, checked) names its
		// member's address, not that one. On real hosts each member's own address is checked
		// too (bpa/cluster TestEtcdMembershipOnRealHosts).
		"--peer-skip-client-san-verification",
	)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeFiles writes files under dir as the BPA does on a host: private keys with mode 0600.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for rel, data := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".key") {
			mode = 0o600
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// process is a program started for the test, in its own process group, killed with its
// group in the test's cleanup (and by the kernel should the test binary die first).
type process struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
}

func startProcess(t *testing.T, dir, name, bin string, args ...string) *process {
	t.Helper()
	log := filepath.Join(dir, name+".log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		out.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("end of %s's log:\n%s", name, p.tail(30))
		}
	})
	return p
}

func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitFor polls check until it succeeds; it fails the test when one of the processes exits or
// after two minutes.
func waitFor(t *testing.T, what string, procs []*process, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return
		}
		for _, p := range procs {
			select {
			case <-p.exited:
				t.Fatalf("waiting for %s: %s exited (%s); end of its log:\n%s", what, p.name, p.cmd.ProcessState, p.tail(30))
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func certPool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		t.Fatal("no certificate in the CA file")
	}
	return pool
}

// keyPairOf loads base.crt and base.key from files.
func keyPairOf(t *testing.T, files map[string][]byte, base string) tls.Certificate {
	t.Helper()
	kp, err := tls.X509KeyPair(files[base+".crt"], files[base+".key"])
	if err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	return kp
}

// httpsGet GETs url trusting roots, presenting cert when not nil, and wants a 200 whose body
// contains want.
func httpsGet(url string, roots *x509.CertPool, cert *tls.Certificate, want string) error {
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s %q, want 200 with %q", url, resp.Status, body, want)
	}
	return nil
}

func restConfig(t *testing.T, kubeconfig []byte) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertUser checks who the API server says the client is.
func assertUser(t *testing.T, what string, c kubernetes.Interface, user, group string) {
	t.Helper()
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("%s: who am I: %v", what, err)
		return
	}
	if got := r.Status.UserInfo; got.Username != user || !slices.Contains(got.Groups, group) {
		t.Errorf("%s: the API server sees %q in %v, want %q in %q", what, got.Username, got.Groups, user, group)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
