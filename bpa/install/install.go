package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// Runner runs a step on a host (sshexec.Executor does).
type Runner interface {
	Run(ctx context.Context, target sshexec.Target, step sshexec.Step) (sshexec.Result, error)
}

// DefaultRoot is where packages are installed on hosts.
const DefaultRoot = "/opt/edgefleet/packages"

// DefaultUnitDir is where package units are installed on hosts.
const DefaultUnitDir = "/etc/systemd/system"

// Installer installs packages on hosts.
type Installer struct {
	runner  Runner
	root    string
	unitDir string
}

// New returns an Installer running its steps through r, with packages under DefaultRoot.
func New(r Runner) *Installer {
	return &Installer{runner: r, root: DefaultRoot, unitDir: DefaultUnitDir}
}

// Package is a package to install: its manifest (as packages.Read checked it), the sha256 of its
// archive, and the archive's bytes.
type Package struct {
	Manifest *packages.Manifest
	// Digest is the archive's sha256, lower-case hex.
	Digest string
	// Archive opens the archive; it is read once per host.
	Archive sshexec.Source
	// ConfigDigest identifies the package's configuration files on the host (the caller writes
	// them before Install). An active version whose configuration changed since it was
	// started is restarted with it and health-checked again. Empty: no configuration.
	ConfigDigest string
	// Membership is what the package's join hook is told (packages.Hooks.Join); nil: the
	// install runs no join hook (the host has joined already).
	Membership *Membership
}

// Membership is the group a package's hosts form (etcd's members), as its join hook sees it.
type Membership struct {
	// Selected are the cluster's hosts the package's manifest selects, Running those of them
	// where it was active when the BPA's run began: each "name=ip".
	Selected, Running []string
}

// Report is what an install did on a host, step by step.
type Report struct {
	Host     string
	Steps    []sshexec.Result
	Package  string
	Version  string
	Duration time.Duration
}

// Ran lists the steps that ran (were not found done already).
func (r Report) Ran() []string {
	var ran []string
	for _, s := range r.Steps {
		if !s.Skipped {
			ran = append(ran, s.Step)
		}
	}
	return ran
}

// HealthError says a package did not pass its health check on a host.
type HealthError struct {
	Host, Package, Version string
	// Output is the end of the health check's output.
	Output string
	// RolledBackTo is the version restored, "" when there was none (the package's units are
	// stopped then).
	RolledBackTo string
	// RollbackErr is set when restoring the previous version failed too.
	RollbackErr error
	// Reconfigured is true when the version was running already and failed after a restart
	// for a configuration change: nothing was rolled back (the previous version would run on
	// the same configuration).
	Reconfigured bool
}

func (e *HealthError) Error() string {
	msg := fmt.Sprintf("host %s: package %s %s failed its health check", e.Host, e.Package, e.Version)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	switch {
	case e.Reconfigured:
		msg += "; it was restarted for a configuration change, and nothing was rolled back: fix the configuration"
	case e.RollbackErr != nil:
		msg += fmt.Sprintf("; rolling back failed: %v", e.RollbackErr)
	case e.RolledBackTo != "":
		msg += "; rolled back to " + e.RolledBackTo
	default:
		msg += "; no previous version to roll back to, its units are stopped"
	}
	return msg
}

// Exit statuses of an activation whose health check did not pass: a new version (rolled back)
// and a running version restarted for its configuration (not).
const (
	healthFailed      = 3
	reconfigureFailed = 4
)

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrUnhealthy is in Healthy's error when the package runs but its health check does not pass
// now: unlike a package not installed or one that failed when last started, it may pass later.
var ErrUnhealthy = errors.New("its health check does not pass")

