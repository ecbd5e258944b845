// Package testutil holds the small helpers that tests and every test bed share and that start
// nothing heavy: the repository root (RepoRoot, for bin/ and hack/), waiting for a condition
// (WaitFor, Eventually), reproducible content (RandomContent), free loopback addresses
// (FreeAddr), searching files for secrets (FindSecrets, FilesContaining) and a TCP proxy that
// cuts a link mid-transfer (CutProxy).
package testutil
