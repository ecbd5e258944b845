package bmc_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/bmc"
	"github.com/edgefleet/edgefleet/test/ironic"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestIronicDrivesVM has real Ironic (test/ironic) drive a qemu VM through the Redfish BMC, as
// baremetal-operator's redfish:// hosts are driven: enroll with the redfish hardware type and
// iPXE boot, manage (Ironic reads power and boot through the BMC), set the boot device, power
// on and off. What happened is asserted from qemu and its firmware, not from the BMC's word.
// A node with a wrong BMC password fails to manage, and Ironic says why.
func TestIronicDrivesVM(t *testing.T) {
	start := time.Now()
	ir := ironic.StartT(t, ironic.Options{})
	t.Logf("ironic up after %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if lines, err := grepFile(ir.Log, "redfish", 60); t.Failed() && err == nil {
			t.Logf("Ironic's log on Redfish:\n%s", lines)
		}
	})
	ctx := t.Context()
	srv := bmc.StartT(t, bmc.Options{})
	vm := newVM(t, bmc.Config{Name: "ironic-vm-0", MAC: "52:54:00:1e:00:01"})
	sysPath, err := srv.AddSystem("vm-0", vm)
	if err != nil {
		t.Fatal(err)
	}
	driverInfo := func(password string) map[string]any {
		return map[string]any{
			"redfish_address":   srv.URL,
			"redfish_system_id": sysPath,
			"redfish_username":  srv.User,
			"redfish_password":  password,
			"redfish_verify_ca": false,
		}
	}
	bmcSystem := func() map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+sysPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(srv.User, srv.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	var node ironicNode
	ir.CallT(t, http.MethodPost, "/v1/nodes", map[string]any{
		"name": "vm-0", "driver": "redfish", "boot_interface": "ipxe", "driver_info": driverInfo(srv.Password),
	}, http.StatusCreated, &node)
	phase := time.Now()

	// manage: Ironic verifies that it reaches the BMC and reads the power state.
	ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/states/provision", map[string]string{"target": "manage"}, http.StatusAccepted, nil)
	node = waitNode(t, ir, node.UUID, "provision state manageable", func(n ironicNode) bool { return n.ProvisionState == "manageable" })
	if node.PowerState != "power off" {
		t.Errorf("Ironic read power state %q through the BMC, want power off", node.PowerState)
	}
	t.Logf("manageable after %s", time.Since(phase).Round(time.Millisecond))

	// Boot device: Ironic's one-time PXE becomes the BMC's Once override to Pxe.
	ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/management/boot_device", map[string]any{"boot_device": "pxe", "persistent": false}, http.StatusNoContent, nil)
	var bootDevice struct {
		BootDevice string `json:"boot_device"`
		Persistent *bool  `json:"persistent"`
	}
	ir.CallT(t, http.MethodGet, "/v1/nodes/"+node.UUID+"/management/boot_device", nil, http.StatusOK, &bootDevice)
	if bootDevice.BootDevice != "pxe" || bootDevice.Persistent == nil || *bootDevice.Persistent {
		persistent := "unknown"
		if bootDevice.Persistent != nil {
			persistent = fmt.Sprint(*bootDevice.Persistent)
		}
		t.Errorf("Ironic reads boot device %q, persistent %s; want pxe, one-time", bootDevice.BootDevice, persistent)
	}
	sys := bmcSystem()
	if target, enabled := get(sys, "Boot/BootSourceOverrideTarget"), get(sys, "Boot/BootSourceOverrideEnabled"); target != "Pxe" || enabled != "Once" {
		t.Fatalf("the BMC's boot override is %v %v, want Pxe Once", target, enabled)
	}

	// Power on: a qemu runs, booting the network first.
	phase = time.Now()
	ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/states/power", map[string]string{"target": "power on"}, http.StatusAccepted, nil)
	node = waitNode(t, ir, node.UUID, "power state power on", func(n ironicNode) bool { return n.PowerState == "power on" && n.TargetPowerState == "" })
	t.Logf("powered on after %s", time.Since(phase).Round(time.Millisecond))
	pid := vm.PID()
	if pid == 0 {
		t.Fatal("Ironic says power on, but no qemu runs")
	}
	if status, err := vm.Status(); err != nil || status != "running" {
		t.Fatalf("qemu %d: QMP query-status %q, %v; want running", pid, status, err)
	}
	if nic := deviceArg(vm.CommandLine(), "virtio-net-pci"); !strings.Contains(nic, "mac=52:54:00:1e:00:01") || !strings.HasSuffix(nic, ",bootindex=1") {
		t.Errorf("qemu %d's NIC is %q: want the node's MAC and the first boot index", pid, nic)
	}
	attempts := waitBootAttempts(t, vm, 1)
	if attempts[0] != "Booting from ROM..." {
		t.Errorf("the firmware tried %q first, want the NIC's ROM (iPXE): Booting from ROM...", attempts)
	}
	// The one-time override is spent: the BMC says so, and qemu holds the default order for
	// the guest's next reboot.
	if enabled := get(bmcSystem(), "Boot/BootSourceOverrideEnabled"); enabled != "Disabled" {
		t.Errorf("after the boot the BMC's override is %v, want Disabled", enabled)
	}
	wantIndexes(t, vm, map[bmc.Device]int{bmc.DeviceHdd: 1, bmc.DeviceCd: 2, bmc.DevicePxe: 3})

	// Power off: qemu is gone.
	phase = time.Now()
	ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/states/power", map[string]string{"target": "power off"}, http.StatusAccepted, nil)
	node = waitNode(t, ir, node.UUID, "power state power off", func(n ironicNode) bool { return n.PowerState == "power off" && n.TargetPowerState == "" })
	t.Logf("powered off after %s", time.Since(phase).Round(time.Millisecond))
	if !gone(pid) || vm.PID() != 0 {
		t.Errorf("Ironic says power off, but qemu %d is still there (VM's PID %d)", pid, vm.PID())
	}
	if node.LastError != "" {
		t.Errorf("node's last error: %s", node.LastError)
	}

	// A wrong password: manage fails back to enroll, and Ironic's error names authentication.
	var wrong ironicNode
	ir.CallT(t, http.MethodPost, "/v1/nodes", map[string]any{
		"name": "vm-0-wrong-password", "driver": "redfish", "boot_interface": "ipxe", "driver_info": driverInfo(srv.Password + "x"),
	}, http.StatusCreated, &wrong)
	refusedBefore := countStatus(ironicRequests(srv), http.StatusUnauthorized)
	ir.CallT(t, http.MethodPut, "/v1/nodes/"+wrong.UUID+"/states/provision", map[string]string{"target": "manage"}, http.StatusAccepted, nil)
	wrong = waitNode(t, ir, wrong.UUID, "manage to end", func(n ironicNode) bool {
		return n.TargetProvisionState == "" && (n.ProvisionState == "manageable" || n.LastError != "")
	})
	t.Logf("Ironic's error for the wrong password: %s", wrong.LastError)
	if wrong.ProvisionState != "enroll" {
		t.Errorf("with a wrong BMC password the node went to %q, want back to enroll", wrong.ProvisionState)
	}
	// sushy's words (the status) and the BMC's (its message) reach the node's last error;
	// Ironic's own log classifies the failure as an authentication error.
	if !strings.Contains(wrong.LastError, "returned code 401") || !strings.Contains(wrong.LastError, "authentication") {
		t.Errorf("Ironic's error does not name authentication and the BMC's 401: %q", wrong.LastError)
	}
	if lines, err := grepFile(ir.Log, "received an authentication access error", 10); err != nil || !strings.Contains(lines, wrong.UUID) {
		t.Errorf("Ironic's log has no authentication error for node %s (%v): %q", wrong.UUID, err, lines)
	}
	if countStatus(ironicRequests(srv), http.StatusUnauthorized) == refusedBefore {
		t.Errorf("the BMC refused nothing while Ironic managed the node with a wrong password")
	}
	if vm.PID() != 0 {
		t.Errorf("a node with a wrong password powered the VM on")
	}

	t.Logf("the Redfish requests Ironic made (count, method, path, status):\n%s", summarize(ironicRequests(srv)))
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

// ironicNode is what the test reads of an Ironic node.
type ironicNode struct {
	UUID                 string `json:"uuid"`
	ProvisionState       string `json:"provision_state"`
	TargetProvisionState string `json:"target_provision_state"`
	PowerState           string `json:"power_state"`
	TargetPowerState     string `json:"target_power_state"`
	LastError            string `json:"last_error"`
}

// waitNode polls a node until done says so (2 minutes: Ironic's conductor works in the
// background, on a shared machine). It fails at once when the node settles otherwise: a
// failed provision state, or an error with nothing in progress.
func waitNode(t *testing.T, ir *ironic.Ironic, uuid, what string, done func(ironicNode) bool) ironicNode {
	t.Helper()
	var n ironicNode
	testutil.WaitFor(t, 2*time.Minute, "node "+uuid+": "+what, func() (bool, string) {
		n = ironicNode{}
		ir.CallT(t, http.MethodGet, "/v1/nodes/"+uuid, nil, http.StatusOK, &n)
		if done(n) {
			return true, ""
		}
		settled := n.TargetProvisionState == "" && n.TargetPowerState == ""
		if strings.HasSuffix(n.ProvisionState, "failed") || settled && n.LastError != "" {
			t.Fatalf("node %s: waiting for %s: it settled as %+v", uuid, what, n)
		}
		return false, fmt.Sprintf("%+v", n)
	})
	return n
}

// ironicRequests are the requests Ironic (sushy, on python-requests) made of the BMC: not the
// test's own.
func ironicRequests(srv *bmc.Server) []bmc.Request {
	var out []bmc.Request
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Agent, "python-requests/") {
			out = append(out, r)
		}
	}
	return out
}

func countStatus(reqs []bmc.Request, status int) int {
	n := 0
	for _, r := range reqs {
		if r.Status == status {
			n++
		}
	}
	return n
}

// summarize counts requests by method, path and status.
func summarize(reqs []bmc.Request) string {
	counts := map[string]int{}
	for _, r := range reqs {
		counts[fmt.Sprintf("%-6s %s %d", r.Method, r.Path, r.Status)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%4d  %s\n", counts[k], k)
	}
	return b.String()
}

func grepFile(path, word string, max int) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(l), word) {
			out = append(out, l)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n"), nil
}
