// Package cmd holds the cobra commands of the edgefleet CLI.
package cmd
