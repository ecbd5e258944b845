// Package testhosts makes the BPA's targets: real Linux hosts on this machine (NewHosts,
// StartHosts; needs root), the Debian root filesystem built by hack/rootfs.sh (bin/rootfs) on an
// overlayfs per host, booted with systemd as PID 1 in new PID, mount, UTS, IPC, network and
// cgroup namespaces, running OpenSSH, on a bridge of a network namespace of their own that the
// test reaches through a veth link. Hosts can be provisioned (hostname, authorized keys), booted,
// cut off the network, restored and stopped; everything goes with the processes, which a guard
// kills if the test binary dies. PlayIronic plays Ironic's deploy step for them as Metal3
// provisions their BareMetalHosts, and the workloads (RunPod, StartRequests, StartEtcdSamples)
// check what a cluster on them serves. See docs/test-hosts.md.
package testhosts
