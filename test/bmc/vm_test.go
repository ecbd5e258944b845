package bmc_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/bmc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// newVM makes a small VM powered off at the end of the test.
func newVM(t *testing.T, cfg bmc.Config) *bmc.VM {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.DiskSize == 0 {
		cfg.DiskSize = 32 << 20
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 128
	}
	vm, err := bmc.NewVM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := vm.Close(); err != nil {
			t.Errorf("power off %s: %v", cfg.Name, err)
		}
		if t.Failed() {
			for _, f := range []string{vm.Log, vm.FirmwareLog} {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, tail(b, 40))
			}
		}
	})
	return vm
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// waitBootAttempts waits until SeaBIOS's log shows at least n boot attempts since the last
// start or reset, and returns them.
func waitBootAttempts(t *testing.T, vm *bmc.VM, n int) []string {
	t.Helper()
	var got []string
	testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d boot attempts in SeaBIOS's log %s", n, vm.FirmwareLog), func() (bool, string) {
		var err error
		got, err = vm.BootAttempts()
		return err == nil && len(got) >= n, fmt.Sprintf("%q %v", got, err)
	})
	return got
}

// gone reports whether process pid has ended (and been reaped, or is a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

// TestVM powers a SeaBIOS VM on and off through its own API and checks what qemu and the
// firmware say: the boot order the firmware followed, the boot indexes qemu holds for later
// boots, and a disk image that outlives power cycles and VMs.
func TestVM(t *testing.T) {
	dir := t.TempDir()
	vm := newVM(t, bmc.Config{Name: "vm-0", Dir: dir, MAC: "52:54:00:12:34:56"})
	st, err := os.Stat(vm.Disk)
	if err != nil || st.Size() != 32<<20 {
		t.Fatalf("disk image %s: %v, size %d; want 32 MiB", vm.Disk, err, sizeOf(st))
	}
	// A mark on the disk that a recreated image would lose.
	mark := []byte("edgefleet disk mark " + randomWord(t))
	writeAt(t, vm.Disk, mark, 1<<20)

	start := time.Now()
	if err := vm.PowerOn(bmc.Boot{First: bmc.DevicePxe, Later: bmc.DeviceNone}); err != nil {
		t.Fatal(err)
	}
	t.Logf("qemu answers QMP %s after power-on", time.Since(start).Round(time.Millisecond))
	pid := vm.PID()
	if status, err := vm.Status(); err != nil || status != "running" {
		t.Fatalf("qemu status %q, %v; want running", status, err)
	}
	if nic := deviceArg(vm.CommandLine(), "virtio-net-pci"); !strings.Contains(nic, "mac=52:54:00:12:34:56") || !strings.HasSuffix(nic, "bootindex=1") {
		t.Errorf("qemu's NIC %q: want the MAC and boot index 1", nic)
	}
	// The override held for this boot only: qemu already holds the default order for the next.
	wantIndexes(t, vm, map[bmc.Device]int{bmc.DeviceHdd: 1, bmc.DeviceCd: 2, bmc.DevicePxe: 3})
	attempts := waitBootAttempts(t, vm, 2)
	if want := []string{"Booting from ROM...", "Booting from Hard Disk..."}; !slices.Equal(attempts[:2], want) {
		t.Errorf("SeaBIOS tried %q, want the NIC's ROM (iPXE) first, then the disk: %q", attempts, want)
	}
	t.Logf("network, then disk, tried %s after power-on", time.Since(start).Round(time.Millisecond))

	// A reset boots in the order given to it, in the same qemu.
	if err := vm.Reset(bmc.Boot{First: bmc.DeviceCd, Later: bmc.DeviceCd}); err != nil {
		t.Fatal(err)
	}
	if got := vm.PID(); got != pid {
		t.Errorf("reset: qemu %d, want the same process %d", got, pid)
	}
	wantIndexes(t, vm, map[bmc.Device]int{bmc.DeviceCd: 1, bmc.DeviceHdd: 2, bmc.DevicePxe: 3})
	if attempts := waitBootAttempts(t, vm, 1); attempts[0] != "Booting from DVD/CD..." {
		t.Errorf("after the reset SeaBIOS tried %q first, want the CD-ROM", attempts)
	}

	// SeaBIOS ignores the ACPI power button: the machine stays on.
	if err := vm.PressPowerButton(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !vm.PoweredOn() {
		t.Errorf("the firmware powered off on an ACPI power-button press")
	}

	if err := vm.PowerOff(); err != nil {
		t.Fatal(err)
	}
	if vm.PoweredOn() || vm.PID() != 0 || !gone(pid) {
		t.Errorf("after power-off: powered on %v, PID %d, qemu %d gone %v", vm.PoweredOn(), vm.PID(), pid, gone(pid))
	}
	if _, err := vm.Status(); err == nil {
		t.Errorf("QMP answers after power-off")
	}

	// Power on again, disk first: the disk is the same image, mark and all.
	if err := vm.PowerOn(bmc.Boot{First: bmc.DeviceHdd, Later: bmc.DeviceHdd}); err != nil {
		t.Fatal(err)
	}
	if attempts := waitBootAttempts(t, vm, 1); attempts[0] != "Booting from Hard Disk..." {
		t.Errorf("SeaBIOS tried %q first, want the disk", attempts)
	}
	if err := vm.PowerOff(); err != nil {
		t.Fatal(err)
	}
	again, err := bmc.NewVM(bmc.Config{Name: "vm-0", Dir: dir, DiskSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	readMark(t, again.Disk, mark, 1<<20)
	if st, err := os.Stat(again.Disk); err != nil || st.Size() != 32<<20 {
		t.Errorf("a new VM on the same disk image changed it: %v (size %d, want %d)", err, sizeOf(st), 32<<20)
	}
}

// TestVMTap runs a VM on a tap device in a network namespace made for the test, and sees the
// VM's network boot (iPXE's DHCP) arrive on that tap.
func TestVMTap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bmc: a network namespace and a tap device need root")
	}
	ns := "bmc-test-" + randomWord(t)
	ip := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ip("netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	ip("-n", ns, "tuntap", "add", "dev", "tap0", "mode", "tap")
	ip("-n", ns, "link", "set", "tap0", "up")
	netns := filepath.Join("/run/netns", ns)

	vm := newVM(t, bmc.Config{Name: "vm-tap", MAC: "52:54:00:65:43:21", Network: bmc.Network{Tap: "tap0", Netns: netns}})
	if err := vm.PowerOn(bmc.Boot{First: bmc.DevicePxe, Later: bmc.DeviceNone}); err != nil {
		t.Fatal(err)
	}
	var want, got syscall.Stat_t
	if err := syscall.Stat(netns, &want); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", vm.PID()), &got); err != nil {
		t.Fatal(err)
	}
	if got.Ino != want.Ino {
		t.Errorf("qemu %d runs in network namespace %d, want %s (%d)", vm.PID(), got.Ino, netns, want.Ino)
	}
	testutil.WaitFor(t, 3*time.Minute, "packets from the VM (iPXE's DHCP) on tap0 in "+ns, func() (bool, string) {
		var links []struct {
			Flags []string `json:"flags"`
			Stats struct {
				RX struct {
					Packets int `json:"packets"`
				} `json:"rx"`
			} `json:"stats64"`
		}
		out := ip("-n", ns, "-j", "-s", "link", "show", "tap0")
		if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return slices.Contains(links[0].Flags, "LOWER_UP") && links[0].Stats.RX.Packets > 0, out
	})
}

// TestVMUEFI boots OVMF: the mode of a Boot picks the firmware, and a reset to another mode
// is a new qemu.
func TestVMUEFI(t *testing.T) {
	vm := newVM(t, bmc.Config{Name: "vm-uefi", MemoryMiB: 256})
	if err := vm.PowerOn(bmc.Boot{First: bmc.DevicePxe, Later: bmc.DevicePxe, Mode: bmc.ModeUEFI}); err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(vm.CommandLine(), " "); !strings.Contains(cmd, "if=pflash") || !strings.Contains(cmd, vm.UEFIVars) {
		t.Errorf("a UEFI power-on without OVMF: %s", cmd)
	}
	// OVMF writes its boot manager's attempts to the serial console; iPXE (the NIC's EFI
	// driver) then announces itself there.
	testutil.WaitFor(t, 4*time.Minute, "iPXE's banner under OVMF in "+vm.SerialLog, func() (bool, string) {
		b, _ := os.ReadFile(vm.SerialLog)
		return bytes.Contains(b, []byte("iPXE")), tail(b, 3)
	})
	pid := vm.PID()
	if err := vm.Reset(bmc.Boot{First: bmc.DeviceHdd, Later: bmc.DeviceHdd, Mode: bmc.ModeLegacy}); err != nil {
		t.Fatal(err)
	}
	if vm.PID() == pid || !gone(pid) {
		t.Errorf("a reset from UEFI to Legacy kept qemu %d (now %d)", pid, vm.PID())
	}
	if cmd := strings.Join(vm.CommandLine(), " "); strings.Contains(cmd, "pflash") {
		t.Errorf("a Legacy boot with OVMF: %s", cmd)
	}
	if st, err := os.Stat(vm.UEFIVars); err != nil || st.Size() == 0 {
		t.Errorf("UEFI variable store %s: %v", vm.UEFIVars, err)
	}
}

func wantIndexes(t *testing.T, vm *bmc.VM, want map[bmc.Device]int) {
	t.Helper()
	got, err := vm.BootIndexes()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("qemu's boot indexes %v, want %v", got, want)
	}
}

