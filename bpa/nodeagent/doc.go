// Package nodeagent is a simulated kubelet: it makes a host show up as a Ready Node of the
// application cluster without running any container. The BPA installs it, as the node agent
// package, on every host of the test bed; in production that package is kubelet + containerd.
//
// Run behaves towards the API server like a kubelet does:
//
//   - it registers the Node: creates it when absent (labels kubernetes.io/hostname,
//     kubernetes.io/os, kubernetes.io/arch plus Options.Labels, spec.providerID); when the Node
//     exists it only adds the labels it lacks and never writes its spec, so a cordon or a taint
//     set by someone else survives an agent restart;
//   - it posts the Node's status through the status subresource: Ready=True (KubeletReady),
//     no memory, disk or PID pressure, the kubelet version (a restart with a new version reports
//     it: this is how a package patch shows), OS and architecture, InternalIP and Hostname
//     addresses, and the host's CPU and memory with 110 pods as capacity and allocatable. The
//     conditions' LastHeartbeatTime is refreshed every Options.StatusInterval; their
//     LastTransitionTime changes only when their status does;
//   - it holds the Lease kube-node-lease/<node> (holder the node's name, 40 s duration, owned by
//     the Node) and renews it every Options.HeartbeatInterval.
//
// Transient API errors (the API server is unreachable, a timeout, a conflict, a server error)
// are logged and retried with a capped exponential backoff; errors that retrying cannot fix (the
// request is invalid, forbidden or unauthorized) end Run with an error. Cancelling the context is
// the graceful stop: Run returns nil and leaves the Node and its Lease in place, like a kubelet
// that is stopped. A Node deleted while the agent runs is not created again until the agent
// restarts (kubelet does the same); until then its status updates fail and are retried.
//
// The API server's TaintNodesByCondition admission taints a new Node
// node.kubernetes.io/not-ready:NoSchedule; in a full cluster the node lifecycle controller of
// kube-controller-manager lifts it once the Node is Ready. The agent, like kubelet, leaves taints
// alone, so in an application cluster without a controller manager the taint stays.
package nodeagent
