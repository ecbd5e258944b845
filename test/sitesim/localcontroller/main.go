// Command local-controller-simulated is bin/local-controller with its node bootstrapper
// replaced by sitesim.NodeSimulator: provisioned machines' nodes are registered without a host
// touched. Test beds without hosts and the demo's simulated site run it (`make test-bins`); it
// is never shipped.
package main

import (
	"fmt"
	"os"

	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/test/sitesim"
)

func main() {
	opts := setup.DefaultOptions()
	opts.NodeBootstrapper = sitesim.NewNodeSimulator
	if err := setup.Main("local-controller-simulated", os.Args[1:], opts); err != nil {
		fmt.Fprintln(os.Stderr, "local-controller-simulated:", err)
		os.Exit(1)
	}
}
