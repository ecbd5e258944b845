// Package cmd holds the cobra commands of the edgefleet CLI: one file per noun (site, host,
// artifact, release, campaign), and what they share — the global cluster's client (kube.go),
// the list verb (list.go), the describe tree (tree.go), --output (output.go), --wait
// (wait.go) and shell completion of object names (complete.go).
package cmd
