package ipa_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/bmc"
	"github.com/edgefleet/edgefleet/test/ironic"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// The VM's hardware, which the inventory must report.
const (
	vmMAC       = "52:54:00:1a:0a:01"
	vmMemoryMiB = 4096
	vmCPUs      = 2
	vmDiskSize  = 8 << 30
)

// ipaFiles is bin/ipa resolved: the agent's kernel and initramfs. Missing, the test fails
// naming the command that builds them.
func ipaFiles(t *testing.T) string {
	t.Helper()
	repo, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(repo, "bin", "ipa"))
	if err == nil {
		for _, f := range []string{"vmlinuz", "initramfs"} {
			if _, err = os.Stat(filepath.Join(dir, f)); err != nil {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("the IPA ramdisk is missing (%v): run 'hack/tools.sh ipa' (as root, ~7 min once; make tools builds it too)", err)
	}
	return dir
}

// secretDir is a directory in /dev/shm (memory, never a disk), removed when the test ends.
func secretDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}

// bed is real Ironic, readied for virtual media, and one VM behind the Redfish BMC.
type bed struct {
	t       *testing.T
	ir      *ironic.Ironic
	srv     *bmc.Server
	vm      *bmc.VM
	sysPath string
	// agentPort is the host's loopback port qemu forwards to the agent's API (9999 in the
	// VM): Ironic calls the agent there (cleaning's commands); the agent advertises it.
	agentPort int
	// sshPort is the host's loopback port qemu forwards to the guest's SSH (bedOptions.SSH).
	sshPort int
}

// freePort is a free TCP port of the host's loopback.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(testutil.FreeAddr(t))
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newBed(t *testing.T) *bed {
	t.Helper()
	return newBedWith(t, bedOptions{})
}

// bedOptions add to a bed what a deploy needs.
type bedOptions struct {
	// OSImage, when set, is a directory the run's HTTP server serves at /osimage/ (bin/osimage).
	OSImage string
	// SSH forwards a port of the host's loopback to the guest's 22 (bed.sshPort).
	SSH bool
	// Operator readies Ironic for baremetal-operator, which enrolls the node itself and sets
	// none of the driver_info the other tests set: the agent's kernel line (kernelParams) is
	// Ironic's, for every node ([redfish] kernel_append_params: one VM per Ironic here); the
	// agent fetches images through the run's HTTP server as its proxy (ImageProxy, in place of
	// driver_info/image_http_proxy); and fast track, as Metal3's own Ironic has it, keeps the
	// agent that cleaned for the deploy.
	Operator bool
}

func newBedWith(t *testing.T, opts bedOptions) *bed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ipa: needs root (Ironic in private namespaces, chroot)")
	}
	ipa := ipaFiles(t)
	files := map[string]string{"ipa": ipa}
	if opts.OSImage != "" {
		files["osimage"] = opts.OSImage
	}
	// The agent's port first: an operator's bed puts it on Ironic's own kernel line.
	agentPort := freePort(t)
	vmedia := &ironic.VirtualMediaOptions{AgentHost: "10.0.2.2", Files: files}
	if opts.Operator {
		vmedia.KernelParams, vmedia.ImageProxy, vmedia.FastTrack = agentKernelParams(agentPort), true, true
	}
	ironicDir := secretDir(t, "edgefleet-ipa-ironic-")
	start := time.Now()
	ir := ironic.StartT(t, ironic.Options{Dir: ironicDir, VirtualMedia: vmedia})
	t.Logf("ironic up after %s (%s; files at %s)", time.Since(start).Round(time.Millisecond), ir.URL, ir.HTTPURL)
	srv := bmc.StartT(t, bmc.Options{})
	forwards := []bmc.HostForward{{Host: agentPort, Guest: 9999}}
	sshPort := 0
	if opts.SSH {
		sshPort = freePort(t)
		forwards = append(forwards, bmc.HostForward{Host: sshPort, Guest: 22})
	}
	vm, err := bmc.NewVM(bmc.Config{Name: "ipa-vm-0", Dir: t.TempDir(), DiskSize: vmDiskSize, MemoryMiB: vmMemoryMiB, CPUs: vmCPUs, MAC: vmMAC,
		Network: bmc.Network{HostForwards: forwards}})
	if errors.Is(err, bmc.ErrNoQEMU) {
		t.Fatalf("%v (hack/tools.sh qemu installs it)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := vm.Close(); err != nil {
			t.Errorf("power off the VM: %v", err)
		}
	})
	sysPath, err := srv.AddSystem("vm-0", vm)
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{t: t, ir: ir, srv: srv, vm: vm, sysPath: sysPath, agentPort: agentPort, sshPort: sshPort}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("end of the VM's serial console (%s):\n%s", vm.SerialLog, tailFile(vm.SerialLog, 60))
		t.Logf("errors and warnings in Ironic's log:\n%s", grepFile(ir.Log, []string{"ERROR", "WARNING"}, 40))
	})
	return b
}

