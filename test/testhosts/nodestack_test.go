package testhosts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestNodeStackRunsAPod runs the real node stack in a real test host (needs root): Debian 12's
// containerd, runc and CNI plugins unpacked into the host, kubelet v1.36.3 built from source on
// cgroup v1 (failCgroupV1: false), joined to a real control plane with a client certificate made
// now. It waits for the Node to be Ready, imports a locally built image into containerd, runs a
// Pod on the node and reaches its HTTP server. Nothing is faked.
func TestNodeStackRunsAPod(t *testing.T) {
	c := startNodeCluster(t, 1, "kubectl")
	ctx := t.Context()
	h := c.hosts.Hosts[0]
	c.installNode(h, netip.MustParsePrefix("10.88.0.0/24"))
	start := time.Now()
	c.startUnits(h, "kubelet")
	c.waitNodeReady(h, start)

	// A Pod on the node (no scheduler runs: nodeName is set), its image never pulled.
	ns := c.cp.Namespace(t)
	if err := c.cp.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "webapp", Namespace: ns}, Spec: c.webappPodSpec()}
	pod.Spec.NodeName = h.Name
	start = time.Now()
	if err := c.cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	c.waitPodRunning(pod)
	t.Logf("pod created to Running: %s (pod IP %s)", time.Since(start).Round(time.Millisecond), pod.Status.PodIP)
	if out, err := h.Exec(ctx, "curl", "-sS", "--max-time", "5", "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/"); err != nil || string(out) != "hello from webapp on "+h.Name+"\n" {
		t.Errorf("the pod's HTTP server from %s: %q (%v)", h.Name, out, err)
	}

	// kubectl shows the node with containerd as its runtime.
	out, err := c.kubectl("get", "nodes", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get nodes -o wide:\n%s", out)
	if !strings.Contains(string(out), "containerd://") {
		t.Errorf("kubectl get nodes -o wide shows no containerd runtime")
	}
	logHostMemory(t, h)
}

// nodeCluster is what the node stack tests share: a real control plane (envtest), reachable
// from the test hosts through a forwarder on their gateway, and booted hosts to make nodes of.
type nodeCluster struct {
	t     *testing.T
	bin   string // the repository's bin/
	cp    *controlplane.ControlPlane
	hosts *HostNet
	api   *forwarder // to the API server, on the hosts' gateway
	// pause (containerd's sandbox image) and webapp (the pods'), imported on every node.
	pause, webapp builders.BuiltImage

	mu       sync.Mutex
	onFailed map[*Host][][]string // what to run in a host when the test fails, to understand it
	execs    int                  // container execs so far, for unique exec IDs
}

// startNodeCluster starts a control plane and n hosts and boots them. Besides kubelet and the
// node's Debian packages, bin/ must hold tools (hack/tools.sh builds them).
func startNodeCluster(t *testing.T, n int, tools ...string) *nodeCluster {
	if os.Geteuid() != 0 {
		t.Skip("test hosts need root")
	}
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	tools = append([]string{"kubelet", "node-debs"}, tools...)
	for _, f := range tools {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%v: run hack/tools.sh %s first", err, strings.Join(tools, " "))
		}
	}
	ctx := t.Context()
	c := &nodeCluster{t: t, bin: bin, onFailed: map[*Host][][]string{}}
	c.cp = controlplane.StartT(t, controlplane.Options{Name: "nodestack"})
	c.hosts = NewHosts(t, n, HostOptions{})
	// The API server listens on loopback; the hosts reach it through the gateway.
	apiURL, err := url.Parse(c.cp.Config.Host)
	if err != nil || apiURL.Host == "" {
		t.Fatalf("API server address %q: %v", c.cp.Config.Host, err)
	}
	if c.api, err = startForwarder(c.hosts.Gateway.String(), apiURL.Host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.api.close)
	for _, h := range c.hosts.Hosts {
		if err := h.Provision(UserData{}); err != nil {
			t.Fatal(err)
		}
		if err := h.Boot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range c.hosts.Hosts {
		if _, err := h.WaitSSH(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Runs before the hosts are stopped: what a failure needs to be understood.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, h := range c.hosts.Hosts {
			if !h.Running() {
				continue
			}
			for _, cmd := range c.onFailed[h] {
				out, err := h.Exec(dctx, cmd...)
				t.Logf("%s: %s (%v):\n%s", h.Name, strings.Join(cmd, " "), err, out)
			}
		}
	})
	c.pause, c.webapp = builders.BuildImage(t, "pause"), builders.BuildImage(t, "webapp")
	return c
}

