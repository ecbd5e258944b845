package ironic

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// MinAPIVersion is the lowest Ironic API microversion baremetal-operator v0.13.2 works with
// (pkg/provisioner/ironic/clients/features.go of its module). Requests of Do carry it.
const MinAPIVersion = "1.89"

// ErrNoTree means Ironic's trixie tree is not built (hack/tools.sh ironic).
var ErrNoTree = errors.New("ironic: no Ironic tree: run 'hack/tools.sh ironic' first (as root, ~5 min once)")

// dataDir is where the run's directory is bound inside the tree.
const dataDir = "/var/lib/ironic"

// Options configure an Ironic.
type Options struct {
	// Dir receives ironic.conf, the htpasswd file, the database, the boot directories and the
	// log (ironic.log); a temporary directory, removed by Stop, when empty.
	Dir string
	// Root is the Debian trixie tree holding Ironic; bin/ironic-root when empty.
	Root string
	// StartTimeout bounds the schema creation and Ironic's start; 3 minutes when zero (both
	// take ~15 s on an idle 2-core machine, several times that under a loaded CI run).
	StartTimeout time.Duration
	// VirtualMedia, when set, readies Ironic to boot its agent on machines by Redfish virtual
	// media (redfish-virtual-media boot).
	VirtualMedia *VirtualMediaOptions
}

// VirtualMediaOptions ready Ironic for redfish-virtual-media boot: it builds a BIOS-bootable ISO
// (isolinux) of the agent's kernel and ramdisk into [deploy] http_root, which an HTTP server of
// the run serves on 127.0.0.1 ([deploy] http_url: the BMC fetches the ISO there), and hands the
// agent Ironic's API at AgentHost.
type VirtualMediaOptions struct {
	// AgentHost is the address the agent on the machine reaches this host's loopback at: the
	// agent calls Ironic at http://AgentHost:PORT (lookup, heartbeats, inspection data). For
	// qemu's user-mode network it is 10.0.2.2, which qemu connects to 127.0.0.1.
	AgentHost string
	// Files are directories of this host the run's HTTP server serves too, each at
	// /NAME/ (e.g. "ipa": the agent's kernel and ramdisk, for a node's deploy_kernel and
	// deploy_ramdisk URLs; Ironic fetches them through FileURL).
	Files map[string]string
	// KernelParams are appended to the agent's kernel command line ([redfish]
	// kernel_append_params); Ironic's "nofb vga=normal" and the serial console ttyS0 when empty.
	// A node's driver_info/kernel_append_params replaces them for that node.
	KernelParams string
	// ImageProxy makes the run's HTTP server, at AgentHost, the agent's HTTP proxy for every
	// node: http_proxy (and no_proxy=AgentHost, so that the agent still calls Ironic directly)
	// in the agent's environment, through systemd.setenv on its kernel command line (after
	// KernelParams). Image URLs can then name the run's HTTP server at 127.0.0.1, where Ironic
	// checks them with a HEAD, and the agent, which reaches the host's loopback only at
	// AgentHost, asks the server for the same URL as a proxy request, which it answers for its
	// own files. It is driver_info/image_http_proxy for callers that cannot set driver_info
	// (baremetal-operator). Not [agent] image_download_source = http: Ironic then hands the
	// agent a URL under [deploy] http_url, which it checks with a HEAD itself, so that URL
	// must work from the host and from the guest alike — no address does on qemu's user-mode
	// network.
	ImageProxy bool
	// FastTrack sets [deploy] fast_track, as Metal3's Ironic image does: an agent that booted
	// for one step and still heartbeats is used for the next one instead of booting again, and
	// the machine stays on between them (each boot of the agent under TCG takes minutes). With
	// virtual media that is cleaning → deploy: at the end of inspection Ironic ejects the CD
	// (the agent has not heartbeated yet, so fast track is not possible at that moment), and
	// the next step, finding no CD, boots the agent again.
	FastTrack bool
}

