package testhosts

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// HostOptions configure a network of test hosts.
type HostOptions struct {
	// Names of the hosts, one per host; host-<i> when empty.
	Names []string
	// Rootfs is the root filesystem the hosts boot, the lower layer of each host's overlayfs;
	// bin/rootfs (hack/tools.sh rootfs) when empty.
	Rootfs string
	// Dir holds each host's overlay layers and boot log; a directory of the test's when empty.
	Dir string
}

// HostNet is a set of test hosts on one private network: a bridge in a network namespace of
// its own (the "switch"), one veth link from the switch to each host's network namespace, and
// one to the root namespace, where the test reaches the hosts through Gateway. Every namespace
// lives as long as a process holds it, so nothing outlives the processes, and the guard kills
// those if the test binary dies.
type HostNet struct {
	// Hosts in the order they were made; Host i has address Subnet.10+i.
	Hosts []*Host
	// Subnet is the hosts' /24 (in 10.233.0.0/16, one not routed on this machine yet).
	Subnet netip.Prefix
	// Gateway is the root namespace's address on the hosts' network, their default route.
	Gateway netip.Addr

	rootfs  string
	dir     string
	run     string       // random, unique per HostNet: part of link and cgroup names
	uplink  string       // the veth end in the root namespace
	cgroups cgroupLayout // the machine's cgroup hierarchies, each host's rooted at hostCgroupParent/<run>-<name>
	sw      *proc.Process
}

// Host is one test host: a Debian root filesystem on overlayfs, booted with systemd as PID 1 in
// new PID, mount, UTS, IPC, network and cgroup namespaces, running OpenSSH. It is made powered
// off; Provision writes its user data, Boot starts it. Host keys are made by sshd on each host's
// first boot (ssh-keygen -A), inside its overlay.
type Host struct {
	// Name is the host's name in logs and link names; its hostname once provisioned.
	Name string
	// IP is the host's address.
	IP netip.Addr
	// MAC is the hardware address of the host's eth0, the same at every boot (a stale ARP entry
	// of the test's namespace would otherwise hold a rebooted host unreachable for seconds).
	MAC net.HardwareAddr
	// Dir holds the host's overlay layers (upper, work, merged) and its boot log.
	Dir string

	net   *HostNet
	index int

	mu        sync.Mutex
	proc      *proc.Process // unshare, parent of the host's PID 1; nil while the host is off
	init      int           // PID of the host's PID 1 (systemd), seen from the root namespace
	cut       bool
	bootStart time.Time
}

// UserData is what a provisioner writes onto a host before its first boot (what Ironic's
// config drive carries to cloud-init on real hardware).
type UserData struct {
	// Hostname, written to /etc/hostname; the host's Name when empty.
	Hostname string
	// AuthorizedKeys are lines of root's ~/.ssh/authorized_keys (public keys only).
	AuthorizedKeys []string
}

// NewHosts makes n powered-off hosts on a new network and tears everything down in the test's
// cleanup. Needs root; skips the test otherwise.
func NewHosts(t testing.TB, n int, opts HostOptions) *HostNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("test hosts need root (namespaces, overlayfs, veth links)")
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	hn, err := NewHostNet(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hn.Close(); err != nil {
			t.Errorf("tear down test hosts: %v", err)
		}
	})
	return hn
}

// SSHKey makes an SSH client key in memory for a test — the private half never leaves the
// test process — and returns it with its authorized_keys line.
func SSHKey(t testing.TB) (ssh.Signer, string) {
	t.Helper()
	signer, line, err := NewSSHKey()
	if err != nil {
		t.Fatal(err)
	}
	return signer, line
}

// NewSSHKey is SSHKey for programs that are not tests (benchmarks).
func NewSSHKey() (ssh.Signer, string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, "", err
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), nil
}

