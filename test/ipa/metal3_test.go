package ipa_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// hostBed is a bed whose VM baremetal-operator drives through the bed's Ironic, as a
// BareMetalHost of namespace ns.
type hostBed struct {
	*bed
	m3   *metal3.Operator
	ns   string
	host *metal3api.BareMetalHost
}

// newHostBed starts the bed (Ironic readied for the operator, the VM), a control plane and
// baremetal-operator against the bed's Ironic, with the agent's kernel and ramdisk of the run's
// HTTP server.
func newHostBed(t *testing.T, img osImage) *hostBed {
	t.Helper()
	b := newBed(t, img)
	cp := controlplane.StartT(t, controlplane.Options{Name: "site-ipa"})
	ns := cp.Namespace(t)
	m3 := metal3.StartT(t, cp, metal3.Options{Namespaces: []string{ns}, Ironic: &metal3.Ironic{
		URL: b.ir.URL, User: b.ir.User, Password: b.ir.Password,
		DeployKernelURL: b.ir.FileURL("ipa", "vmlinuz"), DeployRamdiskURL: b.ir.FileURL("ipa", "initramfs"),
	}})
	h := &hostBed{bed: b, m3: m3, ns: ns}
	t.Cleanup(func() {
		if t.Failed() && h.host != nil {
			t.Logf("host %s: %+v\nIronic's node: %s", h.host.Name, h.host.Status, b.ir.NodeSummary(t.Context(), h.nodeName()))
		}
	})
	return h
}

// nodeName is the name the operator gives the host's Ironic node.
func (h *hostBed) nodeName() string { return h.ns + "~" + h.host.Name }

// secret creates a Secret of the host's namespace holding data.
func (h *hostBed) secret(name string, data map[string]string) *corev1.SecretReference {
	h.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}, StringData: data}
	if err := h.m3.Client.Create(h.t.Context(), s); err != nil {
		h.t.Fatal(err)
	}
	return &corev1.SecretReference{Namespace: h.ns, Name: name}
}

// createHost creates the VM's BareMetalHost: its BMC by Redfish virtual media, its boot MAC,
// inspection by the agent (the default inspection mode), automated cleaning of the disks'
// metadata, the root device, legacy boot (SeaBIOS: Ironic builds isolinux ISOs only here), and online from the
// start: with fast track the agent that cleaned stays up for the deploy, which an offline host,
// powered off by the operator between the two, would not allow.
func (h *hostBed) createHost(name string) {
	h.t.Helper()
	creds := h.secret(name+"-bmc", map[string]string{"username": h.srv.User, "password": h.srv.Password})
	h.host = &metal3api.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: metal3api.BareMetalHostSpec{
			BootMACAddress:        vmMAC,
			BootMode:              metal3api.Legacy,
			AutomatedCleaningMode: metal3api.CleaningModeMetadata,
			Online:                true,
			// The VM's disk is virtio (/dev/vda); without a hint the operator asks for /dev/sda
			// (its "unknown" hardware profile), which the agent does not find.
			RootDeviceHints: &metal3api.RootDeviceHints{DeviceName: "/dev/vda"},
			BMC: metal3api.BMCDetails{
				Address:         "redfish-virtualmedia+" + h.srv.URL + h.sysPath,
				CredentialsName: creds.Name,
			},
		},
	}
	if err := h.m3.Client.Create(h.t.Context(), h.host); err != nil {
		h.t.Fatal(err)
	}
}

