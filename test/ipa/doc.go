// Package ipa holds the test of real bare-metal provisioning: Metal3's baremetal-operator
// (bin/bmo, test/metal3) drives real Ironic (test/ironic), which boots its real agent (the Ironic
// Python Agent ramdisk hack/ipa.sh builds from Debian trixie's ironic-python-agent, bin/ipa) on
// one qemu VM (TCG) through the Redfish BMC of test/bmc, by virtual media: Ironic builds a BIOS
// ISO of the agent's kernel and ramdisk, the BMC downloads it into the VM's CD-ROM drive, the VM
// boots it (SeaBIOS, isolinux), and the agent, on qemu's user-mode network, calls Ironic at
// 10.0.2.2. Ironic calls the agent's API through a qemu forward of a port of the host's
// loopback, which the agent advertises (ipa-advertise-host/-port).
//
// TestMetal3InspectsAndProvisions is one ordered bed (every agent boot under TCG costs minutes,
// so the VM's whole life is one test): a BareMetalHost (BMC redfish-virtualmedia+http, boot MAC,
// legacy boot, root device /dev/vda, inspection by the agent, automatedCleaningMode metadata,
// online) goes
//  1. registering, inspecting, available: its hardwareDetails and Ironic's inventory are the
//     VM's (MAC, memory, CPUs, disk size); the BMC took virtual media; the drive is empty after;
//  2. with an image whose sha256 is wrong, provisioning: metadata cleaning, then the agent
//     downloads the image once (ipa-image-download-connection-retries=0), refuses it, and the
//     host reports a provisioning error naming the checksum; the disk has no boot sector,
//     nothing booted from it, the image's OS never ran;
//  3. with the checksum fixed, deprovisioning (cleaning) and provisioning again: the agent
//     downloads the OS image hack/osimage.sh builds (bin/osimage: Debian bookworm, GRUB for
//     BIOS, cloud-init reading only the config drive) through the run's HTTP server as its
//     proxy, verifies it, writes it and the config drive (the host's user data: a cloud-config
//     writing a file; its meta data: the test's SSH key); the VM boots its disk; the test pins
//     the ed25519 host key cloud-init prints on the serial console (no key is accepted
//     blindly), logs in with its key and checks the hostname (the host's name), the user data's
//     file, the root device and cloud-init's status;
//  4. deprovisioning: cleaning with a freshly booted agent zeroes the disk's first sector, and
//     the host is available again. SeaBIOS's log shows exactly the boots that implies, and no
//     password of the BMC or Ironic is in the VM's logs.
//
// Ironic is readied for the operator, which sets none of the node's driver_info: the agent's
// kernel line and the image proxy are Ironic's, conductor-wide (one VM per Ironic), and fast
// track keeps the agent that cleaned for the deploy (docs/metal3-testbed.md). The test runs last in
// make test's machines lane (QEMU_PKGS), after the real-hosts suite and the site image's boot;
// its waits fail when the VM stops moving, not when it is slow.
//
// The test needs root (Ironic runs in private namespaces, chrooted) and skips otherwise; it
// fails, naming 'hack/tools.sh ipa' or 'hack/tools.sh osimage', when bin/ipa or bin/osimage is
// missing. Ironic's directory (its database holds the agent's token) lives in /dev/shm, removed
// at the end.
package ipa
