// Command edgefleet is the fleet's command line: sites, hosts, artifacts, releases and
// campaigns (docs/cli.md). It takes its credentials from a kubeconfig, like kubectl.
package main

import (
	"os"

	"github.com/edgefleet/edgefleet/cli/cmd"
)

func main() { os.Exit(cmd.Execute()) }
