// Package install installs binary packages (bpa/packages) on hosts over SSH, atomically and
// restart-safely, and rolls them back.
//
// On a host a package lives under Root (/opt/edgefleet/packages):
//
//	<name>/versions/<v>/ one directory per version, unpacked from the archive, with .digest
//	<name>/current       symlink to the version in use (versions/<v>)
//	<name>/previous      symlink to the version before it, kept for rollback
//	<name>/.active       the version that last passed its health check
//
// Install runs a fixed list of steps, each with a check that finds it done (sshexec.Step.Check),
// so an install interrupted at any point and run again resumes where it stopped and redoes no
// completed step:
//
//	stage        stream the archive over SSH, verify its sha256 on the host, unpack into a
//	             temporary directory and rename it to versions/<v> (the version appears whole or not
//	             at all)
//	pre-install  the package's pre-install hook
//	activate     switch current (previous keeps the old version), install its systemd units,
//	             daemon-reload, enable and restart them, run the health check until it passes;
//	             then record the version in .active
//	post-install the package's post-install hook
//	prune        remove versions other than current and previous
//
// When the health check does not pass in time, Install restores the previous version (its
// units, restarted and health-checked) and returns a *HealthError naming the host, package,
// version and the check's output. WriteFile puts per-host configuration (certificates, keys,
// environment files) on a host through standard input, never on a command line.
package install
