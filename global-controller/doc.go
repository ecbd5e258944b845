// Package main is the global controller: the controller-runtime manager of the global cluster.
// It keeps the site registry (Site, Host) and serves the artifact REST API over MongoDB GridFS;
// releases, campaigns and the web UI come with later work. main.go only parses flags and hands
// over to setup.
package main
