// Package metal3 runs Metal3's baremetal-operator (bin/bmo, built by hack/tools.sh) against a
// control plane of test/controlplane, in its fixture test mode or against a real Ironic
// (Options.Ironic, see test/ironic): Start installs the operator's CRDs and its role, and
// BareMetalHosts go through the operator's real state machine. A guard process kills the operator if the test binary dies without stopping it.
package metal3
