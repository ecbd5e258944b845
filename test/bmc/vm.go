package bmc

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgefleet/edgefleet/test/internal/proc"
)

// ErrNoQEMU means qemu-system-x86_64 is not installed.
var ErrNoQEMU = errors.New("bmc: qemu-system-x86_64 not found: apt-get install qemu-system-x86 ipxe-qemu (ovmf for UEFI)")

// Config describes a VM.
type Config struct {
	// Name names the VM in qemu and in errors; "vm" when empty.
	Name string
	// Dir holds the VM's disk image (unless Disk says otherwise), logs, QMP socket and UEFI
	// variables. Required; its path must be short enough for a unix socket (~90 bytes).
	Dir string
	// Disk is the disk image (raw); Dir/disk.raw when empty. It is created, sparse, of DiskSize
	// bytes when missing, and kept as it is when present: it persists across power cycles and
	// across VMs given the same path.
	Disk string
	// DiskSize is the size of a disk image the VM creates; required when Disk does not exist.
	DiskSize int64
	// MemoryMiB is the guest's memory; 256 when zero.
	MemoryMiB int
	// CPUs is the number of virtual CPUs; 1 when zero.
	CPUs int
	// MAC is the NIC's MAC address; a random one of qemu's prefix 52:54:00 when empty.
	MAC string
	// UUID is the machine's SMBIOS UUID (the System's UUID in Redfish); random when empty.
	UUID string
	// Network is the NIC's backend; qemu's user-mode network when zero.
	Network Network
	// ISO is the medium of the CD-ROM drive at the first power-on; the drive is empty when it
	// is empty. InsertMedia and EjectMedia change it (the BMC's virtual media).
	ISO string
	// QEMU is qemu-system-x86_64; /usr/bin/qemu-system-x86_64 when empty.
	QEMU string
	// OVMFCode and OVMFVars are the UEFI firmware and its variable store template (Debian's
	// ovmf, 4 MiB build, when empty). UEFI boots use a copy of the template in Dir that persists.
	OVMFCode, OVMFVars string
	// StartTimeout bounds how long a power-on waits for qemu's QMP socket; 60 s when zero
	// (qemu is up in well under a second on an idle machine).
	StartTimeout time.Duration
}

// Network is a NIC's backend: qemu's user-mode network (slirp: the guest is 10.0.2.15 and
// reaches the host's 127.0.0.1 at 10.0.2.2), or a tap device.
type Network struct {
	// Tap is the name of a tap device the caller made; qemu attaches to it, in Netns when set.
	Tap string
	// Netns is a network namespace's file (/run/netns/NAME, /proc/PID/ns/net): qemu runs in it
	// (nsenter --net), so that a tap device in that namespace is found.
	Netns string
	// TFTPRoot and BootFile, user-mode only, are slirp's TFTP directory and the boot file its
	// DHCP server offers (a TFTP name or, for iPXE, a URL).
	TFTPRoot, BootFile string
	// HostForwards, user-mode only, forward TCP ports of the host's loopback to the guest:
	// each maps 127.0.0.1:Host to the guest's port Guest (an agent's API the host calls).
	HostForwards []HostForward
}

// HostForward forwards the host's 127.0.0.1:Host to the guest's port Guest (user-mode network).
type HostForward struct {
	Host, Guest int
}

// MachineInfo is what a BMC reports about its machine's hardware.
type MachineInfo struct {
	Name, UUID, MAC string
	CPUs, MemoryMiB int
}

// VM is a qemu-system-x86_64 machine under TCG (no KVM needed): a qemu process while it is
// powered on, nothing while it is off. Its disk image, NVRAM (UEFI variables) and logs live in
// files that outlast its power cycles. It is safe for concurrent use.
type VM struct {
	cfg Config
	// Disk is the disk image; SerialLog the serial console's output (all power-ons, appended);
	// FirmwareLog SeaBIOS's log (I/O port 0x402; appended); Log qemu's own output; QMPSocket
	// the QMP socket of the running qemu; UEFIVars the UEFI variable store.
	Disk, SerialLog, FirmwareLog, Log, QMPSocket, UEFIVars string

	mu   sync.Mutex
	proc *proc.Process // nil while powered off
	mode Mode          // the running qemu's firmware
	// bootLogFrom is the size of FirmwareLog when the VM last started or reset.
	bootLogFrom int64
}

