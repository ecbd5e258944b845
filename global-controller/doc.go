// Package main is the global controller: the controller-runtime manager of the global cluster.
// It keeps the site registry (Site, Host) and, in later work, releases, campaigns, the artifact
// REST API and the web UI. main.go only parses flags and hands over to setup.
package main
