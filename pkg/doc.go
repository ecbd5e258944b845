// Package pkg holds libraries shared by edgefleet's components (site clients, test
// environment, and later the artifact store client, SSH executor and secrets). Nothing under
// pkg/ imports a component.
package pkg