// deviceArg is the -device argument of kind in a command line.
func deviceArg(cmdline []string, kind string) string {
	for i, a := range cmdline {
		if a == "-device" && i+1 < len(cmdline) && strings.HasPrefix(cmdline[i+1], kind+",") {
			return cmdline[i+1]
		}
	}
	return ""
}

func randomWord(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readMark(t *testing.T, path string, want []byte, off int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("disk %s at %d holds %q, want the mark %q: the image did not persist", path, off, got, want)
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// TestVMMedia: virtual media goes into a running VM's drive at once and out again, as qemu
// says (QMP query-block), and an off VM's medium is in the drive from its power-on.
func TestVMMedia(t *testing.T) {
	vm := newVM(t, bmc.Config{Name: "vm-media"})
	iso := filepath.Join(t.TempDir(), "media.iso")
	if err := os.WriteFile(iso, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := vm.PowerOn(bmc.Boot{First: bmc.DeviceHdd, Later: bmc.DeviceHdd}); err != nil {
		t.Fatal(err)
	}
	if got, err := vm.DriveMedia(); err != nil || got != "" {
		t.Fatalf("a new VM's drive holds %q (%v), want it empty", got, err)
	}
	if err := vm.InsertMedia(iso); err != nil {
		t.Fatal(err)
	}
	if got, err := vm.DriveMedia(); err != nil || got != iso || vm.Media() != iso {
		t.Errorf("after InsertMedia qemu's drive holds %q (%v), the VM says %q; want %s", got, err, vm.Media(), iso)
	}
	if err := vm.EjectMedia(); err != nil {
		t.Fatal(err)
	}
	if got, err := vm.DriveMedia(); err != nil || got != "" || vm.Media() != "" {
		t.Errorf("after EjectMedia qemu's drive holds %q (%v), the VM says %q; want it empty", got, err, vm.Media())
	}
	if err := vm.InsertMedia(filepath.Join(t.TempDir(), "missing.iso")); err == nil {
		t.Errorf("InsertMedia of a missing file succeeded")
	}
	// Inserted while off: the drive holds it from the power-on.
	if err := vm.PowerOff(); err != nil {
		t.Fatal(err)
	}
	if err := vm.InsertMedia(iso); err != nil {
		t.Fatal(err)
	}
	if err := vm.PowerOn(bmc.Boot{First: bmc.DeviceHdd, Later: bmc.DeviceHdd}); err != nil {
		t.Fatal(err)
	}
	if got, err := vm.DriveMedia(); err != nil || got != iso {
		t.Errorf("media inserted while off: after power-on qemu's drive holds %q (%v), want %s", got, err, iso)
	}
}