// SSHKeyPEM makes an SSH private key for a test as the secret store keeps one (OpenSSH PEM) and
// returns it with its authorized_keys line.
func SSHKeyPEM(t testing.TB) ([]byte, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// StartHosts makes n hosts, provisions each with its name as hostname and authorizedKey
// (an authorized_keys line), boots them and waits until each answers SSH. It logs the time from
// boot to SSH of each.
func StartHosts(t testing.TB, n int, authorizedKey string, opts HostOptions) *HostNet {
	t.Helper()
	hn := NewHosts(t, n, opts)
	took, err := hn.BootAll(t.Context(), authorizedKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hn.Hosts {
		t.Logf("test host %s (%s): SSH answers %s after boot", h.Name, h.IP, took[i].Round(time.Millisecond))
	}
	return hn
}

// BootAll provisions every host with its name as hostname and authorizedKey (an authorized_keys
// line), boots them and waits until each answers SSH; it returns each host's time from boot to
// SSH.
func (hn *HostNet) BootAll(ctx context.Context, authorizedKey string) ([]time.Duration, error) {
	for _, h := range hn.Hosts {
		if err := h.Provision(UserData{AuthorizedKeys: []string{authorizedKey}}); err != nil {
			return nil, err
		}
		if err := h.Boot(); err != nil {
			return nil, err
		}
	}
	took := make([]time.Duration, len(hn.Hosts))
	for i, h := range hn.Hosts {
		var err error
		if took[i], err = h.WaitSSH(ctx); err != nil {
			return nil, err
		}
	}
	return took, nil
}

// NewHostNet is NewHosts for programs that are not tests (the demo): opts.Dir is required, and
// the caller closes the HostNet. Needs root.
func NewHostNet(n int, opts HostOptions) (_ *HostNet, err error) {
	if opts.Dir == "" {
		return nil, errors.New("test hosts: no directory for the hosts' disks")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("test hosts: %w", err)
	}
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("test hosts: %d hosts; a network holds 1 to 200", n)
	}
	if opts.Names != nil && len(opts.Names) != n {
		return nil, fmt.Errorf("test hosts: %d names for %d hosts", len(opts.Names), n)
	}
	if err := raiseInotifyInstances(); err != nil {
		return nil, fmt.Errorf("test hosts: %w", err)
	}
	rootfs := opts.Rootfs
	if rootfs == "" {
		root, err := testutil.RepoRoot()
		if err != nil {
			return nil, err
		}
		rootfs = filepath.Join(root, "bin", "rootfs")
	}
	if rootfs, err = filepath.EvalSymlinks(rootfs); err != nil {
		return nil, fmt.Errorf("test hosts: rootfs: %w (run 'make tools' or hack/tools.sh rootfs first)", err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "lib", "systemd", "systemd")); err != nil {
		return nil, fmt.Errorf("test hosts: %s holds no systemd: %w", rootfs, err)
	}
	for _, tool := range []string{"ip", "unshare", "nsenter", "mount", "pivot_root"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("test hosts: %s: %w", tool, err)
		}
	}
	unshare, _ := exec.LookPath("unshare")
	raw := make([]byte, 3)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("test hosts: %w", err)
	}
	hn := &HostNet{rootfs: rootfs, dir: opts.Dir, run: hex.EncodeToString(raw)}
	hn.uplink = "ef" + hn.run + "gw"
	if hn.cgroups, err = readCgroupLayout(); err != nil {
		return nil, err
	}
	hn.cgroups.removeStaleCgroups(hostCgroupParent)
	defer func() {
		if err != nil {
			err = errors.Join(err, hn.Close())
		}
	}()
	if hn.Subnet, err = freeSubnet(); err != nil {
		return nil, err
	}
	base := hn.Subnet.Addr().As4()
	hn.Gateway = netip.AddrFrom4([4]byte{base[0], base[1], base[2], 1})

	// The switch: a network namespace held by a sleeping process, with a bridge linking the
	// hosts and the uplink to the root namespace.
	if hn.sw, err = proc.Start("test hosts switch", unshare, []string{"--net", "--", "sleep", "infinity"},
		nil, filepath.Join(hn.dir, "switch.log")); err != nil {
		return nil, fmt.Errorf("test hosts: start the switch: %w", err)
	}
	sw := strconv.Itoa(hn.sw.Cmd.Process.Pid)
	if err := waitNetns(hn.sw.Cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("test hosts: switch: %w", err)
	}
	for _, c := range [][]string{
		{"ip", "link", "add", hn.uplink, "type", "veth", "peer", "name", "uplink", "netns", sw},
		{"ip", "addr", "add", hn.Gateway.String() + "/24", "dev", hn.uplink},
		{"ip", "link", "set", hn.uplink, "up"},
	} {
		if err := runCmd(c...); err != nil {
			return nil, fmt.Errorf("test hosts: uplink: %w", err)
		}
	}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "br0", "type", "bridge"},
		{"ip", "link", "set", "br0", "up"},
		{"ip", "link", "set", "uplink", "master", "br0", "up"},
	} {
		if err := inNetns(hn.sw.Cmd.Process.Pid, c...); err != nil {
			return nil, fmt.Errorf("test hosts: switch: %w", err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("host-%d", i)
		if opts.Names != nil {
			name = opts.Names[i]
		}
		h := &Host{
			Name:  name,
			IP:    netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(10 + i)}),
			MAC:   net.HardwareAddr{0x02, 0xef, raw[0], raw[1], raw[2], byte(i)},
			Dir:   filepath.Join(hn.dir, name),
			net:   hn,
			index: i,
		}
		for _, d := range []string{"upper", "work", "merged"} {
			if err := os.MkdirAll(filepath.Join(h.Dir, d), 0o755); err != nil {
				return nil, fmt.Errorf("test host %s: %w", h.Name, err)
			}
		}
		hn.Hosts = append(hn.Hosts, h)
	}
	return hn, nil
}

