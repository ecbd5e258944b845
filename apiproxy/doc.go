// Command edgefleet-apiproxy is the node-local endpoint of an application cluster's API
// servers: every host runs one on loopback, and the host's own clients of the cluster (kubelet,
// kube-proxy, the controller manager, the scheduler) reach the API servers through it. It
// forwards TCP connections, TLS untouched, to the first ready API server in its list (a
// control-plane host lists its own first) and moves them off an API server that stops, so a
// restarted API server — the cluster's endpoint included — never cuts a node off the cluster
// long enough for its heartbeats to lapse. main.go only parses flags; the proxy is package
// proxy. See docs/bpa.md.
package main
