// Command site10 is the Site-10 harness of DESIGN.md (needs root): the first install of a site of
// 3 control-plane and 7 worker hosts — real test hosts (systemd, sshd) with the real node stack
// (builders.BuildStack: etcd, kube-apiserver, the API server proxy, kube-controller-manager, kube-scheduler, containerd,
// the pod network, kubelet, kube-proxy, the stack's images and chart) — timed from setting the
// Site's spec.cluster (release and network) on the global cluster until all 10 nodes are Ready
// and the test application serves.
//
// It starts a global control plane, the site's control plane and everything a site runs
// (testfleet.Fleet.StartRealSite: Metal3 with its fixture provisioner, the local controller with the BPA
// as bootstrap provider, the BPA with its secrets in a Vault dev server, the harness's Ironic
// booting each host once Metal3 provisioned it), uploads the stack and an OS image through the
// artifact API, makes them a Release and registers the Site and its 10 Hosts; all of that is
// set-up, not measured. Then it sets spec.cluster and polls, every 250 ms, the site's
// ApplicationCluster and ArtifactSet, the hosts, the application cluster's nodes and the
// application, recording when each milestone is first seen: the cluster pushed to the site, its
// artifacts cached there, every host provisioned, booted and answering SSH, the BPA installing,
// every node Ready (read with the admin kubeconfig the BPA keeps in Vault, so from the moment
// the API server answers), the application serving, and the global Site reporting it. The BPA's
// log gives each level of the install (its "installed level" lines: wall time, slowest host and
// package, time by kind of step), hence the install and health-check time on the critical path
// and the orchestration overhead around it. The hosts' memory and CPU time (testhosts.Host.Memory,
// Host.CPU) are read once the application serves.
//
// The anchor: the same install steps, one at a time, in the same run. After the site is torn
// down, ten fresh hosts of the same names are booted and cluster.BringUp (the BPA's own code)
// installs the same packages and images on them with an installer that lets one call at a time
// reach the hosts — a configuration file written, a package installed, an image imported —
// except that the control-plane hosts' etcd members are installed together (a member passes its
// health check only once a quorum runs). That run's wall time is the sequential sum the
// site's install is compared with, and each host's time inside it is that host's own install
// path (DESIGN.md's target: total ≤ 1.3 × the slowest one).
//
// Everything it starts stops when it ends, fails or is interrupted (Ctrl-C). `make bench` runs
// it; results go to docs/benchmarks.md.
package main
