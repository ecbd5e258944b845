// Package packages defines edgefleet's binary package format and reads and builds packages.
//
// A package is a gzip-compressed tar archive holding, at its root:
//
//	manifest.yaml    the Manifest: name, version, architecture, files, units, hooks, health check
//	files/...        the payload, installed under the package's versioned directory
//	units/...        systemd unit files, installed into /etc/systemd/system
//	hooks/...        pre-install, post-install and health-check scripts
//
// Every payload file is listed in the manifest with its mode and sha256; Read refuses an
// archive whose contents differ from its manifest in any way (a missing, extra or altered file,
// a link, a path leaving the package), so a package that reads cleanly installs exactly what its
// manifest says. Build makes the same archive from the same inputs, byte for byte, so a package
// rebuilt from unchanged files keeps its digest in the artifact store. docs/packages.md is the
// user's description of the format; bpa/install installs packages on hosts.
package packages
