// Package restconfig loads the REST config a controller uses for its own cluster: from a
// kubeconfig file when one is given, in-cluster otherwise.
package restconfig
