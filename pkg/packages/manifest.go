package packages

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// APIVersion is the manifest format this package reads and writes.
const APIVersion = "packages.edgefleet.io/v1alpha1"

// ManifestFile is the manifest's name at the root of the archive.
const ManifestFile = "manifest.yaml"

// The directories of an archive.
const (
	FilesDir = "files"
	UnitsDir = "units"
	HooksDir = "hooks"
)

// Manifest describes a package.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	// Name of the package: lower-case letters, digits and '-', starting with a letter.
	Name string `json:"name"`
	// Version: letters, digits, '.', '+', '_', '~' and '-'.
	Version string `json:"version"`
	// Architecture in GOARCH terms (amd64, arm64), or "all".
	Architecture string `json:"architecture"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// Files are the payload files, under files/ in the archive.
	Files []File `json:"files,omitempty"`
	// Units are the names of the systemd unit files under units/; they are installed into
	// /etc/systemd/system, enabled and restarted when the package is activated.
	Units []string `json:"units,omitempty"`
	// Hooks name scripts under hooks/.
	Hooks Hooks `json:"hooks,omitempty"`
	// HealthCheck bounds the health-check hook.
	HealthCheck HealthCheck `json:"healthCheck,omitempty"`

	// What the BPA does with the package in a cluster (cluster.go): on which hosts, after
	// which packages, with which per-host files, and how it is patched.

	// Hosts selects the hosts of a cluster that run the package; HostsAll when empty.
	Hosts HostSelector `json:"hosts,omitempty"`
	// Requires names what a cluster must have for the package to run there at all: RequiresKMS
	// (the cluster's API servers encrypt Secrets through a KMS plugin). A cluster without it
	// leaves the package out, so one Release serves sites with and without a Vault.
	Requires Requirement `json:"requires,omitempty"`
	// After names the packages this one is installed after, cluster-wide: each of them is
	// installed and healthy on all of its hosts first. A cluster whose packages do not
	// include one of them is refused.
	After []string `json:"after,omitempty"`
	// Config are the files the BPA writes on each host before the package is activated.
	Config []ConfigFile `json:"config,omitempty"`
	// Patch says how a new version replaces this one on a running cluster.
	Patch Patch `json:"patch,omitempty"`
}

// File is one payload file.
type File struct {
	// Path under files/, slash-separated, relative.
	Path string `json:"path"`
	// Mode is the octal permission bits, e.g. "0755".
	Mode string `json:"mode"`
	// SHA256 is the file's lower-case hex digest.
	SHA256 string `json:"sha256"`
	// Size in bytes.
	Size int64 `json:"size"`
}

// Hooks are the scripts a package runs on the host. Each is the name of an executable file
// under hooks/, run with the package's directory as working directory. Hooks must be idempotent:
// an interrupted install runs them again.
type Hooks struct {
	// PreInstall runs after the package is unpacked and before it becomes current.
	PreInstall string `json:"preInstall,omitempty"`
	// PostInstall runs once the package is current and healthy.
	PostInstall string `json:"postInstall,omitempty"`
	// HealthCheck runs after the units restarted, until it exits 0 or HealthCheck.TimeoutSeconds
	// pass; then the package counts as failed and the previous version is restored.
	HealthCheck string `json:"healthCheck,omitempty"`
	// ImportImage imports one container image archive, given on its standard input (its name
	// and sha256 in IMAGE_NAME and IMAGE_SHA256), into what the package runs: a container
	// runtime's image store. The BPA runs it for each image of the cluster on every host that
	// runs the package, once the package is active there, and once per image.
	ImportImage string `json:"importImage,omitempty"`
	// Join runs once on a host before the package's units first start there, after its
	// configuration files and PreInstall: for a package whose hosts form a group of their own
	// (etcd's members). SELECTED_HOSTS lists the cluster's hosts the manifest selects and
	// RUNNING_HOSTS those of them where the package was active when the BPA's run began, each
	// as "name=ip" separated by spaces: none when the group is founded (all start together),
	// else the host joins a running group and must make itself a member first. The BPA runs
	// joining hosts of a package one at a time. A host that leaves runs it again when it
	// comes back.
	Join string `json:"join,omitempty"`
	// Leave runs on a host that runs the package when another host of its selection leaves
	// the cluster (LEAVING_NAME, LEAVING_IP), before that host's package is stopped — whether
	// or not the leaving host answers: it takes the host out of the group (removes its etcd
	// member). It must succeed when the host is no member (done already).
	Leave string `json:"leave,omitempty"`
}

// HealthCheck bounds the health-check hook.
type HealthCheck struct {
	// TimeoutSeconds is how long the check may take to pass; 60 when zero.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// PeriodSeconds is the pause between attempts; 1 when zero.
	PeriodSeconds int `json:"periodSeconds,omitempty"`
}

// Timeout is the health check's timeout in seconds, defaulted.
func (h HealthCheck) Timeout() int {
	if h.TimeoutSeconds <= 0 {
		return 60
	}
	return h.TimeoutSeconds
}

// Period is the pause between health-check attempts in seconds, defaulted.
func (h HealthCheck) Period() int {
	if h.PeriodSeconds <= 0 {
		return 1
	}
	return h.PeriodSeconds
}

var (
	nameRE    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_~-]{0,127}$`)
	archRE    = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
	// unitRE: a systemd unit file name of the kinds a package may ship.
	unitRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]*\.(service|socket|timer|target|path)$`)
	hookRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate checks the manifest alone (not the archive): every error names the field at fault.
func (m *Manifest) Validate() error {
	if m.APIVersion != APIVersion {
		return fmt.Errorf("manifest: apiVersion %q: want %q", m.APIVersion, APIVersion)
	}
	if !nameRE.MatchString(m.Name) {
		return fmt.Errorf("manifest: name %q: want lower-case letters, digits and '-', starting with a letter, at most 63", m.Name)
	}
	if !versionRE.MatchString(m.Version) {
		return fmt.Errorf("manifest: version %q: want letters, digits, '.', '+', '_', '~', '-', starting with a letter or digit", m.Version)
	}
	if !archRE.MatchString(m.Architecture) {
		return fmt.Errorf("manifest: architecture %q: want a GOARCH name or \"all\"", m.Architecture)
	}
	seen := map[string]bool{}
	for i, f := range m.Files {
		if err := validPath(f.Path); err != nil {
			return fmt.Errorf("manifest: files[%d].path: %w", i, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("manifest: files[%d].path %q: listed twice", i, f.Path)
		}
		seen[f.Path] = true
		if _, err := f.Perm(); err != nil {
			return fmt.Errorf("manifest: files[%d].mode: %w", i, err)
		}
		if !sha256RE.MatchString(f.SHA256) {
			return fmt.Errorf("manifest: files[%d].sha256 %q: want 64 lower-case hex digits", i, f.SHA256)
		}
		if f.Size < 0 {
			return fmt.Errorf("manifest: files[%d].size %d: negative", i, f.Size)
		}
	}
	units := map[string]bool{}
	for i, u := range m.Units {
		if !unitRE.MatchString(u) {
			return fmt.Errorf("manifest: units[%d] %q: want a systemd unit file name (.service, .socket, .timer, .target, .path)", i, u)
		}
		if units[u] {
			return fmt.Errorf("manifest: units[%d] %q: listed twice", i, u)
		}
		units[u] = true
	}
	for field, h := range map[string]string{"preInstall": m.Hooks.PreInstall, "postInstall": m.Hooks.PostInstall, "healthCheck": m.Hooks.HealthCheck, "importImage": m.Hooks.ImportImage, "join": m.Hooks.Join, "leave": m.Hooks.Leave} {
		if h != "" && !hookRE.MatchString(h) {
			return fmt.Errorf("manifest: hooks.%s %q: want a file name under hooks/", field, h)
		}
	}
	if m.HealthCheck.TimeoutSeconds < 0 || m.HealthCheck.PeriodSeconds < 0 {
		return fmt.Errorf("manifest: healthCheck: timeoutSeconds and periodSeconds must not be negative")
	}
	return m.validateCluster()
}

// Perm parses the file's mode.
func (f File) Perm() (uint32, error) {
	if len(f.Mode) != 4 || f.Mode[0] != '0' {
		return 0, fmt.Errorf("%q: want four octal digits, e.g. \"0755\"", f.Mode)
	}
	v, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: want four octal digits, e.g. \"0755\"", f.Mode)
	}
	return uint32(v), nil
}

// hooks lists the hook file names the manifest names.
func (m *Manifest) hooks() []string {
	var hs []string
	for _, h := range []string{m.Hooks.PreInstall, m.Hooks.PostInstall, m.Hooks.HealthCheck, m.Hooks.ImportImage, m.Hooks.Join, m.Hooks.Leave} {
		if h != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// validPath accepts a clean, relative, slash-separated path that stays inside its directory.
func validPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q: absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q: not clean (want %q)", p, path.Clean(p))
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q: leaves the package", p)
	case strings.ContainsAny(p, "\\\x00\n'\"`$"):
		return fmt.Errorf("%q: holds a character packages may not use in paths", p)
	}
	return nil
}
