package ipa_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
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

// newHostBed starts the bed readied for the operator (bedOptions.Operator), a control plane and
// the operator against the bed's Ironic, with the agent's kernel and ramdisk of the run's HTTP
// server.
func newHostBed(t *testing.T, img osImage) *hostBed {
	t.Helper()
	b := newBedWith(t, bedOptions{OSImage: img.dir, SSH: true, Operator: true})
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

// waitState polls the host until its provisioning state is state with no error, and fails at
// once when the operator reports an error. Progress is the host's state, Ironic's node's and the
// serial console growing: a slow boot under TCG passes, a stall fails after stall.
func (h *hostBed) waitState(state metal3api.ProvisioningState, stall, limit time.Duration) {
	t := h.t
	t.Helper()
	ctx := t.Context()
	start, last := time.Now(), ""
	testutil.WaitProgress(t, stall, limit, "host "+h.host.Name+" to "+string(state), func() (bool, string) {
		if err := h.m3.Client.Get(ctx, client.ObjectKeyFromObject(h.host), h.host); err != nil {
			return false, err.Error()
		}
		st := h.host.Status
		if st.ErrorType != "" {
			t.Fatalf("host %s: waiting for %s, the operator reports %s in state %s: %s\nIronic's node: %s\noperator's log:\n%s",
				h.host.Name, state, st.ErrorType, st.Provisioning.State, st.ErrorMessage, h.ir.NodeSummary(ctx, h.nodeName()), h.m3.LogLines(h.host.Name, 15))
		}
		now := fmt.Sprintf("host %s, powered on %v; node %s", st.Provisioning.State, st.PoweredOn, h.nodeState())
		if now != last {
			t.Logf("%6s  %s", time.Since(start).Round(time.Second), now)
			last = now
		}
		return st.Provisioning.State == state, fmt.Sprintf("%s, serial console %d bytes", now, h.serialSize())
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

// provisionImage sets the host's image (the OS image of the run's HTTP server, qcow2 with its
// sha256), its user data (a cloud-config writing marker to a file) and its meta data (the
// test's SSH key, which Ironic's config drive carries as public_keys, as in TestDeploy).
func (h *hostBed) provisionImage(img osImage, marker string, key string) {
	h.t.Helper()
	user := h.secret(h.host.Name+"-user-data", map[string]string{
		"userData": "#cloud-config\nwrite_files:\n- path: /etc/edgefleet-user-data\n  content: " + marker + "\n",
	})
	meta := h.secret(h.host.Name+"-meta-data", map[string]string{
		"metaData": "public_keys:\n  \"0\": " + key + "\n",
	})
	spec, err := json.Marshal(map[string]any{
		"image": metal3api.Image{URL: h.ir.FileURL("osimage", "disk.qcow2"), Checksum: img.sha256, ChecksumType: metal3api.SHA256,
			DiskFormat: new("qcow2")},
		"userData": user,
		"metaData": meta,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.patchSpec(string(spec))
}

// TestMetal3InspectsAndProvisions: baremetal-operator, against real Ironic, takes a qemu VM
// behind a Redfish virtual-media BMC through registering, inspection by the real agent (the
// host's hardwareDetails are the VM's), automated metadata cleaning, a deploy of the real OS
// image with the host's user and meta data (the test logs in with its key, the host key pinned
// from the console), and deprovisioning, whose cleaning wipes the disk's boot sector.
func TestMetal3InspectsAndProvisions(t *testing.T) {
	start := time.Now()
	if os.Geteuid() != 0 {
		t.Skip("ipa: needs root (Ironic in private namespaces, chroot)")
	}
	img := osImageFiles(t)
	h := newHostBed(t, img)
	t.Logf("Ironic, control plane and operator up after %s", time.Since(start).Round(time.Second))

	phase := time.Now()
	h.createHost("vm-0")
	// Registering, inspecting (the agent's boot under TCG: minutes), preparing, available: the
	// operator's available is Ironic's manageable; automated cleaning comes with provisioning.
	h.waitState(metal3api.StateAvailable, 10*time.Minute, 25*time.Minute)
	inspected := time.Since(phase)
	t.Logf("created → available (registered, inspected) in %s", inspected.Round(time.Second))
	hw := h.hardwareDetails()
	t.Logf("hardwareDetails (what the test reads of them): %+v", hw)
	hw.check(t, "the host's hardwareDetails")

	phase = time.Now()
	signer := loginKey(t)
	marker := fmt.Sprintf("edgefleet-user-data-%d", time.Now().UnixNano())
	h.provisionImage(img, marker, authorizedKey(signer))
	// Ironic's provide: automated cleaning (erase_devices_metadata) with a booted agent — not the
	// one that inspected: Ironic ejected its CD at the end of inspection, before the agent's
	// first heartbeat made fast track possible — then the deploy on that same agent (fast track),
	// active, and the VM rebooted into the image.
	h.waitState(metal3api.StateProvisioned, 10*time.Minute, 25*time.Minute)
	provisioned := time.Since(phase)
	t.Logf("available → provisioned (cleaned, deployed) in %s", provisioned.Round(time.Second))
	// The image's boot sector, which deprovisioning's cleaning must wipe below.
	if head, err := readHead(h.vm.Disk, 512); err != nil || head[510] != 0x55 || head[511] != 0xaa {
		t.Errorf("the provisioned disk has no MBR signature 0x55AA (%v)", err)
	}

	phase = time.Now()
	hostKey := h.waitHostKey()
	client := dialSSH(t, h.sshPort, signer, hostKey, 3*time.Minute)
	defer client.Close()
	loggedIn := time.Since(phase)
	t.Logf("provisioned → logged in (pinned %s) in %s", hostKey.Type(), loggedIn.Round(time.Second))
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
	client.Close()

	phase = time.Now()
	h.patchSpec(`{"image":null,"userData":null,"metaData":null}`)
	// Deprovisioning powers the OS off and cleans the disk's metadata with a freshly booted agent.
	h.waitState(metal3api.StateAvailable, 10*time.Minute, 25*time.Minute)
	deprovisioned := time.Since(phase)
	head, err := readHead(h.vm.Disk, 512)
	if err != nil {
		t.Fatal(err)
	}
	if head[510] == 0x55 && head[511] == 0xaa {
		t.Errorf("the disk still has its boot sector (MBR signature 0x55AA) after deprovisioning's metadata cleaning")
	}
	// SeaBIOS's boots: the agent for inspection, the agent for cleaning (which then deployed:
	// fast track, no boot of its own), the deployed disk, the agent for deprovisioning's cleaning.
	boots := regexp.MustCompile(`Booting from (DVD/CD|Hard Disk)`).FindAllString(string(readFile(h.vm.FirmwareLog)), -1)
	if want := []string{"Booting from DVD/CD", "Booting from DVD/CD", "Booting from Hard Disk", "Booting from DVD/CD"}; !slices.Equal(boots, want) {
		t.Errorf("SeaBIOS's boots were %q, want %q", boots, want)
	}
	t.Logf("phases: created → available %s; → provisioned %s; → logged in %s; deprovisioned → available %s; whole test %s",
		inspected.Round(time.Second), provisioned.Round(time.Second), loggedIn.Round(time.Second), deprovisioned.Round(time.Second), time.Since(start).Round(time.Second))
}
