// Package e2e holds edgefleet's end-to-end ginkgo suites. They run the built binaries
// (bin/global-controller, bin/kubectl) against real control planes started by test/testfleet, the
// way an operator would, and are part of `make test`; `make test-e2e` runs only them.
package e2e