// Install installs pkg on target and makes it current; see the package documentation.
func (i *Installer) Install(ctx context.Context, target sshexec.Target, pkg Package) (rep Report, err error) {
	start := time.Now()
	m := pkg.Manifest
	rep = Report{Host: target.Name}
	if m == nil {
		return rep, errors.New("install: package without a manifest")
	}
	rep.Package, rep.Version = m.Name, m.Version
	if err := m.Validate(); err != nil {
		return rep, fmt.Errorf("install %s on %s: %w", m.Name, target.Name, err)
	}
	if !digestRE.MatchString(pkg.Digest) {
		return rep, fmt.Errorf("install %s %s on %s: digest %q: want 64 lower-case hex digits", m.Name, m.Version, target.Name, pkg.Digest)
	}
	if pkg.Archive == nil {
		return rep, fmt.Errorf("install %s %s on %s: no archive to read", m.Name, m.Version, target.Name)
	}
	defer func() { rep.Duration = time.Since(start) }()
	for _, step := range i.steps(pkg) {
		res, err := i.runner.Run(ctx, target, step)
		rep.Steps = append(rep.Steps, res)
		if err == nil {
			continue
		}
		var exit *sshexec.ExitError
		if step.Name == "activate" && errors.As(err, &exit) && (exit.Status == healthFailed || exit.Status == reconfigureFailed) {
			herr := &HealthError{Host: target.Name, Package: m.Name, Version: m.Version, Output: lastLines(res.Stderr, 5)}
			if exit.Status == reconfigureFailed {
				herr.Reconfigured = true
				return rep, herr
			}
			herr.RolledBackTo, herr.RollbackErr = i.rollback(ctx, target, m.Name, &rep)
			return rep, herr
		}
		return rep, fmt.Errorf("install %s %s: %w", m.Name, m.Version, err)
	}
	return rep, nil
}

// Rollback makes the previous version of package name current again on target (its units
// restarted, health-checked) and returns that version. It fails, changing nothing, when there
// is none.
func (i *Installer) Rollback(ctx context.Context, target sshexec.Target, name string) (string, error) {
	st, err := i.Installed(ctx, target, name)
	if err != nil {
		return "", err
	}
	if st.Previous == "" {
		return "", fmt.Errorf("host %s: package %s has no previous version to roll back to (current: %q)", target.Name, name, st.Current)
	}
	return i.rollback(ctx, target, name, &Report{Host: target.Name, Package: name})
}

// Deactivate stops package name on target: its units are stopped and disabled, and no version
// is active any more (a later Install starts the current version again). Its files stay. It is
// done already when nothing is active.
func (i *Installer) Deactivate(ctx context.Context, target sshexec.Target, name string) (sshexec.Result, error) {
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:  "deactivate " + name,
		Check: fmt.Sprintf("[ ! -e %s/.active ]", quote(i.pkgDir(name))),
		Command: fmt.Sprintf(`set -eu; P=%s
for u in $(ls "$P/current/units" 2>/dev/null); do systemctl disable --now --quiet "$u" || true; done
rm -f "$P/.active" "$P/.joined"`, quote(i.pkgDir(name))),
		Timeout: 2 * time.Minute,
	})
	if err != nil {
		return res, fmt.Errorf("deactivate package %s: %w", name, err)
	}
	return res, nil
}

// Leave runs the leave hook of the current version of package name on target (a host that
// runs it) for the host leaving at leavingIP (packages.Hooks.Leave); nothing when that version
// has none.
func (i *Installer) Leave(ctx context.Context, target sshexec.Target, name, leaving, leavingIP string) (sshexec.Result, error) {
	st, err := i.Installed(ctx, target, name)
	if err != nil {
		return sshexec.Result{}, err
	}
	if st.Current == "" {
		return sshexec.Result{}, fmt.Errorf("host %s: package %s is not installed", target.Name, name)
	}
	m, err := i.readManifest(ctx, target, name, st.Current)
	if err != nil || m.Hooks.Leave == "" {
		return sshexec.Result{}, err
	}
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:    "leave " + name + " " + leaving,
		Command: fmt.Sprintf("cd %s/current && %s LEAVING_NAME=%s LEAVING_IP=%s ./hooks/%s", quote(i.pkgDir(name)), hookEnv(m), quote(leaving), quote(leavingIP), quote(m.Hooks.Leave)),
		Timeout: 5 * time.Minute,
	})
	if err != nil {
		return res, fmt.Errorf("host %s: package %s: take host %s out: %w: %s", target.Name, name, leaving, err, lastLines(res.Stderr, 3))
	}
	return res, nil
}

// State is what a host has of a package.
type State struct {
	// Current is the version in use, Previous the one kept for rollback, Active the one that
	// last passed its health check; "" when none.
	Current, Previous, Active string
	// Config is the ConfigDigest the package was last started with.
	Config string
}