// Ironic is a running Ironic (API and conductor in one process) listening on 127.0.0.1.
type Ironic struct {
	// URL is the API's endpoint, http://127.0.0.1:PORT (no path).
	URL string
	// User and Password are the API's credentials (HTTP basic), made at random for the run.
	// The password is kept in memory only: the run's directory holds its bcrypt hash.
	User, Password string
	// Dir holds ironic.conf, htpasswd, ironic.db and ironic.log.
	Dir string
	// Log is Ironic's log file (schema creation and server).
	Log string
	// HTTPURL is the run's HTTP server (http://127.0.0.1:PORT, [deploy] http_url) when
	// Options.VirtualMedia is set: the ISOs Ironic builds, and Options.VirtualMedia.Files.
	HTTPURL string

	ownDir bool
	proc   *proc.Process
	hc     *http.Client
	httpd  *http.Server
}

// StartT starts Ironic for a test and stops it in the test's cleanup. It skips the test when it
// does not run as root; a missing tree fails it (make test builds the tree).
func StartT(t testing.TB, opts Options) *Ironic {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ironic: needs root (mount namespace, chroot)")
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	i, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := i.Stop(); err != nil {
			t.Errorf("stop ironic: %v", err)
		}
	})
	return i
}

// Start writes Ironic's configuration, creates its database and starts it, then waits until
// its API answers. Call Stop when done; a guard process ends Ironic if this process dies first.
func Start(ctx context.Context, opts Options) (_ *Ironic, err error) {
	root, err := tree(opts.Root)
	if err != nil {
		return nil, err
	}
	if opts.VirtualMedia != nil {
		if err := virtualMediaTree(root); err != nil {
			return nil, err
		}
	}
	// A request's bound: the API answers in milliseconds on an idle machine, but took more
	// than 10 s at the lowest CPU priority beside two lanes of make test.
	i := &Ironic{Dir: opts.Dir, hc: &http.Client{Timeout: 30 * time.Second}}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("ironic: start: %w", err), i.Stop())
		}
	}()
	if i.Dir == "" {
		if i.Dir, err = os.MkdirTemp("", "edgefleet-ironic-"); err != nil {
			return nil, err
		}
		i.ownDir = true
	} else if err := os.MkdirAll(i.Dir, 0o700); err != nil {
		return nil, err
	}
	i.Log = filepath.Join(i.Dir, "ironic.log")
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	i.URL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if opts.VirtualMedia != nil {
		if err := i.serveHTTP(opts.VirtualMedia.Files); err != nil {
			return nil, err
		}
	}
	if err := i.writeConfig(ports[0], opts.VirtualMedia); err != nil {
		return nil, err
	}
	unshare, err := lookPath("unshare")
	if err != nil {
		return nil, err
	}
	// A PID namespace whose first process (the script, then Ironic) takes every other process of
	// the namespace with it when it ends, and which ends when unshare does (--kill-child): the
	// guard's kill of unshare leaves nothing behind. The mounts live in the namespace only.
	args := []string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--",
		"/bin/sh", "-c", namespaceScript, "ironic-ns", root, i.Dir}
	// /usr/local/bin: the tree's mkisofs (a link to xorrisofs) for virtual media's ISOs.
	if i.proc, err = proc.Start("ironic", unshare, args, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, i.Log); err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	if err := i.waitReady(ctx, timeout); err != nil {
		return nil, err
	}
	return i, nil
}

// namespaceScript runs in the new mount and PID namespaces: $1 is the tree, $2 the run's
// directory. The tree is bound read-only over itself, so that runs sharing it write only into
// their own directory (at /var/lib/ironic) and their own /tmp and /run.
const namespaceScript = `set -eu
root=$1 dir=$2
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount --bind "$dir" "$root` + dataDir + `"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
echo "$(date -u +%T.%3N) ironic-ns: creating the database schema"
chroot "$root" ironic-dbsync --config-file ` + dataDir + `/ironic.conf create_schema
echo "$(date -u +%T.%3N) ironic-ns: starting ironic"
exec chroot "$root" ironic --config-file ` + dataDir + `/ironic.conf
`

