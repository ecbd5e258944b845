// Package pkg holds libraries shared by edgefleet's components (site clients, the artifact
// store and its client, the SSH executor, secrets, ...). Nothing under pkg/ imports a
// component, nor the test infrastructure under test/.
package pkg