// Installed reads the state of package name on target.
func (i *Installer) Installed(ctx context.Context, target sshexec.Target, name string) (State, error) {
	p := i.pkgDir(name)
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:    "state " + name,
		Command: fmt.Sprintf("for f in current previous; do v=$(readlink %[1]s/$f) || true; echo \"${v#versions/}\"; done; for f in .active .config; do cat %[1]s/$f 2>/dev/null || echo; done", quote(p)),
		Timeout: time.Minute,
	})
	if err != nil {
		return State{}, fmt.Errorf("read state of package %s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if len(lines) != 4 {
		return State{}, fmt.Errorf("host %s: read state of package %s: unexpected output %q", target.Name, name, res.Stdout)
	}
	return State{Current: lines[0], Previous: lines[1], Active: lines[2], Config: lines[3]}, nil
}

// Reachable checks that target answers over SSH: it runs true there. The error is an
// *sshexec.UnreachableError when nothing answers (a host still booting, its sshd not started).
func (i *Installer) Reachable(ctx context.Context, target sshexec.Target) error {
	_, err := i.runner.Run(ctx, target, sshexec.Step{Name: "reachable", Command: "true", Timeout: 30 * time.Second})
	return err
}

// Healthy runs the health check of the current version of package name on target once: nil
// when the version is active (it passed its health check when started) and passes it again.
func (i *Installer) Healthy(ctx context.Context, target sshexec.Target, name string) error {
	st, err := i.Installed(ctx, target, name)
	if err != nil {
		return err
	}
	switch {
	case st.Current == "":
		return fmt.Errorf("host %s: package %s is not installed", target.Name, name)
	case st.Active != st.Current:
		return fmt.Errorf("host %s: package %s %s did not pass its health check when it was last started", target.Name, name, st.Current)
	}
	m, err := i.readManifest(ctx, target, name, st.Current)
	if err != nil || m.Hooks.HealthCheck == "" {
		return err
	}
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:    "health " + name,
		Command: fmt.Sprintf("cd %s/current && %s ./hooks/%s", quote(i.pkgDir(name)), hookEnv(m), quote(m.Hooks.HealthCheck)),
		Timeout: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("host %s: package %s %s: %w: %w: %s", target.Name, name, st.Current, ErrUnhealthy, err, lastLines(res.Stderr, 3))
	}
	return nil
}

// Image is a container image archive to import on hosts.
type Image struct {
	// Name says which image it is, in errors and to the hook (IMAGE_NAME).
	Name string
	// Digest is the archive's sha256, lower-case hex.
	Digest string
	// Archive opens the archive; it is read once per host.
	Archive sshexec.Source
}

// ImagesDir holds, per package, a marker for each image its importImage hook imported.
const ImagesDir = "/var/lib/edgefleet/images"

// ImportImage imports img on target through the importImage hook of the active version of
// package m (which must name one): the archive is streamed over SSH, its sha256 checked on the
// host, then given to the hook; a marker records the import, so an image is imported once per
// host. An archive that does not match its digest, or that the hook refuses, is an error naming
// the image; nothing is recorded then, and the next call tries again.
func (i *Installer) ImportImage(ctx context.Context, target sshexec.Target, m *packages.Manifest, img Image) (sshexec.Result, error) {
	fail := func(res sshexec.Result, err error) (sshexec.Result, error) {
		return res, fmt.Errorf("host %s: image %s (sha256:%s) into package %s: %w", target.Name, img.Name, img.Digest, m.Name, err)
	}
	switch {
	case m.Hooks.ImportImage == "":
		return fail(sshexec.Result{Host: target.Name}, errors.New("the package has no importImage hook"))
	case !digestRE.MatchString(img.Digest):
		return fail(sshexec.Result{Host: target.Name}, errors.New("want a digest of 64 lower-case hex digits"))
	case img.Archive == nil:
		return fail(sshexec.Result{Host: target.Name}, errors.New("no archive to read"))
	}
	marker := quote(path.Join(ImagesDir, m.Name, img.Digest))
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:  "import " + img.Name,
		Check: "[ -e " + marker + " ]",
		Command: fmt.Sprintf(`set -eu
D=%[1]s; want=%[2]s
mkdir -p "$D"
tmp=$(mktemp "$D/.import.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat >"$tmp"
got=$(sha256sum "$tmp" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "received an archive of sha256 $got" >&2; exit 2; fi
(cd %[3]s/current && %[4]s IMAGE_NAME=%[5]s IMAGE_SHA256="$want" ./hooks/%[6]s <"$tmp")
touch %[7]s`, quote(path.Join(ImagesDir, m.Name)), img.Digest, quote(i.pkgDir(m.Name)), hookEnv(m), quote(img.Name), quote(m.Hooks.ImportImage), marker),
		Stdin:   img.Archive,
		Timeout: 10 * time.Minute,
	})
	if err != nil {
		return fail(res, fmt.Errorf("%w: %s", err, lastLines(res.Stderr, 3)))
	}
	return res, nil
}