// tree resolves Ironic's tree: root, or bin/ironic-root.
func tree(root string) (string, error) {
	if root == "" {
		repo, err := testutil.RepoRoot()
		if err != nil {
			return "", err
		}
		root = filepath.Join(repo, "bin", "ironic-root")
	}
	resolved, err := filepath.EvalSymlinks(root)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w (%s is missing)", ErrNoTree, root)
	}
	if err != nil {
		return "", fmt.Errorf("ironic: tree %s: %w", root, err)
	}
	for _, f := range []string{"usr/bin/ironic", "usr/bin/ironic-dbsync", strings.TrimPrefix(dataDir, "/")} {
		if _, err := os.Stat(filepath.Join(resolved, f)); err != nil {
			return "", fmt.Errorf("ironic: %s is not an Ironic tree (hack/tools.sh ironic builds one): %w", resolved, err)
		}
	}
	return resolved, nil
}

// virtualMediaTree checks that the tree at root carries what Ironic builds virtual media's
// ISOs with (a tree built before hack/ironic.sh added them does not).
func virtualMediaTree(root string) error {
	for _, f := range []string{isolinuxBin, "/usr/lib/syslinux/modules/bios/ldlinux.c32", "/usr/local/bin/mkisofs"} {
		// Lstat: mkisofs is an absolute link that resolves inside the tree, not on the host.
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			return fmt.Errorf("ironic: tree %s lacks %s, which virtual media's ISOs need: run 'hack/tools.sh ironic' (its tree carries isolinux, syslinux-common and xorriso as mkisofs)", root, f)
		}
	}
	return nil
}

func lookPath(name string) (string, error) {
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("ironic: %s not found", name)
}

// config is Ironic's configuration. Paths are as seen inside the tree.
//
// The interfaces enabled are those baremetal-operator v0.13.2 enrolls and configures nodes with
// (its hardwareutils bmc package and its ironic provisioner): ipmi with ipxe boot; redfish with
// ipxe or virtual media boot and redfish firmware and RAID; inspection by the agent; the direct,
// ramdisk and custom-agent deploys. Enrolling a node with an interface Ironic has not enabled
// fails with 400. "fake" ones serve fake-hardware nodes, and the no-* ones are the defaults of
// the others.
var config = template.Must(template.New("ironic.conf").Parse(`[DEFAULT]
auth_strategy = http_basic
http_basic_auth_user_file = {{.Dir}}/htpasswd
rpc_transport = none
state_path = {{.Dir}}
host = edgefleet-test-ironic
use_stderr = true
enabled_hardware_types = ipmi,redfish,fake-hardware
enabled_bios_interfaces = no-bios,redfish,fake
enabled_boot_interfaces = ipxe,redfish-virtual-media,fake
enabled_deploy_interfaces = direct,ramdisk,custom-agent,fake
enabled_firmware_interfaces = no-firmware,redfish,fake
enabled_inspect_interfaces = agent,no-inspect,fake
enabled_management_interfaces = ipmitool,redfish,fake
enabled_power_interfaces = ipmitool,redfish,fake
enabled_raid_interfaces = no-raid,agent,redfish,fake
enabled_vendor_interfaces = no-vendor,ipmitool,redfish,fake
enabled_network_interfaces = noop
isolinux_bin = {{.IsolinuxBin}}

[api]
host_ip = 127.0.0.1
port = {{.Port}}
api_workers = 1

[database]
connection = sqlite:///{{.Dir}}/ironic.db

[dhcp]
dhcp_provider = none

[deploy]
http_root = {{.Dir}}/httpboot
{{- with .VirtualMedia}}
http_url = {{.HTTPURL}}
# SeaBIOS machines: Ironic builds the ISO with isolinux (a UEFI ISO would need an ESP image).
default_boot_mode = bios
# Automated cleaning erases the disks' metadata only, as Metal3's Ironic image configures it
# (baremetal-operator's automatedCleaningMode "metadata" only turns automated_clean on): by
# default the agent would also shred every disk (erase_devices), hours under TCG.
erase_devices_priority = 0
erase_devices_metadata_priority = 10
{{- if .FastTrack}}
fast_track = true
{{- end}}
{{- end}}

[pxe]
tftp_root = {{.Dir}}/tftpboot

[agent]
# The agent's logs of a failed deploy or cleaning (the default is in the read-only tree).
deploy_logs_local_path = {{.Dir}}/deploy-logs

[oslo_concurrency]
lock_path = {{.Dir}}/locks
{{- with .VirtualMedia}}

[redfish]
kernel_append_params = {{.KernelParams}}

[service_catalog]
# The agent's way to Ironic: lookup, heartbeats and continue_inspection.
endpoint_override = {{.APIURL}}

[conductor]
# The agent's ramdisk is zstd-compressed cpio: the kernel unpacks it; Ironic must not.
disable_zstandard_decompression = true
{{- end}}
`))

