package bmc

import "fmt"

// Device is a boot device, named as Redfish's BootSourceOverrideTarget names it.
type Device string

// The boot devices a machine has. DeviceNone, as an override target, means "no override": the
// machine's default order.
const (
	DeviceNone Device = "None"
	DevicePxe  Device = "Pxe" // the NIC (iPXE in its option ROM)
	DeviceHdd  Device = "Hdd" // the disk image
	DeviceCd   Device = "Cd"  // the CD-ROM drive (empty unless the VM was given an ISO)
)

// defaultOrder is the order a machine boots in without an override: disk first, as a server
// whose disk holds its OS, then the CD-ROM, then the network.
var defaultOrder = []Device{DeviceHdd, DeviceCd, DevicePxe}

// Order is the boot order with first at its head and the others in their default order;
// DeviceNone (or "") gives the default order.
func Order(first Device) []Device {
	order := []Device{}
	if first != DeviceNone && first != "" {
		order = append(order, first)
	}
	for _, d := range defaultOrder {
		if d != first {
			order = append(order, d)
		}
	}
	return order
}

// Mode is a boot mode, named as Redfish's BootSourceOverrideMode names it: it picks the VM's
// firmware.
type Mode string

// The boot modes.
const (
	ModeLegacy Mode = "Legacy" // SeaBIOS
	ModeUEFI   Mode = "UEFI"   // OVMF
)

// Boot is how a machine boots: the device its coming boot tries first, the device later boots
// (the guest's own reboots) try first, and the firmware. First and Later differ when the BMC
// held a one-time override: it applies to the coming boot only.
type Boot struct {
	First, Later Device
	Mode         Mode
}

func (b Boot) String() string {
	return fmt.Sprintf("first %s, later %s, %s", b.First, b.Later, b.Mode)
}
