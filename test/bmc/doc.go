// Package bmc simulates the hardware of the test bed's bare-metal machines: each machine is a
// qemu VM (VM), and a Redfish service (Server) is its baseboard management controller, which
// real Ironic drives as it drives a server's BMC — power and boot device. It is test
// infrastructure: it lives under test/ and never in a shipped binary.
//
// # Why Redfish
//
// Redfish is what current BMCs speak and what Metal3 uses: baremetal-operator turns a
// BareMetalHost's redfish:// address into Ironic's redfish hardware type with PXE/iPXE boot,
// and redfish-virtualmedia:// into virtual-media boot, which this package serves too. A
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
// nsenter); on the user-mode network, Network.HostForwards forward ports of the host's loopback
// to the guest (Ironic calls its agent's API there). A QMP socket serves power-button presses, resets, boot-order changes and qemu's
// own status (VM.Status, VM.BootIndexes) to tests that want qemu's word, not the BMC's.
//
// Firmware: SeaBIOS (Legacy mode) by default, with iPXE in the NIC's option ROM (Debian's
// ipxe-qemu); OVMF (Debian's ovmf, UEFI mode) when the System's BootSourceOverrideMode is UEFI,
// which Ironic sets when a node boots in UEFI mode. The mode takes effect at the next power-on.
//
// Boot order: qemu's per-device boot indexes (-boot strict=on: only the NIC, the disk and the
// CD-ROM drive boot). Without an override the machine boots its disk, then the CD-ROM, then the
// network; an override's target goes first (Pxe: the NIC, Hdd: the disk, Cd: the CD-ROM
// drive, empty unless the VM was given an ISO or the BMC's virtual media filled it). qemu gives the firmware its boot order at each reset, and the VM sets the
// devices' indexes over QMP between resets, so a one-time override holds for exactly one boot:
// the one the BMC's power-on or restart starts, not the guest's own reboots after it.
//
// # The Redfish service
//
// net/http on an address of the caller's (127.0.0.1:0 by default), HTTP basic authentication
// with a user and password made at random per server and kept in memory. It serves what
// Ironic's redfish hardware type (sushy 5.x) reads and writes for power and boot:
//
//	GET   /redfish/v1/                      service root (public, as Redfish wants)
//	GET   /redfish/v1/Systems               one System per machine
//	GET   /redfish/v1/Systems/{id}          PowerState, Boot, ProcessorSummary, MemorySummary, UUID, Actions
//	PATCH /redfish/v1/Systems/{id}          Boot: BootSourceOverrideTarget, ...Enabled, ...Mode
//	POST  /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset
//	                                        On, ForceOff, GracefulShutdown, ForceRestart,
//	                                        GracefulRestart, PushPowerButton
//	GET   /redfish/v1/Systems/{id}/VirtualMedia      the System's virtual media: one member, Cd
//	GET   /redfish/v1/Systems/{id}/VirtualMedia/Cd   MediaTypes CD, DVD; Inserted, Image, Actions
//	POST  .../VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia   Image (http/https on the loopback)
//	POST  .../VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia
//	GET   /redfish/v1/Managers, /redfish/v1/Managers/BMC
//	GET   /redfish/v1/Chassis, /redfish/v1/Chassis/{id}
//
// Everything else is a 404 (a wrong method a 405) with a Redfish error naming it: there is no
// SessionService (sushy falls back to basic authentication), no BIOS, firmware inventory,
// storage, EthernetInterfaces, ETags or tasks. Bad bodies are 400s whose message names the
// property, and change nothing.
//
// Virtual media: a System whose machine has a drive the BMC can fill (MediaMachine: a VM) links
// its VirtualMedia collection, which holds one virtual CD, Cd. It lives under the System (where
// Redfish 1.13 puts it, and where Ironic looks before it looks at the managers'), not under
// the Manager: the one Manager here manages every System, and a CD of the Manager's would be
// every machine's at once. InsertMedia takes Image (sushy's body; Inserted and
// WriteProtected only true, TransferProtocolType matching the URL, TransferMethod Upload or
// Stream, no credentials), downloads it (at most Options.MediaMaxSize, 2 GiB, within
// Options.MediaTimeout, 5 minutes; only from loopback hosts: the test's image servers) into
// the machine's directory and puts it into the drive — a running VM's at once, over QMP, an
// off one's at its next power-on — and answers 204 once it is there; an image that cannot be
// fetched is a 400 naming Image, and leaves no file. A drive that holds media refuses another
// insertion (eject first, as Ironic does). EjectMedia (no body, or {}) empties the drive and
// deletes the file.
//
// Reset types: On powers on (booting as the override says); ForceOff ends qemu; GracefulShutdown
// presses the ACPI power button (an OS that listens powers off; firmware ignores it);
// ForceRestart resets the running machine (a restart of an off machine powers it on);
// GracefulRestart presses the button and powers the machine on again once the OS powered it
// off (bounded by Options.GracefulTimeout); PushPowerButton powers an off machine on and
// presses the button of a running one. An action that finds the machine where it would take it
// does nothing and succeeds. A Once override turns Disabled when the machine boots from it (its
// target stays, as Redfish says); Continuous stays.
//
// Each request's method, path and status go to a bounded in-memory log (Server.Requests), and
// StartT prints it when a test fails.
package bmc
