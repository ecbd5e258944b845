package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeImage is the one image of TestNodeStackRunsAPod: containerd's sandbox (pause) image and
// the pod's container, imported from an archive, never pulled.
const nodeImage = "edgefleet.test/tiny:1"

// TestNodeStackRunsAPod runs the real node stack in a real test host (needs root): Debian 12's
// containerd, runc and CNI plugins unpacked into the host, kubelet v1.36.3 built from source on
// cgroup v1 (failCgroupV1: false), joined to a real control plane with a client certificate made
// now. It waits for the Node to be Ready, imports a locally built image into containerd, runs a
// Pod on the node and reaches its HTTP server. Nothing is faked.
func TestNodeStackRunsAPod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("test hosts need root")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	for _, f := range []string{"kubelet", "kubectl", "node-debs"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%v: run hack/tools.sh kubelet kubectl node-debs first", err)
		}
	}
	ctx := t.Context()
	cp := StartT(t, Options{Name: "nodestack"})
	hn := NewHosts(t, 1, HostOptions{})
	h := hn.Hosts[0]
	// The API server listens on loopback; the host reaches it through the gateway.
	apiURL, err := url.Parse(cp.Config.Host)
	if err != nil || apiURL.Host == "" {
		t.Fatalf("API server address %q: %v", cp.Config.Host, err)
	}
	apiFwd, err := startForwarder(hn.Gateway.String(), apiURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apiFwd.close)
	if err := h.Provision(UserData{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Boot(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WaitSSH(ctx); err != nil {
		t.Fatal(err)
	}
	// Runs before the hosts are stopped: what a failure needs to be understood.
	t.Cleanup(func() {
		if !t.Failed() || !h.Running() {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, c := range [][]string{
			{"systemctl", "--no-pager", "status", "containerd", "kubelet"},
			{"journalctl", "--no-pager", "-n", "80", "-u", "containerd"},
			{"journalctl", "--no-pager", "-n", "150", "-u", "kubelet"},
			{"sh", "-c", "cat /proc/self/mountinfo | grep -E 'cgroup|containerd'"},
		} {
			out, err := h.Exec(dctx, c...)
			t.Logf("%s (%v):\n%s", strings.Join(c, " "), err, out)
		}
	})

	// containerd, runc, CNI plugins: Debian 12's packages, unpacked into the running host.
	start := time.Now()
	debs, err := filepath.Glob(filepath.Join(bin, "node-debs", "*.deb"))
	if err != nil || len(debs) == 0 {
		t.Fatalf("no .deb in %s (%v)", filepath.Join(bin, "node-debs"), err)
	}
	hostRoot := fmt.Sprintf("/proc/%d/root", h.init)
	for _, d := range debs {
		// --keep-directory-symlink: the rootfs's /lib, /bin, /sbin are symlinks into /usr.
		if out, err := exec.CommandContext(ctx, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x --keep-directory-symlink -C "$2"`,
			"unpack", d, hostRoot).CombinedOutput(); err != nil {
			t.Fatalf("unpack %s into %s: %v: %s", filepath.Base(d), h.Name, err, out)
		}
	}
	kubelet, err := os.ReadFile(filepath.Join(bin, "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := nodeKubeconfig(cp, h.Name, apiFwd.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-node-" + h.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:node:" + h.Name}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		// The rootfs has no /etc/hosts; containerd copies it into every pod.
		{"/etc/hosts", []byte("127.0.0.1 localhost\n" + h.IP.String() + " " + h.Name + "\n"), 0o644},
		{"/usr/local/bin/kubelet", kubelet, 0o755},
		{"/etc/containerd/config.toml", []byte(containerdConfig), 0o644},
		{"/etc/cni/net.d/10-edgefleet.conflist", []byte(cniConfig), 0o644},
		{"/etc/kubernetes/kubelet.yaml", []byte(kubeletConfig(h.IP.String())), 0o644},
		{"/etc/kubernetes/kubelet.kubeconfig", kubeconfig, 0o600},
		{"/etc/systemd/system/kubelet.service", []byte(kubeletUnit(h.Name, h.IP.String())), 0o644},
	} {
		if err := writeHostFile(hostRoot, f.path, f.data, f.mode); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
	}
	if _, err := h.Exec(ctx, "systemctl", "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(ctx, "systemctl", "start", "containerd"); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Exec(ctx, "ctr", "version"); err != nil {
		t.Fatalf("containerd does not answer: %v", err)
	} else {
		t.Logf("installed containerd, runc, CNI plugins and kubelet in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	}

	// The image: built here, imported into the k8s.io namespace (the CRI's).
	archive, err := buildNodeImage(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := writeHostFile(hostRoot, "/root/image.tar", archive, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(ctx, "ctr", "-n", "k8s.io", "images", "import", "/root/image.tar"); err != nil {
		t.Fatal(err)
	}

	// kubelet → Node Ready, as the kubelet reports it.
	start = time.Now()
	if _, err := h.Exec(ctx, "systemctl", "start", "kubelet"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 3*time.Minute, func() (bool, string) {
		var node corev1.Node
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: h.Name}, &node); err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no Ready condition"
	}); err != nil {
		t.Fatalf("node %s: %v (API server forwarder: %s)", h.Name, err, apiFwd.lastError())
	}
	t.Logf("kubelet start to Node Ready: %s", time.Since(start).Round(time.Millisecond))

	// A Pod on the node (no scheduler runs: nodeName is set), its image never pulled.
	ns := cp.Namespace(t)
	if err := cp.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	noToken := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                     h.Name,
			AutomountServiceAccountToken: &noToken,
			EnableServiceLinks:           &noToken,
			Containers: []corev1.Container{{
				Name:            "tiny",
				Image:           nodeImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"-http", ":8080"},
			}},
		},
	}
	start = time.Now()
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 2*time.Minute, func() (bool, string) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		var states []string
		for _, c := range pod.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s: %+v", c.Name, c.State))
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s, %s", pod.Status.Phase, strings.Join(states, "; "))
	}); err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	t.Logf("pod created to Running: %s (pod IP %s)", time.Since(start).Round(time.Millisecond), pod.Status.PodIP)
	if out, err := h.Exec(ctx, "curl", "-sS", "--max-time", "5", "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/"); err != nil || !strings.Contains(string(out), "hello from tiny") {
		t.Errorf("the pod's HTTP server from %s: %q (%v)", h.Name, out, err)
	}

	// kubectl shows the node with containerd as its runtime.
	admin, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", "/dev/stdin", "get", "nodes", "-o", "wide")
	kubectl.Stdin = bytes.NewReader(admin)
	out, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v: %s", err, out)
	}
	t.Logf("kubectl get nodes -o wide:\n%s", out)
	if !strings.Contains(string(out), "containerd://") {
		t.Errorf("kubectl get nodes -o wide shows no containerd runtime")
	}
	logHostMemory(t, h)
}

// containerdConfig is containerd 1.6's configuration: the CRI's sandbox image is the imported
// one, the CNI plugins are where Debian puts them. Everything else is containerd's default
// (overlayfs snapshotter in /var/lib/containerd, runc v2 shim, cgroupfs).
//
// restrict_oom_score_adj: no process on these machines has CAP_SYS_RESOURCE (not in the
// bounding set), so none may lower its oom_score_adj; the CRI gives sandboxes -998 (guaranteed
// pods' containers get -997), and runc then fails with "nsexec: failed to update
// /proc/self/oom_score_adj: Permission denied" ("can't get final child's PID from pipe: EOF").
// Restricted, containerd clamps them to its own score (0).
const containerdConfig = `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + nodeImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`

// cniConfig is the pod network: a bridge with host-local addresses inside the host's network
// namespace (the loopback plugin is called by containerd itself).
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "edgefleet",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`

// kubeletConfig is kubelet's configuration: cgroup v1 allowed, cgroupfs like containerd, no
// anonymous access and no credentials accepted on its own API (nothing here calls it).
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
`
}

// kubeletUnit is kubelet's systemd unit in the host.
func kubeletUnit(hostname, ip string) string {
	return `[Unit]
Description=kubelet
After=containerd.service
Requires=containerd.service

[Service]
ExecStart=/usr/local/bin/kubelet --config=/etc/kubernetes/kubelet.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --hostname-override=` + hostname + ` --node-ip=` + ip + ` --v=2
Restart=no
`
}

// nodeKubeconfig is the kubeconfig of node name: a client certificate for system:node:<name>
// (group system:nodes) made now by the control plane's CA, pointed at addr, verifying the API
// server's certificate as the "localhost" it was made for.
func nodeKubeconfig(cp *ControlPlane, name, addr string) ([]byte, error) {
	raw, err := cp.Kubeconfig("system:node:"+name, "system:nodes")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("node kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
		c.TLSServerName = "localhost"
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("node kubeconfig: %w", err)
	}
	return out, nil
}

// writeHostFile writes a file into a running host's root (hostRoot, /proc/<pid1>/root).
func writeHostFile(hostRoot, path string, data []byte, mode os.FileMode) error {
	p := filepath.Join(hostRoot, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// buildNodeImage builds testdata/tiny (static) and returns a docker-archive of nodeImage: one
// layer holding /tiny, the entrypoint.
func buildNodeImage(ctx context.Context, root, dir string) ([]byte, error) {
	binPath := filepath.Join(dir, "tiny")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binPath, "./pkg/testenv/testdata/tiny")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the image's binary: %w: %s", err, out)
	}
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "tiny", Mode: 0o755, Size: int64(len(binary)), Typeflag: tar.TypeReg}); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/tiny"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	tag, err := name.NewTag(nodeImage)
	if err != nil {
		return nil, fmt.Errorf("image tag: %w", err)
	}
	var archive bytes.Buffer
	if err := tarball.Write(tag, img, &archive); err != nil {
		return nil, fmt.Errorf("image archive: %w", err)
	}
	return archive.Bytes(), nil
}

// waitFor polls check every 500 ms until it reports done, failing after timeout with check's
// last word.
func waitFor(ctx context.Context, timeout time.Duration, check func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, last := check()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %s", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// logHostMemory logs what the host's memory cgroup holds (cgroup v1: usage with page cache,
// and the processes' resident memory).
func logHostMemory(t *testing.T, h *Host) {
	for _, d := range h.cgroupDirs() {
		usage, err := os.ReadFile(filepath.Join(d, "memory.usage_in_bytes"))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "memory.stat"))
		if err != nil {
			t.Errorf("%s: %v", h.Name, err)
			return
		}
		rss := "?"
		for _, l := range strings.Split(string(stat), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "total_rss" {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					rss = fmt.Sprintf("%d MiB", n>>20)
				}
			}
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
		t.Logf("memory of host %s (containerd, kubelet, systemd, sshd, the pod): %d MiB with page cache, %s resident", h.Name, n>>20, rss)
	}
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