// NewVM makes a VM, powered off, creating its disk image when missing.
func NewVM(cfg Config) (*VM, error) {
	if cfg.Dir == "" {
		return nil, errors.New("bmc: VM config: Dir is required")
	}
	if cfg.Name == "" {
		cfg.Name = "vm"
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 256
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 1
	}
	if cfg.QEMU == "" {
		cfg.QEMU = "/usr/bin/qemu-system-x86_64"
	}
	if cfg.OVMFCode == "" {
		cfg.OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	}
	if cfg.OVMFVars == "" {
		cfg.OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = time.Minute
	}
	var err error
	if cfg.MAC == "" {
		if cfg.MAC, err = randomMAC(); err != nil {
			return nil, err
		}
	} else if _, err := net.ParseMAC(cfg.MAC); err != nil {
		return nil, fmt.Errorf("bmc: VM %s: MAC: %w", cfg.Name, err)
	}
	if cfg.UUID == "" {
		if cfg.UUID, err = randomUUID(); err != nil {
			return nil, err
		}
	}
	if cfg.Network.Tap != "" && (cfg.Network.TFTPRoot != "" || cfg.Network.BootFile != "" || len(cfg.Network.HostForwards) > 0) {
		return nil, fmt.Errorf("bmc: VM %s: Network: TFTPRoot, BootFile and HostForwards are for user-mode networking, not tap %s", cfg.Name, cfg.Network.Tap)
	}
	for _, f := range cfg.Network.HostForwards {
		if f.Host <= 0 || f.Host > 65535 || f.Guest <= 0 || f.Guest > 65535 {
			return nil, fmt.Errorf("bmc: VM %s: Network: HostForward %d -> %d: ports must be 1-65535", cfg.Name, f.Host, f.Guest)
		}
	}
	if _, err := os.Stat(cfg.QEMU); err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoQEMU, cfg.QEMU)
	}
	v := &VM{
		cfg:         cfg,
		Disk:        cfg.Disk,
		SerialLog:   filepath.Join(cfg.Dir, "serial.log"),
		FirmwareLog: filepath.Join(cfg.Dir, "firmware.log"),
		Log:         filepath.Join(cfg.Dir, "qemu.log"),
		QMPSocket:   filepath.Join(cfg.Dir, "qmp.sock"),
		UEFIVars:    filepath.Join(cfg.Dir, "uefi-vars.fd"),
	}
	if v.Disk == "" {
		v.Disk = filepath.Join(cfg.Dir, "disk.raw")
	}
	if len(v.QMPSocket) > 100 {
		return nil, fmt.Errorf("bmc: VM %s: QMP socket path %s is too long for a unix socket: use a shorter Dir", cfg.Name, v.QMPSocket)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("bmc: VM %s: %w", cfg.Name, err)
	}
	if err := createDisk(v.Disk, cfg.DiskSize); err != nil {
		return nil, fmt.Errorf("bmc: VM %s: %w", cfg.Name, err)
	}
	return v, nil
}

// Info reports the VM's hardware.
func (v *VM) Info() MachineInfo {
	return MachineInfo{Name: v.cfg.Name, UUID: v.cfg.UUID, MAC: v.cfg.MAC, CPUs: v.cfg.CPUs, MemoryMiB: v.cfg.MemoryMiB}
}

// PoweredOn reports whether qemu runs.
func (v *VM) PoweredOn() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.runningLocked()
}

func (v *VM) runningLocked() bool {
	if v.proc == nil {
		return false
	}
	select {
	case <-v.proc.Exited: // the guest powered itself off, or qemu died
		return false
	default:
		return true
	}
}

// PowerOn starts qemu booting as b says: b.First first now, b.Later first on the guest's own
// reboots. It returns once qemu answers on QMP and runs the guest.
func (v *VM) PowerOn(b Boot) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.runningLocked() {
		return fmt.Errorf("bmc: VM %s: power on: already on", v.cfg.Name)
	}
	return v.startLocked(b)
}

func (v *VM) startLocked(b Boot) (err error) {
	v.reapLocked()
	if b.Mode == "" {
		b.Mode = ModeLegacy
	}
	if b.Mode == ModeUEFI {
		if err := v.uefiVars(); err != nil {
			return fmt.Errorf("bmc: VM %s: power on in UEFI mode: %w", v.cfg.Name, err)
		}
	}
	_ = os.Remove(v.QMPSocket)
	v.markBootLocked()
	bin, args := v.cfg.QEMU, qemuArgs(v, b)
	if v.cfg.Network.Netns != "" {
		bin, args = "/usr/bin/nsenter", append([]string{"--net=" + v.cfg.Network.Netns, "--", v.cfg.QEMU}, args...)
	}
	p, err := proc.Start("qemu "+v.cfg.Name, bin, args, nil, v.Log)
	if err != nil {
		return fmt.Errorf("bmc: VM %s: power on: %w", v.cfg.Name, err)
	}
	v.proc, v.mode = p, b.Mode
	go func() {
		<-p.Exited
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.proc == p {
			v.reapLocked()
		}
	}()
	defer func() {
		if err != nil {
			_ = p.Stop()
			v.proc = nil
			err = fmt.Errorf("bmc: VM %s: power on (%s): %w; end of %s:\n%s", v.cfg.Name, b, err, v.Log, p.LogTail(20))
		}
	}()
	q, err := v.waitQMP(p)
	if err != nil {
		return err
	}
	defer q.close()
	var status struct {
		Status string `json:"status"`
	}
	if err := q.run("query-status", nil, &status); err != nil {
		return err
	}
	if status.Status != "running" {
		return fmt.Errorf("qemu is %q, not running", status.Status)
	}
	if b.Later != b.First {
		return setBootOrder(q, b.Later)
	}
	return nil
}