// WriteFile writes data to path on target with mode (e.g. 0o600), atomically, through the
// command's standard input; it does nothing when the file already holds data with that mode.
func (i *Installer) WriteFile(ctx context.Context, target sshexec.Target, file string, data []byte, mode uint32) (sshexec.Result, error) {
	if !path.IsAbs(file) || path.Clean(file) != file || strings.ContainsAny(file, "'\n\x00") {
		return sshexec.Result{Host: target.Name}, fmt.Errorf("write file on %s: path %q: want a clean absolute path", target.Name, file)
	}
	sum := sha256Hex(data)
	m := fmt.Sprintf("%o", mode&0o7777)
	q := quote(file)
	step := sshexec.Step{
		Name:  "write " + file,
		Check: fmt.Sprintf(`[ "$(sha256sum <%s | cut -d' ' -f1)" = %s ] && [ "$(stat -c %%a %s)" = %s ]`, q, sum, q, m),
		Command: fmt.Sprintf(`set -eu; umask 077; mkdir -p "$(dirname %s)"; t=$(mktemp %s.XXXXXX); cat >"$t"; chmod %s "$t"; mv -f "$t" %s`,
			q, q, m, q),
		Stdin:   sshexec.Bytes(data),
		Timeout: 2 * time.Minute,
	}
	res, err := i.runner.Run(ctx, target, step)
	if err != nil {
		return res, fmt.Errorf("write %s: %w", file, err)
	}
	return res, nil
}

func (i *Installer) pkgDir(name string) string { return path.Join(i.root, name) }