// isolinuxBin is Debian's isolinux.bin in the tree (package isolinux; Ironic's default is
// another distribution's path).
const isolinuxBin = "/usr/lib/ISOLINUX/isolinux.bin"

// serveHTTP starts the run's HTTP server on a free port of 127.0.0.1: the boot directory
// (httpboot) at /, and each of files at /NAME/.
func (i *Ironic) serveHTTP(files map[string]string) error {
	boot := filepath.Join(i.Dir, "httpboot")
	if err := os.MkdirAll(boot, 0o700); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(boot)))
	for name, dir := range files {
		if name == "" || strings.ContainsAny(name, "/.") {
			return fmt.Errorf("virtual media: Files name %q: want a plain name", name)
		}
		mux.Handle("/"+name+"/", http.StripPrefix("/"+name+"/", http.FileServer(http.Dir(dir))))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	i.HTTPURL = "http://" + ln.Addr().String()
	i.httpd = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = i.httpd.Serve(ln) }()
	return nil
}

// httpPort is the port of the run's HTTP server's URL (http://127.0.0.1:PORT).
func httpPort(url string) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	return p
}

// FileURL is the URL the run's HTTP server serves file of Options.VirtualMedia.Files[name] at.
func (i *Ironic) FileURL(name, file string) string {
	return i.HTTPURL + "/" + name + "/" + file
}

// writeConfig writes ironic.conf, the htpasswd file of a user and password made for the run,
// and the directories Ironic writes to.
func (i *Ironic) writeConfig(port int, vm *VirtualMediaOptions) error {
	for _, d := range []string{"httpboot", "tftpboot", "locks", "deploy-logs"} {
		if err := os.MkdirAll(filepath.Join(i.Dir, d), 0o700); err != nil {
			return err
		}
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("password: %w", err)
	}
	i.User, i.Password = "edgefleet", hex.EncodeToString(raw)
	// The lowest cost: the password is 192 random bits, which no cost makes harder to guess,
	// and Ironic checks the hash on every request.
	hash, err := bcrypt.GenerateFromPassword([]byte(i.Password), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("htpasswd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(i.Dir, "htpasswd"), fmt.Appendf(nil, "%s:%s\n", i.User, hash), 0o600); err != nil {
		return err
	}
	type vmedia struct {
		HTTPURL, APIURL, KernelParams string
		FastTrack                     bool
	}
	data := struct {
		Dir          string
		Port         int
		IsolinuxBin  string
		VirtualMedia *vmedia
	}{Dir: dataDir, Port: port, IsolinuxBin: isolinuxBin}
	if vm != nil {
		if vm.AgentHost == "" {
			return errors.New("virtual media: AgentHost is required (10.0.2.2 for qemu's user-mode network)")
		}
		params := vm.KernelParams
		if params == "" {
			params = "nofb vga=normal console=ttyS0,115200n8"
		}
		if vm.ImageProxy {
			params += fmt.Sprintf(" systemd.setenv=http_proxy=http://%s systemd.setenv=no_proxy=%s",
				net.JoinHostPort(vm.AgentHost, httpPort(i.HTTPURL)), vm.AgentHost)
		}
		data.VirtualMedia = &vmedia{HTTPURL: i.HTTPURL, APIURL: "http://" + net.JoinHostPort(vm.AgentHost, strconv.Itoa(port)),
			KernelParams: params, FastTrack: vm.FastTrack}
	}
	var conf bytes.Buffer
	if err := config.Execute(&conf, data); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(i.Dir, "ironic.conf"), conf.Bytes(), 0o600)
}

