// Package bmc simulates the hardware of the test bed's bare-metal machines: each machine is a
// qemu VM (VM), and a Redfish service (Server) is its baseboard management controller, which
// real Ironic drives as it drives a server's BMC — power and boot device. It is test
// infrastructure: it lives under test/ and never in a shipped binary.
//
// # Why Redfish
//
// Redfish is what current BMCs speak and what Metal3 uses: baremetal-operator turns a
// BareMetalHost's redfish:// address into Ironic's redfish hardware type with PXE/iPXE boot
// (redfish-virtualmedia:// into virtual-media boot, which this package does not serve yet). A
// Redfish BMC needs no extra daemon (IPMI would need OpenIPMI's ipmi_sim) and no qemu chardev
// plumbing (ipmi-bmc-extern): it is an HTTP handler in the test's process, and its state is
// plain HTTP and JSON a test can read and assert on.
//
// # The VM
//
// A powered-on VM is one qemu-system-x86_64 process under TCG (-accel tcg: no KVM on the test
// machines), started as a guarded subprocess (test/internal/proc), so that it dies with a test
// binary that dies without powering it off; powered off, there is no process. What outlives
// power cycles lives in files of the VM's directory: the disk image (raw, created sparse at the
// size given, or an image the caller gives), the UEFI variable store, the serial console's log
// and SeaBIOS's log (I/O port 0x402), both appended to at each power-on. The NIC is a
// virtio-net with the caller's MAC on qemu's user-mode network (the default: the guest reaches
// the host's loopback at 10.0.2.2; slirp's TFTP and DHCP boot file can be set) or on a tap
// device the caller made, in a network namespace of the caller's (qemu then runs in it, through
// nsenter). A QMP socket serves power-button presses, resets, boot-order changes and qemu's
// own status (VM.Status, VM.BootIndexes) to tests that want qemu's word, not the BMC's.
//
// Firmware: SeaBIOS (Legacy mode) by default, with iPXE in the NIC's option ROM (Debian's
// ipxe-qemu); OVMF (Debian's ovmf) for a UEFI-mode boot. The mode takes effect at the next
// power-on.
//
// Boot order: qemu's per-device boot indexes (-boot strict=on: only the NIC, the disk and the
// CD-ROM drive boot). Without an override the machine boots its disk, then the CD-ROM, then the
// network; an override's target goes first (Pxe: the NIC, Hdd: the disk, Cd: the CD-ROM
// drive, empty unless the VM was given an ISO — virtual media, which would change its medium,
// is left for later). qemu gives the firmware its boot order at each reset, and the VM sets the
// devices' indexes over QMP between resets, so a one-time boot device holds for exactly one
// boot: the one a power-on or reset starts, not the guest's own reboots after it.
package bmc