// ironicNode is what the test reads of an Ironic node.
type ironicNode struct {
	UUID                 string `json:"uuid"`
	ProvisionState       string `json:"provision_state"`
	TargetProvisionState string `json:"target_provision_state"`
	PowerState           string `json:"power_state"`
	LastError            string `json:"last_error"`
}

// enroll creates the node (redfish hardware, virtual-media boot, agent inspection, the agent's
// kernel and ramdisk from the run's HTTP server) and its port, and manages it.
func (b *bed) enroll() ironicNode {
	t := b.t
	var node ironicNode
	b.ir.CallT(t, http.MethodPost, "/v1/nodes", map[string]any{
		"name":              "vm-0",
		"driver":            "redfish",
		"boot_interface":    "redfish-virtual-media",
		"inspect_interface": "agent",
		"driver_info": map[string]any{
			"redfish_address":      b.srv.URL,
			"redfish_system_id":    b.sysPath,
			"redfish_username":     b.srv.User,
			"redfish_password":     b.srv.Password,
			"redfish_verify_ca":    false,
			"deploy_kernel":        b.ir.FileURL("ipa", "vmlinuz"),
			"deploy_ramdisk":       b.ir.FileURL("ipa", "initramfs"),
			"kernel_append_params": b.kernelParams(),
		},
	}, http.StatusCreated, &node)
	// The agent looks its node up by its MACs.
	b.ir.CallT(t, http.MethodPost, "/v1/ports", map[string]any{"node_uuid": node.UUID, "address": vmMAC}, http.StatusCreated, nil)
	b.provision(node.UUID, "manage")
	return b.wait(node.UUID, "manageable", 2*time.Minute, 2*time.Minute)
}

// kernelParams is the agent's kernel command line: the serial console, and its API as Ironic
// reaches it (qemu's forward of the host's loopback).
func (b *bed) kernelParams() string {
	return agentKernelParams(b.agentPort)
}

func agentKernelParams(agentPort int) string {
	return fmt.Sprintf("nofb vga=normal console=ttyS0,115200n8 ipa-advertise-host=127.0.0.1 ipa-advertise-port=%d", agentPort)
}

func (b *bed) provision(uuid, target string) {
	b.ir.CallT(b.t, http.MethodPut, "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": target}, http.StatusAccepted, nil)
}

