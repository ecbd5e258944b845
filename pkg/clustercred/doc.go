// Package clustercred holds the rules of cluster users' credentials (issue 17): which identity
// a user of the global cluster gets inside an application cluster, how long its certificate
// lives, and what a certificate signing request must be. It does no I/O; the global controller
// (identity, lifetime), the BPA (it signs) and the CLI (it makes the request) share it.
package clustercred
