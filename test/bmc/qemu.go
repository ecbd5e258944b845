package bmc

import (
	"fmt"
	"strconv"
	"strings"
)

// The ids of the VM's devices in qemu (QOM paths /machine/peripheral/<id>), one per boot device.
var deviceIDs = map[Device]string{DevicePxe: "nic0", DeviceHdd: "disk0", DeviceCd: "cd0"}

// qemuArgs is qemu's command line for one power-on of the VM: boot order from b.First, firmware
// from b.Mode.
func qemuArgs(v *VM, b Boot) []string {
	c := v.cfg
	index := map[Device]int{}
	for i, d := range Order(b.First) {
		index[d] = i + 1
	}
	args := []string{
		"-name", "guest=" + c.Name,
		"-accel", "tcg",
		"-machine", "pc",
		"-m", strconv.Itoa(c.MemoryMiB),
		"-smp", strconv.Itoa(c.CPUs),
		"-uuid", c.UUID,
		"-nodefaults", "-no-user-config", "-display", "none",
		// Only the devices with a boot index boot: a machine with nothing to boot says so and
		// retries, instead of trying a floppy.
		"-boot", "strict=on",
		"-chardev", "file,id=serial0,append=on,path=" + optEscape(v.SerialLog),
		"-serial", "chardev:serial0",
		// SeaBIOS writes its log (boot attempts included) to I/O port 0x402.
		"-chardev", "file,id=fwlog,append=on,path=" + optEscape(v.FirmwareLog),
		"-device", "isa-debugcon,iobase=0x402,chardev=fwlog",
		"-qmp", "unix:" + optEscape(v.QMPSocket) + ",server=on,wait=off",
	}
	if b.Mode == ModeUEFI {
		args = append(args,
			"-drive", "if=pflash,format=raw,readonly=on,file="+optEscape(c.OVMFCode),
			"-drive", "if=pflash,format=raw,file="+optEscape(v.UEFIVars))
	}
	netdev := "user,id=net0"
	if c.Network.Tap != "" {
		netdev = "tap,id=net0,script=no,downscript=no,ifname=" + optEscape(c.Network.Tap)
	} else {
		if c.Network.TFTPRoot != "" {
			netdev += ",tftp=" + optEscape(c.Network.TFTPRoot)
		}
		if c.Network.BootFile != "" {
			netdev += ",bootfile=" + optEscape(c.Network.BootFile)
		}
		for _, f := range c.Network.HostForwards {
			netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", f.Host, f.Guest)
		}
	}
	cd := "if=none,id=drive-cd0,media=cdrom"
	if c.ISO != "" {
		cd += ",readonly=on,format=raw,file=" + optEscape(c.ISO)
	}
	args = append(args,
		"-netdev", netdev,
		"-device", fmt.Sprintf("virtio-net-pci,netdev=net0,mac=%s,id=%s,bootindex=%d", c.MAC, deviceIDs[DevicePxe], index[DevicePxe]),
		"-drive", "if=none,id=drive-disk0,format=raw,file="+optEscape(v.Disk),
		"-device", fmt.Sprintf("virtio-blk-pci,drive=drive-disk0,id=%s,bootindex=%d", deviceIDs[DeviceHdd], index[DeviceHdd]),
		"-drive", cd,
		"-device", fmt.Sprintf("ide-cd,drive=drive-cd0,id=%s,bootindex=%d", deviceIDs[DeviceCd], index[DeviceCd]),
	)
	return args
}

// optEscape escapes a value inside a qemu option list, where a comma separates options and a
// doubled comma is a comma.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