// node reads the node (its UUID or name) from Ironic. Ironic not answering in time is an
// error the caller may wait on: starved of CPU beside make test's other lanes (this package
// runs at the lowest priority), it once took more than the client's timeout to answer a GET.
// An answer that is not the node is an *answerError.
func (b *bed) node(name string) (ironicNode, error) {
	var n ironicNode
	resp, err := b.ir.Do(b.t.Context(), http.MethodGet, "/v1/nodes/"+name, nil)
	if err != nil {
		return n, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK {
		return n, &answerError{fmt.Sprintf("ironic GET /v1/nodes/%s: %s: %s", name, resp.Status, raw)}
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return n, &answerError{fmt.Sprintf("ironic GET /v1/nodes/%s: %v: %s", name, err, raw)}
	}
	return n, nil
}

// answerError is Ironic's answer that is not the node asked for (not found, undecodable).
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// wait polls the node until it rests in state, failing at once when it fails instead (unless
// state is the failed state awaited). Progress
// is the node's state and the VM's serial console growing: a VM that boots slowly under TCG
// passes, one that stops moving for stall fails.
func (b *bed) wait(uuid, state string, stall, limit time.Duration) ironicNode {
	t := b.t
	t.Helper()
	var n ironicNode
	last := ""
	start := time.Now()
	testutil.WaitProgress(t, stall, limit, "node "+uuid+" to "+state, func() (bool, string) {
		var err error
		if n, err = b.node(uuid); err != nil {
			var answer *answerError
			if errors.As(err, &answer) {
				t.Fatal(err)
			}
			// Ironic slow to answer: the wait goes on; one that never answers stalls it.
			return false, err.Error()
		}
		now := n.ProvisionState + "/" + n.TargetProvisionState + " " + n.PowerState
		if now != last {
			t.Logf("%6s  node %s", time.Since(start).Round(time.Second), now)
			last = now
		}
		// A failed state is where the node rests (whatever its target says) when the test waits for it.
		if n.ProvisionState == state && (n.TargetProvisionState == "" || strings.HasSuffix(state, "failed")) {
			return true, ""
		}
		if strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "enroll" && n.LastError != "" ||
			n.ProvisionState == "active" && n.TargetProvisionState == "" {
			t.Fatalf("node %s: waiting for %s, it went %s: %s", uuid, state, n.ProvisionState, n.LastError)
		}
		return false, fmt.Sprintf("%s, serial console %d bytes", now, b.serialSize())
	})
	return n
}

// inventory is what the test reads of the inventory the agent sent.
type inventory struct {
	Inventory struct {
		Interfaces []struct {
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
		} `json:"interfaces"`
		Memory struct {
			PhysicalMB int   `json:"physical_mb"`
			Total      int64 `json:"total"`
		} `json:"memory"`
		Disks []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"disks"`
		CPU struct {
			Count        int    `json:"count"`
			Architecture string `json:"architecture"`
		} `json:"cpu"`
		SystemVendor struct {
			Manufacturer string `json:"manufacturer"`
		} `json:"system_vendor"`
	} `json:"inventory"`
}

// machineHardware is what a test reads of the machine's hardware as inspection reported it
// (Ironic's inventory, or the operator's hardwareDetails made from it).
type machineHardware struct {
	MACs      []string
	MemoryMiB int
	CPUs      int
	Disks     map[string]int64 // name → size in bytes
}

// check asserts that h is the VM's hardware: its MAC, memory, CPU count and disk size.
func (h machineHardware) check(t *testing.T, source string) {
	t.Helper()
	if !slices.Contains(h.MACs, vmMAC) {
		t.Errorf("%s: interfaces have MACs %v, want the VM's %s", source, h.MACs, vmMAC)
	}
	if h.MemoryMiB != vmMemoryMiB {
		t.Errorf("%s: memory is %d MiB, want the VM's %d", source, h.MemoryMiB, vmMemoryMiB)
	}
	if h.CPUs != vmCPUs {
		t.Errorf("%s: CPU count is %d, want the VM's %d", source, h.CPUs, vmCPUs)
	}
	found := false
	for _, size := range h.Disks {
		found = found || size == vmDiskSize
	}
	if !found {
		t.Errorf("%s: disks are %v, want one of the VM's disk size %d", source, h.Disks, vmDiskSize)
	}
}

// TestInspection: real Ironic inspects a VM with its real agent, booted by Redfish virtual
// media, and stores the VM's true hardware.
func TestInspection(t *testing.T) {
	start := time.Now()
	b := newBed(t)
	node := b.enroll()
	t.Logf("manageable after %s", time.Since(start).Round(time.Second))

	phase := time.Now()
	b.provision(node.UUID, "inspect")
	// The agent's boot under TCG is the long part (~5 minutes); unpacking the ramdisk is quiet.
	node = b.wait(node.UUID, "manageable", 10*time.Minute, 25*time.Minute)
	inspection := time.Since(phase)
	t.Logf("inspected in %s", inspection.Round(time.Second))
	if node.LastError != "" {
		t.Errorf("node's last error after inspection: %s", node.LastError)
	}

	var inv inventory
	b.ir.CallT(t, http.MethodGet, "/v1/nodes/"+node.UUID+"/inventory", nil, http.StatusOK, &inv)
	raw, _ := json.Marshal(inv)
	t.Logf("inventory (what the test reads of it): %s", raw)
	hw := machineHardware{MemoryMiB: inv.Inventory.Memory.PhysicalMB, CPUs: inv.Inventory.CPU.Count, Disks: map[string]int64{}}
	for _, i := range inv.Inventory.Interfaces {
		hw.MACs = append(hw.MACs, strings.ToLower(i.MACAddress))
	}
	for _, d := range inv.Inventory.Disks {
		hw.Disks[d.Name] = d.Size
	}
	hw.check(t, "Ironic's inventory")

	// What happened on the wire: the BMC took the ISO Ironic built, the VM booted its CD, and
	// it is off again with the drive empty (Ironic powers off after inspection and ejects).
	var inserts int
	for _, r := range b.srv.Requests() {
		if strings.HasSuffix(r.Path, "/VirtualMedia.InsertMedia") && r.Status == http.StatusNoContent {
			inserts++
		}
	}
	if inserts == 0 {
		t.Errorf("the BMC never took virtual media; its requests:\n%s", b.srv.RequestLog())
	}
	if fw, err := os.ReadFile(b.vm.FirmwareLog); err != nil || !strings.Contains(string(fw), "Booting from DVD/CD") {
		t.Errorf("SeaBIOS never booted the CD (%v); its log ends:\n%s", err, tailFile(b.vm.FirmwareLog, 20))
	}
	if b.vm.PoweredOn() || node.PowerState != "power off" {
		t.Errorf("after inspection the VM is on (%v), node power %q: want it off", b.vm.PoweredOn(), node.PowerState)
	}
	if m := b.vm.Media(); m != "" {
		t.Errorf("after inspection the VM's drive still holds %s", m)
	}
	// The VM's logs are on disk (/tmp): the BMC's and Ironic's passwords must not be there.
	// (Its disk image is the guest's own; the ISO was deleted at the ejection, checked above.)
	logs := t.TempDir()
	for _, f := range []string{b.vm.SerialLog, b.vm.FirmwareLog, b.vm.Log} {
		if raw, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(logs, filepath.Base(f)), raw, 0o600)
		}
	}
	leaks, scanned, err := testutil.FindSecrets([]string{logs}, map[string][]byte{
		"the BMC's password": []byte(b.srv.Password), "Ironic's password": []byte(b.ir.Password),
	})
	if err != nil || len(leaks) > 0 || scanned != 3 {
		t.Errorf("secrets in the VM's logs (%d of 3 scanned, %v): %v", scanned, err, leaks)
	}
	t.Logf("whole test %s (inspection %s)", time.Since(start).Round(time.Second), inspection.Round(time.Second))
}

// TestCleaning: manual cleaning with erase_devices_metadata, run by the real agent, wipes the
// start of the VM's disk: a marker written there before is gone.
func TestCleaning(t *testing.T) {
	start := time.Now()
	b := newBed(t)
	marker := []byte(fmt.Sprintf("edgefleet-disk-marker-%d", time.Now().UnixNano()))
	f, err := os.OpenFile(b.vm.Disk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(marker, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if head, err := readHead(b.vm.Disk, len(marker)); err != nil || string(head) != string(marker) {
		t.Fatalf("the marker is not at the start of the disk before cleaning (%v): %q", err, head)
	}
	node := b.enroll()

	phase := time.Now()
	b.ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/states/provision", map[string]any{
		"target":      "clean",
		"clean_steps": []map[string]any{{"interface": "deploy", "step": "erase_devices_metadata"}},
	}, http.StatusAccepted, nil)
	node = b.wait(node.UUID, "manageable", 10*time.Minute, 30*time.Minute)
	t.Logf("cleaned in %s", time.Since(phase).Round(time.Second))
	if node.LastError != "" {
		t.Errorf("node's last error after cleaning: %s", node.LastError)
	}
	head, err := readHead(b.vm.Disk, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(head), string(marker)) {
		t.Errorf("the marker at the start of the disk survived erase_devices_metadata")
	}
	if b.vm.PoweredOn() {
		t.Errorf("after cleaning the VM is still on")
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}

// readHead reads the first n bytes of the file at path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, 0)
	return b, err
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func grepFile(path string, words []string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n")
}