// Close stops every host and the switch, and removes the hosts' cgroups. The links and
// namespaces go with the processes holding them; the overlays were mounted in the hosts' own
// mount namespaces and go with them too.
func (hn *HostNet) Close() error {
	var errs []error
	for _, h := range hn.Hosts {
		errs = append(errs, h.Stop())
	}
	if hn.sw != nil {
		// The kernel deletes the uplink with the switch's namespace, but asynchronously:
		// delete it now so that it is gone when Close returns.
		if err := runCmd("ip", "link", "del", hn.uplink); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, fmt.Errorf("test hosts: %w", err))
		}
		errs = append(errs, hn.sw.Kill())
		hn.sw = nil
	}
	// The parent of the hosts' cgroups goes when no other run has hosts in it.
	for _, d := range hn.cgroups.dirs(hostCgroupParent) {
		_ = syscall.Rmdir(d)
	}
	return errors.Join(errs...)
}

// Provision writes the host's user data into its root filesystem: hostname and root's
// authorized keys. Works on a host that is off (into its overlay's upper layer) or running.
func (h *Host) Provision(ud UserData) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	root := filepath.Join(h.Dir, "upper")
	if h.proc != nil {
		root = fmt.Sprintf("/proc/%d/root", h.init)
	}
	hostname := ud.Hostname
	if hostname == "" {
		hostname = h.Name
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		return fmt.Errorf("test host %s: provision: %w", h.Name, err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		return fmt.Errorf("test host %s: provision: %w", h.Name, err)
	}
	if len(ud.AuthorizedKeys) > 0 {
		// /root is 0700 in the image; the upper layer's copy must keep that mode.
		for _, d := range []struct {
			path string
			mode fs.FileMode
		}{{"root", 0o700}, {"root/.ssh", 0o700}} {
			p := filepath.Join(root, d.path)
			if err := os.Mkdir(p, d.mode); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("test host %s: provision: %w", h.Name, err)
			}
			if err := os.Chmod(p, d.mode); err != nil {
				return fmt.Errorf("test host %s: provision: %w", h.Name, err)
			}
		}
		keys := strings.Join(ud.AuthorizedKeys, "\n")
		if !strings.HasSuffix(keys, "\n") {
			keys += "\n"
		}
		if err := os.WriteFile(filepath.Join(root, "root", ".ssh", "authorized_keys"), []byte(keys), 0o600); err != nil {
			return fmt.Errorf("test host %s: provision: %w", h.Name, err)
		}
	}
	return nil
}

