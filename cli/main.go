// Command edgefleet is the fleet's command line: artifacts now; releases and campaigns as they
// land. It takes its credentials from a kubeconfig, like kubectl.
package main

import (
	"os"

	"github.com/edgefleet/edgefleet/cli/cmd"
)

func main() { os.Exit(cmd.Execute()) }