// steps are an install's steps, in order.
func (i *Installer) steps(pkg Package) []sshexec.Step {
	m := pkg.Manifest
	p := quote(i.pkgDir(m.Name))
	d := quote(path.Join(i.pkgDir(m.Name), "versions", m.Version))
	v := quote(m.Version)
	steps := []sshexec.Step{{
		Name:  "stage",
		Check: fmt.Sprintf(`[ "$(cat %s/.digest 2>/dev/null)" = %s ]`, d, pkg.Digest),
		Command: fmt.Sprintf(`set -eu
P=%[1]s; D=%[2]s; want=%[3]s
if [ -e "$D/.digest" ]; then
	echo "package %[4]s %[5]s is on this host already with sha256 $(cat "$D/.digest"), not $want: a changed package needs a new version" >&2; exit 2
fi
mkdir -p "$P/versions"
tmp=$(mktemp -d "$P/.stage.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/package.tar.gz"
got=$(sha256sum "$tmp/package.tar.gz" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "received sha256 $got, want $want" >&2; exit 2; fi
mkdir "$tmp/root"
tar -xzf "$tmp/package.tar.gz" -C "$tmp/root" --no-same-owner
echo "$want" >"$tmp/root/.digest"
rm -rf "$D"
mv "$tmp/root" "$D"`, p, d, pkg.Digest, m.Name, m.Version),
		Stdin:   pkg.Archive,
		Timeout: 10 * time.Minute,
	}}
	if h := m.Hooks.PreInstall; h != "" {
		steps = append(steps, hookStep("pre-install", d, m, h))
	}
	if h := m.Hooks.Join; h != "" && pkg.Membership != nil {
		// Once per host, not per version: the marker is the package's, and Deactivate
		// removes it, so that a host that left joins again when it comes back.
		steps = append(steps, sshexec.Step{
			Name:  "join",
			Check: fmt.Sprintf(`[ -e %s/.joined ]`, p),
			Command: fmt.Sprintf(`set -eu; cd %[1]s; %[2]s SELECTED_HOSTS=%[3]s RUNNING_HOSTS=%[4]s ./hooks/%[5]s; touch %[6]s/.joined`,
				d, hookEnv(m), quote(strings.Join(pkg.Membership.Selected, " ")), quote(strings.Join(pkg.Membership.Running, " ")), quote(h), p),
			Timeout: 5 * time.Minute,
		})
	}
	cfg := quote(pkg.ConfigDigest)
	steps = append(steps, sshexec.Step{
		Name: "activate",
		Check: fmt.Sprintf(`[ "$(cat %[1]s/.active 2>/dev/null)" = %[2]s ] && [ "$(readlink %[1]s/current)" = versions/%[2]s ] && [ "$(cat %[1]s/.config 2>/dev/null)" = %[3]s ]`,
			p, v, cfg),
		Command: fmt.Sprintf(`set -eu
P=%[1]s; V=%[2]s
cur=$(readlink "$P/current" || true)
failed=%[4]d
if [ "$cur" != "versions/$V" ]; then
	if [ -n "$cur" ]; then ln -sfn "$cur" "$P/.previous.new"; mv -T "$P/.previous.new" "$P/previous"; fi
	ln -sfn "versions/$V" "$P/.current.new"; mv -T "$P/.current.new" "$P/current"
elif [ "$(cat "$P/.active" 2>/dev/null)" = "$V" ]; then
	failed=%[5]d # running already: restarted for its configuration
fi
%[3]s
echo %[6]s >"$P/.config.new"; mv -f "$P/.config.new" "$P/.config"`, p, v, i.startScript(m, pkg.Manifest.Version), healthFailed, reconfigureFailed, cfg),
		Timeout: time.Duration(m.HealthCheck.Timeout())*time.Second + 3*time.Minute,
	})
	if h := m.Hooks.PostInstall; h != "" {
		steps = append(steps, hookStep("post-install", d, m, h))
	}
	steps = append(steps, sshexec.Step{
		Name:    "prune",
		Check:   fmt.Sprintf(`cd %s && for d in versions/*/; do d=${d%%/}; [ "$d" = "$(readlink current)" ] || [ "$d" = "$(readlink previous)" ] || exit 1; done`, p),
		Command: fmt.Sprintf(`set -eu; cd %s; for d in versions/*/; do d=${d%%/}; [ "$d" = "$(readlink current)" ] || [ "$d" = "$(readlink previous || true)" ] || rm -rf "./$d"; done`, p),
		Timeout: 5 * time.Minute,
	})
	return steps
}

// hookStep runs hook of m in the version directory dir (quoted) once: a marker named after the
// step records that it ran.
func hookStep(name, dir string, m *packages.Manifest, hook string) sshexec.Step {
	return sshexec.Step{
		Name:    name,
		Check:   fmt.Sprintf(`[ -e %s/.%s-done ]`, dir, name),
		Command: fmt.Sprintf(`set -eu; cd %[1]s; %[2]s ./hooks/%[3]s; touch .%[4]s-done`, dir, hookEnv(m), hook, name),
		Timeout: 5 * time.Minute,
	}
}

// startScript installs the units of the current version of m, restarts them and runs its
// health check; on success it records version as active, else it exits healthFailed.
func (i *Installer) startScript(m *packages.Manifest, version string) string {
	p := quote(i.pkgDir(m.Name))
	var b strings.Builder
	units := quoteAll(m.Units)
	for _, u := range m.Units {
		fmt.Fprintf(&b, "cp %[1]s/current/units/%[2]s %[3]s/.%[2]s.new; mv -f %[3]s/.%[2]s.new %[3]s/%[2]s\n", p, u, quote(i.unitDir))
	}
	if len(m.Units) > 0 {
		fmt.Fprintf(&b, "systemctl daemon-reload\nsystemctl enable --quiet %[1]s\nsystemctl restart %[1]s\n", units)
	}
	if h := m.Hooks.HealthCheck; h != "" {
		fmt.Fprintf(&b, `end=$(( $(date +%%s) + %[1]d ))
until out=$(cd %[2]s/current && %[3]s ./hooks/%[4]s 2>&1); do
	if [ "$(date +%%s)" -ge "$end" ]; then
		echo "health check did not pass within %[1]ds: $out" >&2
		exit ${failed:-%[5]d}
	fi
	sleep %[6]d
done
`, m.HealthCheck.Timeout(), p, hookEnv(m), h, healthFailed, m.HealthCheck.Period())
	}
	fmt.Fprintf(&b, "echo %[2]s >%[1]s/.active.new; mv -f %[1]s/.active.new %[1]s/.active\n", p, quote(version))
	return b.String()
}