// AuthorizeKey adds an authorized_keys line (a public key) for root, once: a line present
// already is not added again. Works on a host that is off or running.
func (h *Host) AuthorizeKey(line string) error {
	line = strings.TrimSpace(line)
	h.mu.Lock()
	root := filepath.Join(h.Dir, "upper")
	if h.proc != nil {
		root = fmt.Sprintf("/proc/%d/root", h.init)
	}
	h.mu.Unlock()
	var keys []string
	b, err := os.ReadFile(filepath.Join(root, "root", ".ssh", "authorized_keys"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("test host %s: authorize key: %w", h.Name, err)
	}
	for _, k := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k = strings.TrimSpace(k); k == line {
			return nil
		} else if k != "" {
			keys = append(keys, k)
		}
	}
	hostname, err := os.ReadFile(filepath.Join(root, "etc", "hostname"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("test host %s: authorize key: %w", h.Name, err)
	}
	return h.Provision(UserData{Hostname: strings.TrimSpace(string(hostname)), AuthorizedKeys: append(keys, line)})
}

// bootScript runs as PID 1 of the host's new namespaces: it mounts the overlay and the API
// filesystems, makes the overlay its root (pivot_root) and becomes systemd. The mounts live in
// the host's mount namespace only (private propagation) and vanish with it.
const bootScript = `set -eu
rootfs=$1 dir=$2 cgroups=$3 m=$2/merged
mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$dir/upper,workdir=$dir/work" "$m"
# containerd's overlayfs snapshots cannot have an overlayfs as their upper layer, and kubelet
# finds no disk behind an overlayfs (its ephemeral-storage eviction then evicts every pod): their
# state lives on the machine's disk, in the host's directory (kept across reboots like the upper
# layer).
for d in containerd kubelet; do
	mkdir -p "$dir/$d" "$m/var/lib/$d"
	mount --bind "$dir/$d" "$m/var/lib/$d"
done
mount -t proc proc "$m/proc"
# The hosts share the machine's kernel: /proc/sys is read-only but for the per-namespace
# net.* (a host's systemd-sysctl would otherwise set the machine's kernel.pid_max). The four
# machine-wide sysctls kubelet insists on (it writes them when they differ and fails when it
# cannot) read as kubelet wants them, read-only; the machine's own values stay as they are.
mount --bind "$m/proc/sys" "$m/proc/sys"
mount -o remount,bind,ro "$m/proc/sys"
mount --bind "$m/proc/sys/net" "$m/proc/sys/net"
mount -o remount,bind,rw "$m/proc/sys/net"
mkdir -p "$dir/sysctl"
for s in vm/overcommit_memory:1 vm/panic_on_oom:0 kernel/panic:10 kernel/panic_on_oops:1; do
	f=$dir/sysctl/$(echo "${s%:*}" | tr / .)
	echo "${s#*:}" >"$f"
	mount --bind "$f" "$m/proc/sys/${s%:*}"
	mount -o remount,bind,ro "$m/proc/sys/${s%:*}"
done
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$m/sys"
# The machine's cgroup hierarchies, each rooted at this host's cgroup (the cgroup namespace):
# systemd, kubelet and runc see their own subtree and never anything of the machine's or
# another host's. One "kind name options" line per mount (cgroupLayout.mountSpec).
while read -r kind name opts; do
	p=$m/sys/fs/cgroup/$name
	case $kind in
	tmpfs) mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs "$p" ;;
	cgroup2) mkdir -p "$p"; mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$p" ;;
	cgroup) mkdir -p "$p"; mount -t cgroup -o "nosuid,nodev,noexec,$opts" cgroup "$p" ;;
	link) ln -s "$opts" "$p" ;;
	esac
done <<EOF
$cgroups
EOF
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$m/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$m/tmp"
mount -t tmpfs -o mode=755,nosuid,size=4m tmpfs "$m/dev"
# kmsg: kubelet's OOM watcher reads the kernel log.
for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0 kmsg:1:11; do
	IFS=: read -r name major minor <<EOF
$n
EOF
	mknod -m 666 "$m/dev/$name" c "$major" "$minor"
done
ln -s /proc/self/fd "$m/dev/fd"
ln -s /proc/self/fd/0 "$m/dev/stdin"
ln -s /proc/self/fd/1 "$m/dev/stdout"
ln -s /proc/self/fd/2 "$m/dev/stderr"
mkdir "$m/dev/pts" "$m/dev/shm" "$m/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$m/dev/pts"
ln -s pts/ptmx "$m/dev/ptmx"
# pivot_root, not chroot: a process joining this mount namespace (setns) starts at the
# namespace's root, so after a chroot runc exec landed in the machine's root instead of the
# container's (stat /tiny: no such file or directory), and so would kubectl exec and exec probes.
# /mnt is empty in the image.
cd "$m"
pivot_root . mnt
umount -l /mnt
cd /
# The harness links the host to the switch and gives eth0 its address and default route from
# outside, once this process runs. systemd starts when they are there, as a machine's units
# start once its network is up: a unit routing through eth0 failed otherwise after a reboot
# (the pod network's "Nexthop has invalid gateway"). Boot bounds the wait.
until ip -4 route show default | grep -q .; do sleep 0.05; done
exec /usr/bin/env -i container=edgefleet-test-host /lib/systemd/systemd
`

// launchScript puts itself into the host's cgroups (one per line of $1, one per hierarchy),
// then starts the host's namespaces, so that the cgroup namespace is rooted at them.
const launchScript = `set -eu
while read -r cg; do echo $$ >"$cg/cgroup.procs"; done <<EOF
$1
EOF
shift
exec unshare --pid --mount --uts --ipc --net --cgroup --fork --kill-child --propagation private -- /bin/sh -c "$@"
`

// Boot starts the host (a no-op when it runs) and links it to the network. WaitSSH waits for
// its SSH server.
func (h *Host) Boot() (err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc != nil {
		return nil
	}
	if err := h.net.cgroups.makeDirs(hostCgroupParent, h.cgroupName()); err != nil {
		return fmt.Errorf("test host %s: %w", h.Name, err)
	}
	h.bootStart = time.Now()
	cgs := strings.Join(h.cgroupDirs(), "\n")
	p, err := proc.Start("test host "+h.Name, "/bin/sh",
		[]string{"-c", launchScript, "launch", cgs, bootScript, "boot", h.net.rootfs, h.Dir, h.net.cgroups.mountSpec()},
		[]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, filepath.Join(h.Dir, "boot.log"))
	if err != nil {
		return fmt.Errorf("test host %s: boot: %w", h.Name, err)
	}
	h.proc = p
	defer func() {
		if err != nil {
			err = errors.Join(err, h.stopLocked())
		}
	}()
	if h.init, err = waitChild(p); err != nil {
		return fmt.Errorf("test host %s: boot: %w; end of %s:\n%s", h.Name, err, p.Log, p.LogTail(20))
	}
	if err := waitNetns(h.init); err != nil {
		return fmt.Errorf("test host %s: boot: %w", h.Name, err)
	}
	port := fmt.Sprintf("h%d", h.index)
	// After a Stop the kernel tears the old network namespace down in the background (longer
	// with pods' namespaces and veths in it): its end of the switch port may still be there
	// ("RTNETLINK answers: File exists" when the new one is added). It goes now.
	if err := inNetns(h.net.sw.Cmd.Process.Pid, "sh", "-c", `ip link del "$0" 2>/dev/null || true`, port); err != nil {
		return fmt.Errorf("test host %s: link: %w", h.Name, err)
	}
	for _, c := range [][]string{
		{"ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "address", h.MAC.String(), "netns", strconv.Itoa(h.init)},
		{"ip", "link", "set", port, "master", "br0"},
	} {
		if err := inNetns(h.net.sw.Cmd.Process.Pid, c...); err != nil {
			return fmt.Errorf("test host %s: link: %w", h.Name, err)
		}
	}
	if !h.cut {
		if err := inNetns(h.net.sw.Cmd.Process.Pid, "ip", "link", "set", port, "up"); err != nil {
			return fmt.Errorf("test host %s: link: %w", h.Name, err)
		}
	}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", h.IP.String() + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", h.net.Gateway.String()},
	} {
		if err := inNetns(h.init, c...); err != nil {
			return fmt.Errorf("test host %s: network: %w", h.Name, err)
		}
	}
	return nil
}