// waitReady polls GET / until it answers 200, the process exits, ctx ends or timeout passes.
func (i *Ironic) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-i.proc.Exited:
			return fmt.Errorf("ironic exited during start (%s); end of %s:\n%s", i.proc.Cmd.ProcessState, i.Log, i.proc.LogTail(30))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := hc.Get(i.URL + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ironic not answering %s/ after %s; end of %s:\n%s", i.URL, timeout, i.Log, i.proc.LogTail(30))
		}
	}
}

// Do sends an API request with the run's credentials and the header asking for MinAPIVersion;
// body, when not nil, is sent as JSON. The caller closes the response's body.
func (i *Ironic) Do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("ironic %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, i.URL+path, r)
	if err != nil {
		return nil, fmt.Errorf("ironic %s %s: %w", method, path, err)
	}
	req.SetBasicAuth(i.User, i.Password)
	req.Header.Set("X-OpenStack-Ironic-API-Version", MinAPIVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := i.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ironic %s %s: %w", method, path, err)
	}
	return resp, nil
}

// Stop stops Ironic (SIGTERM, then SIGKILL of the namespace after 10 s) and removes the run's
// directory if Start made it. Nothing it mounted outlives it: the mounts were in its namespace.
func (i *Ironic) Stop() error {
	var errs []error
	if i.proc != nil {
		// unshare does not pass SIGTERM on to its child: Ironic (the namespace's first process)
		// gets it directly; when it ends, unshare does too.
		if pid, err := childPID(i.proc.Cmd.Process.Pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-i.proc.Exited:
			case <-time.After(10 * time.Second):
			}
		}
		// When unshare is still there, its SIGKILL takes the namespace along; Kill releases the
		// guard either way.
		if err := i.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, err)
		}
		i.proc = nil
	}
	if i.httpd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := i.httpd.Shutdown(ctx); err != nil {
			_ = i.httpd.Close()
		}
		cancel()
		i.httpd = nil
	}
	if i.ownDir {
		if err := os.RemoveAll(i.Dir); err != nil {
			errs = append(errs, err)
		}
		i.ownDir = false
	}
	return errors.Join(errs...)
}

// childPID returns the PID of the only child of pid (unshare's forked child).
func childPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("process %d has no child", pid)
	}
	return strconv.Atoi(f[0])
}

// NodeSummary is what Ironic says of a node (its UUID or name; baremetal-operator names nodes
// namespace~name): its states, error, lock and driver, or the error of asking, for a failing
// test to show. It never fails: the node may not exist yet.
func (i *Ironic) NodeSummary(ctx context.Context, node string) string {
	resp, err := i.Do(ctx, http.MethodGet, "/v1/nodes/"+node+"?fields=uuid,provision_state,target_provision_state,power_state,target_power_state,last_error,reservation,parent_node,driver", nil)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	if err != nil {
		return err.Error()
	}
	return resp.Status + " " + string(b)
}

// CallT sends a request with Do for a test, fails the test unless the answer has status want,
// and decodes its JSON body into out when out is not nil.
func (i *Ironic) CallT(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	resp, err := i.Do(t.Context(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("ironic %s %s: read the answer: %v", method, path, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("ironic %s %s: %s, want %d: %s", method, path, resp.Status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("ironic %s %s: %v: %s", method, path, err, b)
		}
	}
}
