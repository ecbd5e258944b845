// Package cluster brings up an application Kubernetes cluster on provisioned hosts: the
// Binary Provisioning Agent's bootstrap work.
//
// BringUp.Run installs whatever packages it is given, each as its manifest says
// (docs/packages.md): on the hosts it selects, after the packages it names (Levels: a level's
// packages on all their hosts at once), with the configuration files it lists — files of the
// cluster's PKI by name and templates over the cluster's values — written first through
// Installer.WriteFile (private keys on the SSH session's standard input, 0600). The PKI is
// ensured in the secret store first (bpa/pki); the admin kubeconfig is saved there as
// <cluster>-admin-kubeconfig (key "value"); the CA keys and the admin key exist only there.
// Every step is idempotent: Run again after a crash, or on a cluster that is up, finishes what
// is missing and redoes nothing.
//
// BringUp.Patch rolls a new version of one package through its hosts, one host at a time.
package cluster