// Running reports whether the host is booted.
func (h *Host) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.proc != nil
}

// SSHAddr is the host's SSH address (IP:22).
func (h *Host) SSHAddr() string {
	return net.JoinHostPort(h.IP.String(), "22")
}

// WaitSSH waits until the host's SSH server sends its banner, and returns the time since Boot.
func (h *Host) WaitSSH(ctx context.Context) (time.Duration, error) {
	h.mu.Lock()
	start, proc := h.bootStart, h.proc
	h.mu.Unlock()
	if proc == nil {
		return 0, fmt.Errorf("test host %s: not booted", h.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	last := errors.New("no answer yet")
	for {
		if banner, err := sshBanner(ctx, h.SSHAddr()); err == nil && strings.HasPrefix(banner, "SSH-2.0-") {
			return time.Since(start), nil
		} else if err != nil {
			last = err
		}
		select {
		case <-proc.Exited:
			return 0, fmt.Errorf("test host %s: stopped while waiting for SSH; end of %s:\n%s", h.Name, proc.Log, proc.LogTail(20))
		case <-ctx.Done():
			return 0, fmt.Errorf("test host %s: no SSH banner from %s: %w (last error: %w)", h.Name, h.SSHAddr(), ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func sshBanner(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, err
}

// Cut takes the host's link to the switch down: the host keeps running, unreachable, as after a
// network failure. Restore brings it back. Both hold across Stop and Boot.
func (h *Host) Cut() error { return h.setLink(true) }

// Restore brings the host's link up again after Cut.
func (h *Host) Restore() error { return h.setLink(false) }

func (h *Host) setLink(cut bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut = cut
	if h.proc == nil {
		return nil
	}
	state := "up"
	if cut {
		state = "down"
	}
	if err := inNetns(h.net.sw.Cmd.Process.Pid, "ip", "link", "set", fmt.Sprintf("h%d", h.index), state); err != nil {
		return fmt.Errorf("test host %s: link %s: %w", h.Name, state, err)
	}
	return nil
}

// Exec runs a command inside the running host (all its namespaces, its root) and returns its
// combined output; for tests that change a host behind the back of the code under test.
func (h *Host) Exec(ctx context.Context, args ...string) ([]byte, error) {
	h.mu.Lock()
	pid, running := h.init, h.proc != nil
	h.mu.Unlock()
	if !running {
		return nil, fmt.Errorf("test host %s: not booted", h.Name)
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(pid), "--all", "--root", "--wd", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("test host %s: %s: %w: %s", h.Name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Stop powers the host off at once (SIGKILL to its PID 1, which ends every process of its PID
// namespace), like pulling the plug; its disk (the overlay's upper layer) stays for the next
// Boot. A stopped host is a no-op.
func (h *Host) Stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopLocked()
}

func (h *Host) stopLocked() error {
	if h.proc == nil {
		return nil
	}
	err := h.proc.Kill()
	h.proc, h.init = nil, 0
	// The kernel empties the cgroups once the namespace's processes are reaped: on a loaded
	// machine a large process (an API server) may take seconds to go.
	var rmErr error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rmErr = nil
		for _, d := range h.cgroupDirs() {
			rmErr = errors.Join(rmErr, removeCgroupTree(d))
		}
		if rmErr == nil || time.Now().After(deadline) {
			break
		}
	}
	if rmErr != nil {
		err = errors.Join(err, fmt.Errorf("test host %s: remove cgroup: %w", h.Name, rmErr))
	}
	return err
}

// hostCgroupParent is the cgroup, in each hierarchy, under which the hosts' cgroups are made.
const hostCgroupParent = "edgefleet-test-hosts"

// cgroupName is the host's cgroup under hostCgroupParent, unique per HostNet.
func (h *Host) cgroupName() string {
	return h.net.run + "-" + h.Name
}

// cgroupDirs are the host's cgroup in every hierarchy.
func (h *Host) cgroupDirs() []string {
	return h.net.cgroups.dirs(filepath.Join(hostCgroupParent, h.cgroupName()))
}

// Memory is what the host's memory cgroup holds, everything the host runs: its usage with the
// page cache and its processes' resident memory, in bytes (cgroup v1; on a machine with cgroup v2
// only, memory.current and anon of memory.stat).
func (h *Host) Memory() (usage, resident int64, err error) {
	for _, d := range h.cgroupDirs() {
		usageFile, rssKey := "memory.usage_in_bytes", "total_rss"
		if _, err := os.Stat(filepath.Join(d, usageFile)); err != nil {
			if usageFile, rssKey = "memory.current", "anon"; !fileExists(filepath.Join(d, usageFile)) {
				continue
			}
		}
		raw, err := os.ReadFile(filepath.Join(d, usageFile))
		if err != nil {
			return 0, 0, fmt.Errorf("test host %s: %w", h.Name, err)
		}
		if usage, err = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("test host %s: %s: %w", h.Name, usageFile, err)
		}
		stat, err := os.ReadFile(filepath.Join(d, "memory.stat"))
		if err != nil {
			return 0, 0, fmt.Errorf("test host %s: %w", h.Name, err)
		}
		for _, l := range strings.Split(string(stat), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == rssKey {
				resident, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		return usage, resident, nil
	}
	return 0, 0, fmt.Errorf("test host %s: no memory cgroup", h.Name)
}

// CPU is the CPU time everything the host ran has used since it booted (its cpuacct cgroup's
// usage; on a machine with cgroup v2 only, usage_usec of cpu.stat).
func (h *Host) CPU() (time.Duration, error) {
	for _, d := range h.cgroupDirs() {
		if raw, err := os.ReadFile(filepath.Join(d, "cpuacct.usage")); err == nil {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("test host %s: cpuacct.usage: %w", h.Name, err)
			}
			return time.Duration(ns), nil
		}
		if raw, err := os.ReadFile(filepath.Join(d, "cpu.stat")); err == nil {
			for _, l := range strings.Split(string(raw), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "usage_usec" {
					us, err := strconv.ParseInt(f[1], 10, 64)
					if err != nil {
						return 0, fmt.Errorf("test host %s: cpu.stat: %w", h.Name, err)
					}
					return time.Duration(us) * time.Microsecond, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("test host %s: no CPU accounting cgroup", h.Name)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// minInotifyInstances is the fewest inotify instances a user may hold that the hosts need.
const minInotifyInstances = 8192

// raiseInotifyInstances raises the machine's fs.inotify.max_user_instances to
// minInotifyInstances when it is lower. The limit counts per user, and every host's processes are
// root's: the hosts share one budget where machines would have one each (Debian's default 128).
// Each host's systemd holds about five instances, kube-apiserver six, kubelet, containerd and
// kube-proxy some; with other tests' hosts and API servers on the machine, kube-proxy failed to
// start in a host ("failed complete: too many open files": its configuration file's watcher).
// Raising a limit takes nothing from anyone; it is never lowered.
func raiseInotifyInstances() error {
	const f = "/proc/sys/fs/inotify/max_user_instances"
	raw, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("inotify limit: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("inotify limit: %s: %w", f, err)
	}
	if n >= minInotifyInstances {
		return nil
	}
	if err := os.WriteFile(f, []byte(strconv.Itoa(minInotifyInstances)), 0o644); err != nil {
		return fmt.Errorf("raise %s from %d to %d (the hosts' processes share root's inotify instances): %w", f, n, minInotifyInstances, err)
	}
	return nil
}

// freeSubnet picks a 10.233.N.0/24 no route of the root namespace covers yet.
func freeSubnet() (netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("test hosts: list routes: %w", err)
	}
	raw := make([]byte, 1)
	for range 64 {
		if _, err := rand.Read(raw); err != nil {
			return netip.Prefix{}, err
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 233, raw[0], 0}), 24)
		if !strings.Contains(string(out), p.String()) && !strings.Contains(string(out), fmt.Sprintf("10.233.%d.", raw[0])) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("test hosts: no free /24 in 10.233.0.0/16")
}

// waitChild returns the PID of unshare's forked child (the host's PID 1).
func waitChild(p *proc.Process) (int, error) {
	pid := p.Cmd.Process.Pid
	path := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	for range 200 {
		select {
		case <-p.Exited:
			return 0, fmt.Errorf("exited during start (%s)", p.Cmd.ProcessState)
		default:
		}
		if b, err := os.ReadFile(path); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("no child of unshare (%d) after 2s", pid)
}

// waitNetns waits until pid is in a network namespace other than ours (unshare has made it).
func waitNetns(pid int) error {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	for range 200 {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns != self {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("process %d has no network namespace of its own after 2s", pid)
}

func runCmd(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs a command in the network namespace of pid.
func inNetns(pid int, args ...string) error {
	return runCmd(append([]string{"nsenter", "--net=/proc/" + strconv.Itoa(pid) + "/ns/net", "--"}, args...)...)
}
