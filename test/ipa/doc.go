// Package ipa holds the tests of real Ironic booting its real agent (the Ironic Python Agent
// ramdisk hack/ipa.sh builds from Debian trixie's ironic-python-agent, bin/ipa) on a qemu VM
// (TCG) through the Redfish BMC of test/bmc, by virtual media: Ironic builds a BIOS ISO of the
// agent's kernel and ramdisk, the BMC downloads it into the VM's CD-ROM drive, the VM boots it
// (SeaBIOS, isolinux), and the agent, on qemu's user-mode network, calls Ironic at 10.0.2.2.
//
// TestInspection enrolls the VM, inspects it with the agent inspect interface and asserts the
// inventory Ironic stored against the VM's hardware: its MAC, memory, disk and CPU count
// (measured: 115 s, the inspection 112 s, most of it the agent's boot under TCG with 2 vCPUs).
//
// TestCleaning writes a marker at the start of the VM's disk, runs manual cleaning with
// erase_devices_metadata and asserts the marker is gone (measured: 101 s). Ironic calls the
// agent's API for cleaning: qemu forwards a port of the host's loopback to the agent's 9999,
// which the agent advertises (ipa-advertise-host/-port). Both run in the default run, one VM
// at a time, in make test's qemu lane (QEMU_PKGS, at the lowest CPU priority).
//
// TestDeploy deploys the OS disk image hack/osimage.sh builds (bin/osimage: Debian bookworm,
// GRUB for BIOS, cloud-init reading only the config drive) with the direct deploy interface: the
// run's HTTP server serves the image (qcow2) and Ironic checks it there; instance_info names it
// with its sha256; the deploy carries a config drive Ironic builds from JSON (meta_data: the
// hostname and an ed25519 SSH public key the test makes; user_data: a cloud-config that writes a
// file). The agent downloads the image (through the run's HTTP server as its proxy: the URL
// names the host's loopback, which the guest reaches at 10.0.2.2 only), verifies the checksum,
// writes it and the config drive to the disk; Ironic sets the disk as the boot device and
// power-cycles the VM, which boots GRUB, then Debian; cloud-init applies the config drive and
// prints the SSH host keys it made on the serial console. The test pins that ed25519 host key
// (no key is accepted blindly), logs in as root with its key through a qemu host forward to the
// guest's 22, and checks the hostname, that / is /dev/vda1 and the user data's file; SeaBIOS's
// log shows the CD, then the disk. Each phase's time is logged (measured: 2m42s-4m20s on a
// lightly loaded machine, 4m53s-5m31s under a CI run; docs/metal3-testbed.md has the breakdown).
//
// TestDeployRefusesABadChecksum gives instance_info a sha256 the image does not have: the agent
// (told not to download again: ipa-image-download-connection-retries=0) refuses it, the node goes to deploy failed with a last_error naming the checksum, the disk has
// no boot sector, and nothing booted from it.
//
// TestMetal3InspectsAndProvisions has Metal3's baremetal-operator (bin/bmo, test/metal3) drive
// the VM through the bed's Ironic as a BareMetalHost: BMC redfish-virtualmedia+http, boot MAC,
// legacy boot, inspection by the agent, automatedCleaningMode metadata, online. The operator
// sets none of the driver_info the other tests set, so the bed readies Ironic for it
// (bedOptions.Operator): the agent's kernel line is Ironic's [redfish] kernel_append_params
// (one VM per Ironic), the run's HTTP server is the agent's HTTP proxy for images
// (ironic.VirtualMediaOptions.ImageProxy, systemd.setenv on the kernel line, in place of
// driver_info/image_http_proxy), and fast track keeps the agent that inspected booted for the
// automated cleaning and the deploy. The host goes registering, inspecting, preparing,
// available; its hardwareDetails must be the VM's (MAC, memory, CPUs, disk size, as
// TestInspection asserts of the inventory). Then spec.image (the OS image, qcow2, sha256),
// userData (a cloud-config writing a file) and metaData (public_keys: the test's SSH key) take
// it to provisioned; the test pins the ed25519 host key from the console, logs in, and checks
// the hostname (the operator's local-hostname: the host's name), the user data's file and the
// root device. Removing the image deprovisions it: cleaning with a freshly booted agent wipes
// the disk's boot sector, and the host is available again. SeaBIOS's log shows the boots:
// CD (inspection), CD (cleaning, then the deploy on that agent), the disk, CD (deprovisioning).
// Measured under make test runs (load 12-37): 15m51s-23m56s (inspection 2m27s-5m27s,
// provisioning 5m14s-7m9s, login 1m20s-6m8s, deprovisioning 3m20s-8m0s); three agent boots
// are most of it.
//
// The tests need root (Ironic runs in private namespaces, chrooted) and skip otherwise; they
// fail, naming 'hack/tools.sh ipa', when bin/ipa is missing, and the deploy tests naming
// 'hack/tools.sh osimage' when bin/osimage is missing. Ironic's directory (its database
// holds the agent's token) lives in /dev/shm, removed at the end.
package ipa
