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
// at a time, in make test's heavy lane (HEAVY_PKGS).
//
// The tests need root (Ironic runs in private namespaces, chrooted) and skip otherwise; they
// fail, naming 'hack/tools.sh ipa', when bin/ipa is missing. Ironic's directory (its database
// holds the agent's token) lives in /dev/shm, removed at the end.
package ipa
