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

// bed is real Ironic, readied for virtual media and for baremetal-operator, and one VM behind
// the Redfish BMC.
type bed struct {
	t       *testing.T
	ir      *ironic.Ironic
	srv     *bmc.Server
	vm      *bmc.VM
	sysPath string
	// sshPort is the host's loopback port qemu forwards to the guest's SSH.
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

// newBed starts Ironic, serving the agent (bin/ipa) and the OS image (img) from the run's HTTP
// server, and the VM. baremetal-operator enrolls the node itself and sets none of the
// driver_info a caller of Ironic's API would, so Ironic is readied for it: the agent's kernel
// line (agentKernelParams) is Ironic's, for every node ([redfish] kernel_append_params: one VM
// per Ironic here); the agent fetches images through the run's HTTP server as its proxy
// (ImageProxy: the image's URL names the host's loopback, which the guest on qemu's user-mode
// network reaches at 10.0.2.2 only); and fast track, as Metal3's own Ironic has it, keeps the
// agent that cleaned for the deploy. qemu forwards a port of the host's loopback to the agent's
// API (9999 in the VM: Ironic calls the agent there for cleaning and deploy steps; the agent
// advertises it), and another to the guest's SSH.
func newBed(t *testing.T, img osImage) *bed {
	t.Helper()
	agentPort := freePort(t)
	vmedia := &ironic.VirtualMediaOptions{
		AgentHost: "10.0.2.2", Files: map[string]string{"ipa": ipaFiles(t), "osimage": img.dir},
		KernelParams: agentKernelParams(agentPort), ImageProxy: true, FastTrack: true,
	}
	ironicDir := secretDir(t, "edgefleet-ipa-ironic-")
	start := time.Now()
	ir := ironic.StartT(t, ironic.Options{Dir: ironicDir, VirtualMedia: vmedia})
	t.Logf("ironic up after %s (%s; files at %s)", time.Since(start).Round(time.Millisecond), ir.URL, ir.HTTPURL)
	srv := bmc.StartT(t, bmc.Options{})
	sshPort := freePort(t)
	vm, err := bmc.NewVM(bmc.Config{Name: "ipa-vm-0", Dir: t.TempDir(), DiskSize: vmDiskSize, MemoryMiB: vmMemoryMiB, CPUs: vmCPUs, MAC: vmMAC,
		Network: bmc.Network{HostForwards: []bmc.HostForward{{Host: agentPort, Guest: 9999}, {Host: sshPort, Guest: 22}}}})
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
	b := &bed{t: t, ir: ir, srv: srv, vm: vm, sysPath: sysPath, sshPort: sshPort}
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
	ProvisionState       string `json:"provision_state"`
	TargetProvisionState string `json:"target_provision_state"`
	PowerState           string `json:"power_state"`
	LastError            string `json:"last_error"`
}

// agentKernelParams is the agent's kernel command line: the serial console, its API as Ironic
// reaches it (qemu's forward of the host's loopback), and one download of an image: the agent
// downloads again after a checksum mismatch (9 times by default, 10 s apart), and once is
// enough to see it refuse one.
func agentKernelParams(agentPort int) string {
	return fmt.Sprintf("nofb vga=normal console=ttyS0,115200n8 ipa-advertise-host=127.0.0.1 ipa-advertise-port=%d ipa-image-download-connection-retries=0", agentPort)
}

// node reads the node (its name) from Ironic. Ironic not answering in time is an error the
// caller may wait on: starved of CPU (at the lowest priority beside make test's other lanes)
// it once took more than the client's timeout to answer a GET.
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
		return n, fmt.Errorf("ironic GET /v1/nodes/%s: %s: %s", name, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return n, fmt.Errorf("ironic GET /v1/nodes/%s: %w: %s", name, err, raw)
	}
	return n, nil
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
