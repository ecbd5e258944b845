// Package proc runs the binaries of the test beds (controllers, Metal3's operator, Vault, the
// KMS plugin, the test hosts' unshare) as guarded subprocesses: each logs to a file, and a guard
// process kills it if the test binary dies without stopping it (a panic or a timeout), so
// nothing outlives its test. It is internal to test/: the test beds' packages share it.
package proc