// patchSpec merge-patches the host's spec with spec (JSON).
func (h *hostBed) patchSpec(spec string) {
	h.t.Helper()
	if err := h.m3.Client.Patch(h.t.Context(), h.host, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`))); err != nil {
		h.t.Fatalf("patch host %s's spec with %s: %v", h.host.Name, spec, err)
	}
}

// waitState polls the host until its provisioning state is state with no error. An error the
// operator reports fails the wait at once, but for forgiven (an ErrorMessage reported before the
// spec was fixed), which is waited out until it first clears. Progress is the host's state,
// Ironic's node's and the serial console growing: a slow boot under TCG passes, a stall fails
// after stall.
func (h *hostBed) waitState(state metal3api.ProvisioningState, forgiven string, stall, limit time.Duration) {
	h.t.Helper()
	h.poll("host "+h.host.Name+" to "+string(state), stall, limit, func(st metal3api.BareMetalHostStatus) (bool, string) {
		switch {
		case st.ErrorType == "":
			forgiven = ""
			return st.Provisioning.State == state, ""
		case forgiven != "" && st.ErrorMessage == forgiven:
			return false, ""
		}
		return false, fmt.Sprintf("the operator reports %s in state %s: %s", st.ErrorType, st.Provisioning.State, st.ErrorMessage)
	})
}

// waitError polls the host until the operator reports an error of type errType, and returns its
// message; an error of another type, or the host provisioned, fails the wait at once.
func (h *hostBed) waitError(errType metal3api.ErrorType, stall, limit time.Duration) string {
	h.t.Helper()
	h.poll("host "+h.host.Name+" to report a "+string(errType), stall, limit, func(st metal3api.BareMetalHostStatus) (bool, string) {
		if st.ErrorType == "" && st.Provisioning.State == metal3api.StateProvisioned {
			return false, "the host went provisioned without an error"
		}
		if st.ErrorType == "" || st.ErrorType == errType {
			return st.ErrorType == errType, ""
		}
		return false, fmt.Sprintf("the operator reports %s in state %s: %s", st.ErrorType, st.Provisioning.State, st.ErrorMessage)
	})
	return h.host.Status.ErrorMessage
}

// poll reads the host until done says it is done, failing at once with what done says is wrong,
// and logging each change of the host's and the node's states.
func (h *hostBed) poll(what string, stall, limit time.Duration, done func(metal3api.BareMetalHostStatus) (bool, string)) {
	t := h.t
	t.Helper()
	ctx := t.Context()
	start, last := time.Now(), ""
	testutil.WaitProgress(t, stall, limit, what, func() (bool, string) {
		if err := h.m3.Client.Get(ctx, client.ObjectKeyFromObject(h.host), h.host); err != nil {
			return false, err.Error()
		}
		st := h.host.Status
		now := fmt.Sprintf("host %s (error %q), powered on %v; node %s", st.Provisioning.State, st.ErrorType, st.PoweredOn, h.nodeState())
		if now != last {
			t.Logf("%6s  %s", time.Since(start).Round(time.Second), now)
			last = now
		}
		ok, wrong := done(st)
		if wrong != "" {
			t.Fatalf("host %s: waiting for %s, %s\nIronic's node: %s\noperator's log:\n%s",
				h.host.Name, what, wrong, h.ir.NodeSummary(ctx, h.nodeName()), h.m3.LogLines(h.host.Name, 15))
		}
		return ok, fmt.Sprintf("%s, serial console %d bytes", now, h.serialSize())
	})
}

// nodeState is the Ironic node's provision state, its target and its power, or why they are
// unknown (the operator has not enrolled it yet: 404).
func (h *hostBed) nodeState() string {
	n, err := h.node(h.nodeName())
	if err != nil {
		return err.Error()
	}
	return n.ProvisionState + "/" + n.TargetProvisionState + " " + n.PowerState
}

// hardwareDetails is what the operator stored of the VM's hardware.
func (h *hostBed) hardwareDetails() machineHardware {
	d := h.host.Status.HardwareDetails
	if d == nil {
		h.t.Fatalf("host %s is %s without hardwareDetails", h.host.Name, h.host.Status.Provisioning.State)
	}
	hw := machineHardware{MemoryMiB: d.RAMMebibytes, CPUs: d.CPU.Count, Disks: map[string]int64{}}
	for _, n := range d.NIC {
		hw.MACs = append(hw.MACs, strings.ToLower(n.MAC))
	}
	for _, s := range d.Storage {
		hw.Disks[s.Name] = int64(s.SizeBytes)
	}
	return hw
}

// inventory is what Ironic stored of the agent's inventory of the host's node, as hardware.
func (h *hostBed) inventory() machineHardware {
	h.t.Helper()
	var inv inventory
	h.ir.CallT(h.t, http.MethodGet, "/v1/nodes/"+h.nodeName()+"/inventory", nil, http.StatusOK, &inv)
	raw, _ := json.Marshal(inv)
	h.t.Logf("Ironic's inventory (what the test reads of it): %s", raw)
	hw := machineHardware{MemoryMiB: inv.Inventory.Memory.PhysicalMB, CPUs: inv.Inventory.CPU.Count, Disks: map[string]int64{}}
	for _, i := range inv.Inventory.Interfaces {
		hw.MACs = append(hw.MACs, strings.ToLower(i.MACAddress))
	}
	for _, d := range inv.Inventory.Disks {
		hw.Disks[d.Name] = d.Size
	}
	return hw
}

// provisionImage sets the host's image (the OS image of the run's HTTP server, qcow2, with
// checksum as its sha256), its user data (a cloud-config writing marker to a file) and its meta
// data (the test's SSH key, which Ironic's config drive carries as public_keys).
func (h *hostBed) provisionImage(checksum, marker, key string) {
	h.t.Helper()
	user := h.secret(h.host.Name+"-user-data", map[string]string{
		"userData": "#cloud-config\nwrite_files:\n- path: /etc/edgefleet-user-data\n  content: " + marker + "\n",
	})
	meta := h.secret(h.host.Name+"-meta-data", map[string]string{
		"metaData": "public_keys:\n  \"0\": " + key + "\n",
	})
	spec, err := json.Marshal(map[string]any{"image": h.image(checksum), "userData": user, "metaData": meta})
	if err != nil {
		h.t.Fatal(err)
	}
	h.patchSpec(string(spec))
}

// image is the OS image of the run's HTTP server, qcow2, with checksum as its sha256.
func (h *hostBed) image(checksum string) metal3api.Image {
	return metal3api.Image{URL: h.ir.FileURL("osimage", "disk.qcow2"), Checksum: checksum, ChecksumType: metal3api.SHA256, DiskFormat: new("qcow2")}
}

// boots are SeaBIOS's boots so far, from its log: "Booting from DVD/CD" or "Booting from Hard Disk".
func (h *hostBed) boots() []string {
	return regexp.MustCompile(`Booting from (DVD/CD|Hard Disk)`).FindAllString(string(readFile(h.vm.FirmwareLog)), -1)
}

// TestMetal3InspectsAndProvisions: baremetal-operator, against real Ironic, takes one qemu VM
// behind a Redfish virtual-media BMC through its whole life, in order:
//  1. registering and inspection by the real agent: the host's hardwareDetails and Ironic's
//     inventory are the VM's, the BMC took virtual media, the drive is empty after;
//  2. an image whose sha256 is not the one the host names: automated metadata cleaning, then
//     the agent refuses the image, the host reports a provisioning error naming the checksum,
//     nothing was written to the disk and nothing booted from it;
//  3. the checksum fixed: the operator deprovisions (cleans) and provisions again; the VM boots
//     the image with the host's user and meta data; the test logs in with its key, the host key
//     pinned from the console;
//  4. deprovisioning: cleaning wipes the disk's boot sector, and the host is available again;
//     no password of the BMC or Ironic is in the VM's logs.
func TestMetal3InspectsAndProvisions(t *testing.T) {
	start := time.Now()
	if os.Geteuid() != 0 {
		t.Skip("ipa: needs root (Ironic in private namespaces, chroot)")
	}
	img := osImageFiles(t)
	h := newHostBed(t, img)
	t.Logf("Ironic, control plane and operator up after %s", time.Since(start).Round(time.Second))

	// 1. Registering, inspecting (the agent's boot under TCG: minutes), preparing, available: the
	// operator's available is Ironic's manageable; automated cleaning comes with provisioning.
	phase := time.Now()
	h.createHost("vm-0")
	h.waitState(metal3api.StateAvailable, "", 10*time.Minute, 25*time.Minute)
	inspected := time.Since(phase)
	t.Logf("created → available (registered, inspected) in %s", inspected.Round(time.Second))
	hw := h.hardwareDetails()
	t.Logf("hardwareDetails (what the test reads of them): %+v", hw)
	hw.check(t, "the host's hardwareDetails")
	h.inventory().check(t, "Ironic's inventory")
	inserts := 0
	for _, r := range h.srv.Requests() {
		if strings.HasSuffix(r.Path, "/VirtualMedia.InsertMedia") && r.Status == http.StatusNoContent {
			inserts++
		}
	}
	if inserts == 0 {
		t.Errorf("the BMC never took virtual media; its requests:\n%s", h.srv.RequestLog())
	}
	// Ironic ejects the agent's ISO at the end of inspection (and deletes it).
	if m := h.vm.Media(); m != "" {
		t.Errorf("after inspection the VM's drive still holds %s", m)
	}

	// 2. A checksum that is not the image's: cleaning with a booted agent (not the one that
	// inspected: Ironic ejected its CD at the end of inspection, before the agent's first
	// heartbeat made fast track possible), then the deploy on that agent (fast track), which
	// downloads the image once (agentKernelParams) and refuses it.
	phase = time.Now()
	signer := loginKey(t)
	marker := fmt.Sprintf("edgefleet-user-data-%d", time.Now().UnixNano())
	wrong := sha256.Sum256([]byte("not the image " + img.sha256))
	h.provisionImage(hex.EncodeToString(wrong[:]), marker, authorizedKey(signer))
	refusal := h.waitError(metal3api.ProvisioningError, 10*time.Minute, 25*time.Minute)
	refused := time.Since(phase)
	t.Logf("available → provisioning error in %s: %s", refused.Round(time.Second), refusal)
	if !strings.Contains(strings.ToLower(refusal), "checksum") {
		t.Errorf("the provisioning error does not name the checksum: %q", refusal)
	}
	if head, err := readHead(h.vm.Disk, 512); err != nil || head[510] == 0x55 && head[511] == 0xaa {
		t.Errorf("the disk has a boot sector (MBR signature 0x55AA) after a refused image (%v)", err)
	}
	if slices.Contains(h.boots(), "Booting from Hard Disk") {
		t.Errorf("SeaBIOS booted the disk after a refused image: %q", h.boots())
	}
	if bytes.Contains(readFile(h.vm.SerialLog), []byte("BEGIN SSH HOST KEY KEYS")) {
		t.Errorf("the image's OS ran (its host keys are on the console) after a refused image")
	}

	// 3. The checksum fixed: the operator deprovisions the failed host (cleaning, with a freshly
	// booted agent: Ironic powers a node off when its deploy fails), and provisions it again on
	// that agent (fast track: cleaning, the deploy), active, and the VM rebooted into the image.
	fixed := time.Now()
	serialAtFix := h.serialSize()
	h.patchSpec(fmt.Sprintf(`{"image":{"checksum":%q}}`, img.sha256))
	h.waitState(metal3api.StateProvisioned, refusal, 10*time.Minute, 30*time.Minute)
	provisionedAt := time.Now()
	provisioned := provisionedAt.Sub(fixed)
	t.Logf("checksum fixed → provisioned (deprovisioned, cleaned, deployed) in %s", provisioned.Round(time.Second))
	// The image's boot sector, which deprovisioning's cleaning must wipe below.
	if head, err := readHead(h.vm.Disk, 512); err != nil || head[510] != 0x55 || head[511] != 0xaa {
		t.Errorf("the provisioned disk has no MBR signature 0x55AA (%v)", err)
	}
	if m := h.vm.Media(); m != "" {
		t.Errorf("the provisioned VM's drive still holds %s", m)
	}

	hostKey := h.waitHostKey()
	keyed := time.Now()
	client := dialSSH(t, h.sshPort, signer, hostKey, 3*time.Minute)
	defer client.Close()
	loggedIn := time.Since(provisionedAt)
	t.Logf("provisioned → logged in (pinned %s %s) in %s", hostKey.Type(), ssh.FingerprintSHA256(hostKey), loggedIn.Round(time.Second))
	// The hostname is the operator's default meta data (local-hostname: the host's name).
	if got := strings.TrimSpace(runSSH(t, client, "hostname")); got != h.host.Name {
		t.Errorf("hostname = %q, want the host's name %q (the operator's local-hostname)", got, h.host.Name)
	}
	if got := strings.TrimSpace(runSSH(t, client, "cat /etc/edgefleet-user-data")); got != marker {
		t.Errorf("/etc/edgefleet-user-data = %q, want the user data's %q", got, marker)
	}
	if got := strings.TrimSpace(runSSH(t, client, "findmnt -no SOURCE /")); got != "/dev/vda1" {
		t.Errorf("root is %q, want the disk's /dev/vda1", got)
	}
	// cloud-init finished its first boot without an error in any module.
	if got := runSSH(t, client, "cloud-init status --wait"); !strings.Contains(got, "status: done") {
		t.Errorf("cloud-init status: %s", got)
	}
	t.Logf("the guest: %s", strings.TrimSpace(runSSH(t, client, "uname -r; cat /proc/cmdline; lsblk -rno NAME,SIZE,LABEL,MOUNTPOINT /dev/vda")))
	client.Close()
	// The good deploy's phases, from the agent's log on the serial console after the fix (its
	// lines carry the guest's clock, which is the host's).
	agent := agentTimes(readFile(h.vm.SerialLog)[serialAtFix:])
	t.Logf("deploy phases: fix → the agent's first log line %s; → prepare_image %s; → image written (download, sha256, qemu-img convert: %s s by the agent's count) %s; → provisioned %s; → host keys on the console %s",
		since(fixed, agent.first), since(agent.first, agent.prepare), agent.writeSeconds, since(agent.prepare, agent.written),
		since(agent.written, provisionedAt), since(provisionedAt, keyed))

	// 4. Deprovisioning powers the OS off and cleans the disk's metadata with a freshly booted agent.
	phase = time.Now()
	h.patchSpec(`{"image":null,"userData":null,"metaData":null}`)
	h.waitState(metal3api.StateAvailable, "", 10*time.Minute, 25*time.Minute)
	deprovisioned := time.Since(phase)
	head, err := readHead(h.vm.Disk, 512)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(head, make([]byte, 512)) {
		t.Errorf("the disk's first sector (the image's boot sector) is not zero after deprovisioning's metadata cleaning: % x", head[440:512])
	}
	// SeaBIOS's boots: the agent for inspection; the agent for cleaning, which deployed the
	// refused image (fast track, no boot of its own); the agent for the failed host's cleaning,
	// which cleaned and deployed again; the deployed disk; the agent for deprovisioning's cleaning.
	if want := []string{"Booting from DVD/CD", "Booting from DVD/CD", "Booting from DVD/CD", "Booting from Hard Disk", "Booting from DVD/CD"}; !slices.Equal(h.boots(), want) {
		t.Errorf("SeaBIOS's boots were %q, want %q", h.boots(), want)
	}
	// The VM's logs are on disk (/tmp): the BMC's and Ironic's passwords must not be there.
	// (Its disk is the guest's own; the agent's ISOs were deleted at their ejections, checked above.)
	logs := t.TempDir()
	for _, f := range []string{h.vm.SerialLog, h.vm.FirmwareLog, h.vm.Log} {
		if raw, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(logs, filepath.Base(f)), raw, 0o600)
		}
	}
	leaks, scanned, err := testutil.FindSecrets([]string{logs}, map[string][]byte{
		"the BMC's password": []byte(h.srv.Password), "Ironic's password": []byte(h.ir.Password),
	})
	if err != nil || len(leaks) > 0 || scanned != 3 {
		t.Errorf("secrets in the VM's logs (%d of 3 scanned, %v): %v", scanned, err, leaks)
	}
	t.Logf("phases: created → available %s; → refused %s; fixed → provisioned %s; → logged in %s; deprovisioned → available %s; whole test %s",
		inspected.Round(time.Second), refused.Round(time.Second), provisioned.Round(time.Second), loggedIn.Round(time.Second), deprovisioned.Round(time.Second), time.Since(start).Round(time.Second))
}