// logOnFailure has cmd run in host h, its output logged, if the test fails.
func (c *nodeCluster) logOnFailure(h *Host, cmd ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onFailed[h] = append(c.onFailed[h], cmd)
}

// hostFile is a file to write into a running host.
type hostFile struct {
	path string
	data []byte
	mode os.FileMode
}

// writeFiles writes files into the running host h (through /proc/<pid1>/root).
func (c *nodeCluster) writeFiles(h *Host, files ...hostFile) {
	for _, f := range files {
		p := filepath.Join(fmt.Sprintf("/proc/%d/root", h.init), f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			c.t.Fatalf("%s: write %s: %v", h.Name, f.path, err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			c.t.Fatalf("%s: write %s: %v", h.Name, f.path, err)
		}
	}
}

// binary is a file of bin/, to copy into a host.
func (c *nodeCluster) binary(name string) []byte {
	b, err := os.ReadFile(filepath.Join(c.bin, name))
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// kubeconfig is the kubeconfig of a new user of the control plane, for a host: a client
// certificate for user (and groups) made now by the control plane's CA, the server the
// forwarder on the hosts' gateway, whose certificate is verified as the "localhost" it was made
// for.
func (c *nodeCluster) kubeconfig(user string, groups ...string) []byte {
	raw, err := c.cp.Kubeconfig(user, groups...)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		c.t.Fatalf("kubeconfig of %s: %v", user, err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + c.api.addr
		cl.TLSServerName = "localhost"
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		c.t.Fatalf("kubeconfig of %s: %v", user, err)
	}
	return out
}

// kubectl runs bin/kubectl as the control plane's admin.
func (c *nodeCluster) kubectl(args ...string) ([]byte, error) {
	admin, err := c.cp.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(c.t.Context(), filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", "/dev/stdin"}, args...)...)
	cmd.Stdin = bytes.NewReader(admin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// exec runs a command in host h and fails the test if it fails.
func (c *nodeCluster) exec(h *Host, args ...string) []byte {
	out, err := h.Exec(c.t.Context(), args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// startUnits starts systemd units in host h (after a daemon-reload: their unit files may be
// new); a failed test logs their status and journal.
func (c *nodeCluster) startUnits(h *Host, units ...string) {
	c.exec(h, "systemctl", "daemon-reload")
	c.exec(h, append([]string{"systemctl", "start"}, units...)...)
	for _, u := range units {
		c.logOnFailure(h, "systemctl", "--no-pager", "status", u)
		c.logOnFailure(h, "journalctl", "--no-pager", "-n", "150", "-u", u)
	}
}

// installNode installs the node stack in host h: Debian 12's containerd, runc and CNI plugins
// unpacked (iptables is in the hosts' image), a pod network of a bridge with the host-local addresses of podCIDR,
// kubelet with a client certificate for system:node:<host>, and the images imported. containerd
// runs; kubelet does not yet.
func (c *nodeCluster) installNode(h *Host, podCIDR netip.Prefix) {
	t := c.t
	start := time.Now()
	debs, err := filepath.Glob(filepath.Join(c.bin, "node-debs", "*.deb"))
	if err != nil || len(debs) == 0 {
		t.Fatalf("no .deb in %s (%v)", filepath.Join(c.bin, "node-debs"), err)
	}
	hostRoot := fmt.Sprintf("/proc/%d/root", h.init)
	for _, d := range debs {
		// --keep-directory-symlink: the rootfs's /lib, /bin, /sbin are symlinks into /usr.
		if out, err := exec.CommandContext(t.Context(), "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x --keep-directory-symlink -C "$2"`,
			"unpack", d, hostRoot).CombinedOutput(); err != nil {
			t.Fatalf("unpack %s into %s: %v: %s", filepath.Base(d), h.Name, err, out)
		}
	}
	if err := c.cp.Client.Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-node-" + h.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:node:" + h.Name}},
	}); err != nil {
		t.Fatal(err)
	}
	c.writeFiles(h,
		hostFile{"/usr/local/bin/kubelet", c.binary("kubelet"), 0o755},
		hostFile{"/etc/containerd/config.toml", []byte(containerdConfig(c.pause.Tag)), 0o644},
		hostFile{"/etc/cni/net.d/10-edgefleet.conflist", []byte(cniConfig(podCIDR)), 0o644},
		hostFile{"/etc/kubernetes/kubelet.yaml", []byte(kubeletConfig(h.IP.String())), 0o644},
		hostFile{"/etc/kubernetes/kubelet.kubeconfig", c.kubeconfig("system:node:"+h.Name, "system:nodes"), 0o600},
		hostFile{"/etc/systemd/system/kubelet.service", []byte(systemdUnit("kubelet", "containerd.service",
			"/usr/local/bin/kubelet --config=/etc/kubernetes/kubelet.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --hostname-override="+h.Name+" --node-ip="+h.IP.String()+" --v=2")), 0o644},
	)
	for _, img := range []builders.BuiltImage{c.pause, c.webapp} {
		c.writeFiles(h, hostFile{"/root/" + img.Name + ".tar", img.Archive, 0o600})
	}
	c.logOnFailure(h, "sh", "-c", "cat /proc/self/mountinfo | grep -E 'cgroup|containerd'")
	c.startUnits(h, "containerd")
	out := c.exec(h, "ctr", "version")
	t.Logf("installed containerd, runc, CNI plugins and kubelet in %s in %s:\n%s", h.Name, time.Since(start).Round(time.Millisecond), out)
	// The images, imported into the k8s.io namespace (the CRI's), named by their tags.
	for _, img := range []builders.BuiltImage{c.pause, c.webapp} {
		c.exec(h, "ctr", "-n", "k8s.io", "images", "import", "/root/"+img.Name+".tar")
	}
	t.Logf("images of %s:\n%s", h.Name, c.exec(h, "ctr", "-n", "k8s.io", "images", "list", "-q"))
}

// waitNodeReady waits for host h's Node to be Ready, as its kubelet (started at start)
// reports it.
func (c *nodeCluster) waitNodeReady(h *Host, start time.Time) {
	ctx := c.t.Context()
	testutil.WaitFor(c.t, 3*time.Minute, "node "+h.Name+" Ready", func() (bool, string) {
		var node corev1.Node
		if err := c.cp.Client.Get(ctx, client.ObjectKey{Name: h.Name}, &node); err != nil {
			return false, err.Error()
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s (API server forwarder: %s)", cond.Status, cond.Reason, cond.Message, c.api.lastError())
			}
		}
		return false, "no Ready condition (API server forwarder: " + c.api.lastError() + ")"
	})
	c.t.Logf("node %s: kubelet start to Node Ready: %s", h.Name, time.Since(start).Round(time.Millisecond))
}

// waitPodRunning waits for pod to run, updating it.
func (c *nodeCluster) waitPodRunning(pod *corev1.Pod) {
	ctx := c.t.Context()
	testutil.WaitFor(c.t, 2*time.Minute, "pod "+pod.Name+" Running", func() (bool, string) {
		if err := c.cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning, PodState(pod)
	})
}

// webappPodSpec is a pod of one container of the webapp image, serving on :8080, never pulled,
// its pod's and node's names from the downward API; it needs no service account token and no
// service links.
func (c *nodeCluster) webappPodSpec() corev1.PodSpec {
	no := false
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.PodSpec{
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		Containers: []corev1.Container{{
			Name:            "webapp",
			Image:           c.webapp.Tag,
			ImagePullPolicy: corev1.PullNever,
			Env:             []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("NODE_NAME", "spec.nodeName")},
		}},
	}
}

// containerdConfig is containerd 1.6's configuration: the CRI's sandbox image is the imported
// one (sandboxImage), the CNI plugins are where Debian puts them. Everything else is containerd's default
// (overlayfs snapshotter in /var/lib/containerd, runc v2 shim, cgroupfs).
//
// restrict_oom_score_adj: no process on these machines has CAP_SYS_RESOURCE (not in the
// bounding set), so none may lower its oom_score_adj; the CRI gives sandboxes -998 (guaranteed
// pods' containers get -997), and runc then fails with "nsexec: failed to update
// /proc/self/oom_score_adj: Permission denied" ("can't get final child's PID from pipe: EOF").
// Restricted, containerd clamps them to its own score (0).
func containerdConfig(sandboxImage string) string {
	return `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + sandboxImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`
}

// cniConfig is the pod network: a bridge with host-local addresses of podCIDR inside the host's
// network namespace, the bridge the pods' gateway (the loopback plugin is called by containerd
// itself).
func cniConfig(podCIDR netip.Prefix) string {
	return `{
  "cniVersion": "1.0.0",
  "name": "edgefleet",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podCIDR.String() + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`
}

// kubeletConfig is kubelet's configuration: cgroup v1 allowed, cgroupfs like containerd, no
// anonymous access and no credentials accepted on its own API (nothing here calls it).
//
// The hosts' disk is the machine's, shared with everything else on it: kubelet's default
// thresholds (evict below 15 % free for images, 10 % for the node; collect images above 85 %
// used) are about what others leave, and with 12 % free kubelet reported DiskPressure and
// evicted the pods. Absolute thresholds of a little free space instead, and no image garbage
// collection (the images are imported, never pulled again).
func kubeletConfig(ip string) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: ` + ip + `
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
rotateCertificates: false
serverTLSBootstrap: false
resolvConf: ""
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1Gi
  imagefs.available: 1Gi
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`
}

// systemdUnit is the unit of a service running cmd, started after (and requiring) the unit
// after when it is not empty. It is not restarted: a failure shows.
func systemdUnit(description, after, cmd string) string {
	deps := ""
	if after != "" {
		deps = "After=" + after + "\nRequires=" + after + "\n"
	}
	return "[Unit]\nDescription=" + description + "\n" + deps + "\n[Service]\nExecStart=" + cmd + "\nRestart=no\n"
}

// logHostMemory logs what the host's memory cgroup holds.
func logHostMemory(t *testing.T, h *Host) {
	usage, rss, err := h.Memory()
	if err != nil {
		t.Errorf("%s: %v", h.Name, err)
		return
	}
	t.Logf("memory of host %s (its cgroup: everything it runs): %d MiB with page cache, %d MiB resident", h.Name, usage>>20, rss>>20)
}

// forwarder forwards TCP connections from one address to another: the API server listens on
// the root namespace's loopback, which a host cannot reach.
type forwarder struct {
	addr string

	target string
	l      net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]bool
	err    error // the last failure to reach target
	wg     sync.WaitGroup
}

// startForwarder listens on host (a free port) and forwards to target.
func startForwarder(host, target string) (*forwarder, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("forwarder to %s: %w", target, err)
	}
	f := &forwarder{addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.forward(c)
	}
}

func (f *forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	if add {
		f.conns[c] = true
	} else {
		delete(f.conns, c)
	}
	return true
}

func (f *forwarder) forward(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		return
	}
	defer up.Close()
	if !f.track(c, true) || !f.track(up, true) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	f.track(c, false)
	f.track(up, false)
}

// lastError is the last failure to reach the target, "none" when there was none.
func (f *forwarder) lastError() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return "none"
	}
	return f.err.Error()
}

// close stops listening and breaks every forwarded connection.
func (f *forwarder) close() {
	_ = f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