// waitQMP connects to the QMP socket of p as soon as qemu serves it.
func (v *VM) waitQMP(p *proc.Process) (*qmp, error) {
	deadline := time.Now().Add(v.cfg.StartTimeout)
	for {
		q, err := dialQMP(v.QMPSocket, 5*time.Second)
		if err == nil {
			return q, nil
		}
		select {
		case <-p.Exited:
			return nil, fmt.Errorf("qemu exited (%s)", p.Cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no QMP at %s after %s: %w", v.QMPSocket, v.cfg.StartTimeout, err)
		}
	}
}

// reapLocked forgets a qemu that ended, releasing its guard.
func (v *VM) reapLocked() {
	if v.proc == nil {
		return
	}
	select {
	case <-v.proc.Exited:
		_ = v.proc.Stop()
		v.proc = nil
	default:
	}
}

// Reset restarts the running machine at once (a reset, not a power cycle), booting as b says.
// A change of firmware (b.Mode) needs a new qemu: then it is off for a moment.
func (v *VM) Reset(b Boot) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.runningLocked() {
		return fmt.Errorf("bmc: VM %s: reset: powered off", v.cfg.Name)
	}
	if b.Mode == "" {
		b.Mode = ModeLegacy
	}
	if b.Mode != v.mode {
		if err := v.proc.Stop(); err != nil {
			return fmt.Errorf("bmc: VM %s: reset to %s: %w", v.cfg.Name, b.Mode, err)
		}
		v.proc = nil
		return v.startLocked(b)
	}
	q, err := dialQMP(v.QMPSocket, 10*time.Second)
	if err != nil {
		return fmt.Errorf("bmc: VM %s: reset: %w", v.cfg.Name, err)
	}
	defer q.close()
	// qemu hands the firmware its boot order (fw_cfg "bootorder") when the machine resets:
	// devices' boot indexes set before the reset apply to the boot that follows it.
	if err := setBootOrder(q, b.First); err != nil {
		return fmt.Errorf("bmc: VM %s: reset: %w", v.cfg.Name, err)
	}
	v.markBootLocked()
	if err := q.run("system_reset", nil, nil); err != nil {
		return fmt.Errorf("bmc: VM %s: reset: %w", v.cfg.Name, err)
	}
	if err := q.waitEvent("RESET"); err != nil {
		return fmt.Errorf("bmc: VM %s: reset: %w", v.cfg.Name, err)
	}
	if b.Later != b.First {
		if err := setBootOrder(q, b.Later); err != nil {
			return fmt.Errorf("bmc: VM %s: reset: %w", v.cfg.Name, err)
		}
	}
	return nil
}

// setBootOrder sets the devices' boot indexes for the order with first at its head. Two
// passes: qemu refuses an index another device holds.
func setBootOrder(q *qmp, first Device) error {
	order := Order(first)
	for pass, base := range []int{100, 1} {
		for i, d := range order {
			if err := q.run("qom-set", map[string]any{"path": "/machine/peripheral/" + deviceIDs[d], "property": "bootindex", "value": base + i}, nil); err != nil {
				return fmt.Errorf("boot order %v (pass %d): %w", order, pass+1, err)
			}
		}
	}
	return nil
}

// PowerOff ends qemu at once, as pulling the power cord would (the disk image keeps what the
// guest wrote; what it had not flushed is lost).
func (v *VM) PowerOff() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.proc == nil {
		return nil
	}
	err := v.proc.Stop()
	v.proc = nil
	_ = os.Remove(v.QMPSocket)
	if err != nil {
		return fmt.Errorf("bmc: VM %s: power off: %w", v.cfg.Name, err)
	}
	return nil
}

// PressPowerButton sends the guest an ACPI power-button press: an OS that listens shuts down,
// and qemu ends with it; firmware and OSes without ACPI ignore it.
func (v *VM) PressPowerButton() error {
	return v.withQMP("power button", func(q *qmp) error { return q.run("system_powerdown", nil, nil) })
}

