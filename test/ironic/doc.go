// Package ironic runs real OpenStack Ironic for tests: Debian trixie's Ironic 29 (ironic-api and
// ironic-conductor 1:29.0.x, API microversions up to 1.96), from the tree hack/tools.sh ironic
// builds with mmdebstrap (bin/ironic-root). Trixie's and not bookworm's, because bookworm's
// Ironic 21.4 tops out at API 1.82 and baremetal-operator v0.13.2 needs 1.89.
//
// Start writes an ironic.conf into a directory of the run (an SQLite database, the single
// process 'ironic' with rpc_transport none, HTTP basic authentication with a user and password
// made at random for the run, the ipmi, redfish and fake-hardware hardware types with the
// interfaces baremetal-operator enrolls nodes with, no DHCP provider), creates the database
// schema with ironic-dbsync and starts Ironic on a free port of 127.0.0.1. Both run chrooted
// into the tree inside private mount and PID namespaces (unshare): the run's directory is bound
// at /var/lib/ironic and the tree itself is read-only, so runs can share the tree, and nothing
// stays mounted or running on the host once the namespace's first process ends — a guard process
// ends it if the test binary dies without stopping Ironic. The password lives in memory only;
// the directory holds its bcrypt hash.
//
// With Options.VirtualMedia, Ironic is readied to boot its agent by Redfish virtual media: it
// builds a BIOS ISO (isolinux from the tree, xorriso as mkisofs) of a node's deploy_kernel and
// deploy_ramdisk into [deploy] http_root, which an HTTP server of the run serves on 127.0.0.1
// ([deploy] http_url, where the BMC fetches it; it serves directories of the caller's too, such
// as bin/ipa, for those URLs), and the agent is told Ironic's API at AgentHost
// ([service_catalog] endpoint_override: 10.0.2.2 for a qemu VM on the user-mode network, which
// qemu connects to this host's 127.0.0.1). Boot mode bios (SeaBIOS); the serial console on
// ttyS0; zstd ramdisks left compressed.
//
// Running it needs root (namespaces, chroot); StartT skips a test that does not run as root and
// fails one when the tree is missing (make tools builds it).
package ironic