// rollback restores the previous version of package name (named in rep) on target, returning
// it; "" with no error when there is none, after stopping the current version's units.
func (i *Installer) rollback(ctx context.Context, target sshexec.Target, name string, rep *Report) (string, error) {
	st, err := i.Installed(ctx, target, name)
	if err != nil {
		return "", err
	}
	p := quote(i.pkgDir(name))
	if st.Previous == "" {
		// Nothing to go back to: stop what the failed version started and leave it inactive.
		res, err := i.runner.Run(ctx, target, sshexec.Step{
			Name: "rollback",
			Command: fmt.Sprintf(`set -eu; P=%[1]s
for u in $(ls "$P/current/units" 2>/dev/null); do systemctl disable --now --quiet "$u" || true; rm -f %[2]s/"$u"; done
systemctl daemon-reload; rm -f "$P/current" "$P/.active"`, p, quote(i.unitDir)),
			Timeout: 2 * time.Minute,
		})
		rep.Steps = append(rep.Steps, res)
		if err != nil {
			return "", fmt.Errorf("stop package %s: %w", name, err)
		}
		return "", nil
	}
	prev, err := i.readManifest(ctx, target, name, st.Previous)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "set -eu\nP=%s\n", p)
	// Units of the failed version that the previous one does not have are stopped and removed.
	fmt.Fprintf(&b, `for u in $(ls "$P/current/units" 2>/dev/null); do [ -e "$P/previous/units/$u" ] || { systemctl disable --now --quiet "$u" || true; rm -f %s/"$u"; }; done
`, quote(i.unitDir))
	fmt.Fprintf(&b, "ln -sfn versions/%s \"$P/.current.new\"; mv -T \"$P/.current.new\" \"$P/current\"; rm -f \"$P/previous\"\n", quote(st.Previous))
	b.WriteString(i.startScript(prev, st.Previous))
	res, err := i.runner.Run(ctx, target, sshexec.Step{
		Name:    "rollback",
		Command: b.String(),
		Timeout: time.Duration(prev.HealthCheck.Timeout())*time.Second + 3*time.Minute,
	})
	rep.Steps = append(rep.Steps, res)
	if err != nil {
		return "", fmt.Errorf("roll package %s back to %s: %w", name, st.Previous, err)
	}
	return st.Previous, nil
}

// readManifest reads the manifest of version of package name from target.
func (i *Installer) readManifest(ctx context.Context, target sshexec.Target, name, version string) (*packages.Manifest, error) {
	f := path.Join(i.pkgDir(name), "versions", version, packages.ManifestFile)
	res, err := i.runner.Run(ctx, target, sshexec.Step{Name: "read " + f, Command: "cat " + quote(f), Timeout: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("read manifest of package %s %s: %w", name, version, err)
	}
	m := &packages.Manifest{}
	if err := yaml.Unmarshal(res.Stdout, m); err != nil {
		return nil, fmt.Errorf("host %s: manifest of package %s %s: %w", target.Name, name, version, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("host %s: %w", target.Name, err)
	}
	return m, nil
}

// ConfigDir is where a package's per-host configuration goes: hooks and units find it there
// (hooks in $PACKAGE_CONFIG).
func ConfigDir(name string) string { return path.Join("/etc/edgefleet", name) }

// hookEnv sets the environment of a package's hooks.
func hookEnv(m *packages.Manifest) string {
	return fmt.Sprintf("PACKAGE_NAME=%s PACKAGE_VERSION=%s PACKAGE_CONFIG=%s", quote(m.Name), quote(m.Version), quote(ConfigDir(m.Name)))
}

// quote quotes s for the POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return strings.Join(q, " ")
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// lastLines is the last n lines of out, trimmed.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