// Status is qemu's own word on the machine (QMP query-status: "running", "paused",
// "shutdown", ...).
func (v *VM) Status() (string, error) {
	var status struct {
		Status string `json:"status"`
	}
	err := v.withQMP("status", func(q *qmp) error { return q.run("query-status", nil, &status) })
	return status.Status, err
}

// BootIndexes are qemu's boot indexes of the devices now (QMP qom-get): what the next reset
// boots in, lowest first.
func (v *VM) BootIndexes() (map[Device]int, error) {
	out := map[Device]int{}
	err := v.withQMP("boot indexes", func(q *qmp) error {
		for d, id := range deviceIDs {
			var i int
			if err := q.run("qom-get", map[string]any{"path": "/machine/peripheral/" + id, "property": "bootindex"}, &i); err != nil {
				return err
			}
			out[d] = i
		}
		return nil
	})
	return out, err
}

func (v *VM) withQMP(what string, f func(*qmp) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.runningLocked() {
		return fmt.Errorf("bmc: VM %s: %s: powered off", v.cfg.Name, what)
	}
	return v.qmpLocked(what, f)
}

// PID is the running qemu's process id; 0 while powered off.
func (v *VM) PID() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.runningLocked() {
		return 0
	}
	return v.proc.Cmd.Process.Pid
}

// CommandLine is the running qemu's command line as the kernel has it (/proc/PID/cmdline);
// nil while powered off.
func (v *VM) CommandLine() []string {
	pid := v.PID()
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// MediaDir is the VM's directory, where a BMC keeps the images of its virtual media.
func (v *VM) MediaDir() string { return v.cfg.Dir }

// Media is the image file in the CD-ROM drive; "" when the drive is empty.
func (v *VM) Media() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cfg.ISO
}

// InsertMedia puts the image file at path (an ISO 9660 image) into the CD-ROM drive: a
// running machine's at once (QMP blockdev-change-medium, as a disc pushed into a drive), an
// off machine's at its next power-on. A medium in the drive is replaced.
func (v *VM) InsertMedia(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("bmc: VM %s: insert media: %w", v.cfg.Name, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.runningLocked() {
		if err := v.qmpLocked("insert media", func(q *qmp) error {
			return q.run("blockdev-change-medium", map[string]any{"id": deviceIDs[DeviceCd], "filename": path, "format": "raw", "read-only-mode": "read-only"}, nil)
		}); err != nil {
			return err
		}
	}
	v.cfg.ISO = path
	return nil
}

// EjectMedia empties the CD-ROM drive (a running machine's at once, even if the guest locked
// its tray).
func (v *VM) EjectMedia() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.runningLocked() && v.cfg.ISO != "" {
		if err := v.qmpLocked("eject media", func(q *qmp) error {
			return q.run("eject", map[string]any{"id": deviceIDs[DeviceCd], "force": true}, nil)
		}); err != nil {
			return err
		}
	}
	v.cfg.ISO = ""
	return nil
}

// DriveMedia is qemu's own word on the CD-ROM drive (QMP query-block): the file of the medium
// inserted, "" when the drive is empty. It needs the VM running.
func (v *VM) DriveMedia() (string, error) {
	var blocks []struct {
		Device   string `json:"device"`
		QDev     string `json:"qdev"`
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	if err := v.withQMP("drive media", func(q *qmp) error { return q.run("query-block", nil, &blocks) }); err != nil {
		return "", err
	}
	for _, b := range blocks {
		if b.Device == "drive-"+deviceIDs[DeviceCd] || strings.Contains(b.QDev, "/"+deviceIDs[DeviceCd]+"/") || b.QDev == deviceIDs[DeviceCd] {
			if b.Inserted == nil {
				return "", nil
			}
			return b.Inserted.File, nil
		}
	}
	return "", fmt.Errorf("bmc: VM %s: qemu has no drive %s", v.cfg.Name, deviceIDs[DeviceCd])
}

// qmpLocked runs f on a new QMP connection to the VM, which runs; v.mu is held.
func (v *VM) qmpLocked(what string, f func(*qmp) error) error {
	q, err := dialQMP(v.QMPSocket, 10*time.Second)
	if err != nil {
		return fmt.Errorf("bmc: VM %s: %s: %w", v.cfg.Name, what, err)
	}
	defer q.close()
	if err := f(q); err != nil {
		return fmt.Errorf("bmc: VM %s: %s: %w", v.cfg.Name, what, err)
	}
	return nil
}

// Close powers the VM off. Its files stay.
func (v *VM) Close() error { return v.PowerOff() }

// randomMAC returns a MAC address of qemu's prefix 52:54:00 with random low bytes.
func randomMAC() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[2]), nil
}

// randomUUID returns a random (version 4) UUID.
func randomUUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}
