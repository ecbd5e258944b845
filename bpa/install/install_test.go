package install_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/testhosts"
)

// demoPackage builds version of package "demo": a service that records its version in
// /run/edgefleet-demo and sleeps; hooks count their runs in /var/lib/edgefleet-demo/; the health
// check passes when the service is active and reports this version, or never when healthy is
// false.
func demoPackage(t *testing.T, version string, healthy bool) install.Package {
	t.Helper()
	dir := t.TempDir()
	health := fmt.Sprintf("#!/bin/sh\nsystemctl is-active --quiet edgefleet-demo.service && grep -qx '%s' /run/edgefleet-demo\n", version)
	if !healthy {
		health = "#!/bin/sh\necho 'demo is broken' >&2\nexit 1\n"
	}
	for name, c := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"files/bin/demo":               {fmt.Sprintf("#!/bin/sh\necho '%s' >/run/edgefleet-demo\nexec sleep infinity\n", version), 0o755},
		"units/edgefleet-demo.service": {"[Unit]\nDescription=edgefleet demo package\n[Service]\nExecStart=" + install.DefaultRoot + "/demo/current/files/bin/demo\n[Install]\nWantedBy=multi-user.target\n", 0o644},
		"hooks/pre-install":            {"#!/bin/sh\nset -e\nmkdir -p /var/lib/edgefleet-demo\necho \"$PACKAGE_VERSION\" >>/var/lib/edgefleet-demo/pre-install\n", 0o755},
		"hooks/post-install":           {"#!/bin/sh\nset -e\necho \"$PACKAGE_VERSION $PACKAGE_CONFIG\" >>/var/lib/edgefleet-demo/post-install\n", 0o755},
		"hooks/health-check":           {health, 0o755},
		"hooks/import-image":           {"#!/bin/sh\nset -e\nmkdir -p /var/lib/edgefleet-demo/images\ncat >\"/var/lib/edgefleet-demo/images/$IMAGE_NAME\"\n", 0o755},
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	m, err := packages.Build(&buf, packages.Manifest{
		Name: "demo", Version: version, Architecture: "all",
		Units:       []string{"edgefleet-demo.service"},
		Hooks:       packages.Hooks{PreInstall: "pre-install", PostInstall: "post-install", HealthCheck: "health-check", ImportImage: "import-image"},
		HealthCheck: packages.HealthCheck{TimeoutSeconds: 3},
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	// What the BPA does with an archive from the site cache: read it against its manifest.
	if _, err := packages.Read(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return install.Package{Manifest: m, Digest: hex.EncodeToString(sum[:]), Archive: sshexec.Bytes(buf.Bytes())}
}

// stopAfter is a Runner that cancels its context once the named step has run: the BPA killed
// right after that step.
type stopAfter struct {
	install.Runner
	step   string
	cancel context.CancelFunc
}

func (s *stopAfter) Run(ctx context.Context, target sshexec.Target, step sshexec.Step) (sshexec.Result, error) {
	res, err := s.Runner.Run(ctx, target, step)
	if step.Name == s.step {
		s.cancel()
	}
	return res, err
}

// TestOnARealHost installs, reinstalls, upgrades, rolls back and refuses packages on a real host
// over SSH (needs root).
func TestOnARealHost(t *testing.T) {
	signer, authorized := testhosts.SSHKey(t)
	hn := testhosts.StartHosts(t, 1, authorized, testhosts.HostOptions{})
	h := hn.Hosts[0]
	exec := sshexec.New(signer, &sshexec.MemoryHostKeys{}, sshexec.Options{})
	t.Cleanup(exec.Close)
	in := install.New(exec)
	target := sshexec.Target{Name: h.Name, Addr: h.SSHAddr()}
	ctx := t.Context()
	if err := in.Reachable(ctx, target); err != nil {
		t.Fatalf("the booted host does not answer: %v", err)
	}
	if err := in.Reachable(ctx, sshexec.Target{Name: "nobody", Addr: hn.Gateway.String() + ":1"}); !errors.As(err, new(*sshexec.UnreachableError)) {
		t.Errorf("an address nothing listens on: %v, want an *sshexec.UnreachableError", err)
	}

	onHost := func(t *testing.T, cmd string) string {
		t.Helper()
		out, err := h.Exec(ctx, "sh", "-c", cmd)
		if err != nil {
			t.Fatalf("%s: %v: %s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	state := func(t *testing.T, want install.State) {
		t.Helper()
		got, err := in.Installed(ctx, target, "demo")
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("state %+v, want %+v", got, want)
		}
	}
	running := func(t *testing.T, version string) {
		t.Helper()
		if got := onHost(t, "systemctl is-active edgefleet-demo.service; cat /run/edgefleet-demo"); got != "active\n"+version {
			t.Errorf("service: %q, want active running %s", got, version)
		}
	}
	all := []string{"stage", "pre-install", "activate", "post-install", "prune"}

	t.Run("the first install runs every step; again, none", func(t *testing.T) {
		rep, err := in.Install(ctx, target, demoPackage(t, "1.0", true))
		if err != nil {
			t.Fatal(err)
		}
		// Nothing to prune yet.
		if want := all[:4]; !slices.Equal(rep.Ran(), want) {
			t.Errorf("ran %v, want %v", rep.Ran(), want)
		}
		if rep.Duration <= 0 {
			t.Errorf("report's duration %s", rep.Duration)
		}
		state(t, install.State{Current: "1.0", Active: "1.0"})
		running(t, "1.0")
		rep, err = in.Install(ctx, target, demoPackage(t, "1.0", true))
		if err != nil || len(rep.Ran()) != 0 {
			t.Errorf("reinstall ran %v (%v), want nothing", rep.Ran(), err)
		}
		if got := onHost(t, "cat /var/lib/edgefleet-demo/pre-install /var/lib/edgefleet-demo/post-install"); got != "1.0\n1.0 /etc/edgefleet/demo" {
			t.Errorf("hook runs: %q", got)
		}
		if got := onHost(t, "systemctl is-enabled edgefleet-demo.service"); got != "enabled" {
			t.Errorf("unit %s", got)
		}
	})

	t.Run("an install stopped after any step resumes without redoing it", func(t *testing.T) {
		for k, stop := range all {
			version := fmt.Sprintf("2.%d", k)
			pkg := demoPackage(t, version, true)
			stopCtx, cancel := context.WithCancel(ctx)
			_, err := install.New(&stopAfter{Runner: exec, step: stop, cancel: cancel}).Install(stopCtx, target, pkg)
			cancel()
			if k < len(all)-1 && !errors.Is(err, context.Canceled) {
				t.Fatalf("stopped after %s: err %v, want cancelled", stop, err)
			}
			rep, err := in.Install(ctx, target, pkg)
			if err != nil {
				t.Fatalf("resume after %s: %v", stop, err)
			}
			want := slices.Clone(all[k+1:])
			if version == "2.0" {
				want = slices.DeleteFunc(want, func(s string) bool { return s == "prune" }) // 1.0 is previous: nothing to prune
			}
			if !slices.Equal(rep.Ran(), want) {
				t.Errorf("resume after %s ran %v, want %v", stop, rep.Ran(), want)
			}
			running(t, version)
		}
		state(t, install.State{Current: "2.4", Previous: "2.3", Active: "2.4"})
		// Every version ran its pre-install hook once; prune kept current and previous.
		if got := onHost(t, "cat /var/lib/edgefleet-demo/pre-install | tr '\\n' ' '; ls "+install.DefaultRoot+"/demo/versions | tr '\\n' ' '"); got != "1.0 2.0 2.1 2.2 2.3 2.4 2.3 2.4" {
			t.Errorf("pre-install runs, versions kept: %q", got)
		}
	})

	t.Run("rollback restores the previous version", func(t *testing.T) {
		v, err := in.Rollback(ctx, target, "demo")
		if err != nil || v != "2.3" {
			t.Fatalf("rolled back to %q (%v), want 2.3", v, err)
		}
		state(t, install.State{Current: "2.3", Active: "2.3"})
		running(t, "2.3")
		if _, err := in.Rollback(ctx, target, "demo"); err == nil || !strings.Contains(err.Error(), "no previous version") {
			t.Errorf("second rollback: %v", err)
		}
		running(t, "2.3") // a refused rollback changes nothing
		rep, err := in.Install(ctx, target, demoPackage(t, "2.4", true))
		if err != nil || !slices.Equal(rep.Ran(), []string{"activate"}) {
			t.Errorf("reinstall of 2.4 after rollback ran %v (%v), want activate only (it was staged, its hooks ran, nothing to prune)", rep.Ran(), err)
		}
		state(t, install.State{Current: "2.4", Previous: "2.3", Active: "2.4"})
	})

	t.Run("a failing health check rolls back", func(t *testing.T) {
		_, err := in.Install(ctx, target, demoPackage(t, "3.0", false))
		var herr *install.HealthError
		if !errors.As(err, &herr) {
			t.Fatalf("err %v, want a *HealthError", err)
		}
		if herr.Host != h.Name || herr.Version != "3.0" || herr.RolledBackTo != "2.4" || herr.RollbackErr != nil || !strings.Contains(herr.Output, "demo is broken") {
			t.Errorf("health error %+v", herr)
		}
		state(t, install.State{Current: "2.4", Active: "2.4"})
		running(t, "2.4")
	})

	t.Run("bytes that do not match the digest are refused", func(t *testing.T) {
		pkg := demoPackage(t, "4.0", true)
		other := demoPackage(t, "4.1", true)
		pkg.Archive = other.Archive
		_, err := in.Install(ctx, target, pkg)
		if err == nil || !strings.Contains(err.Error(), "received sha256") {
			t.Fatalf("err %v, want a digest mismatch", err)
		}
		if got := onHost(t, "ls "+install.DefaultRoot+"/demo/versions | tr '\\n' ' '"); got != "2.3 2.4 3.0" {
			t.Errorf("versions on the host: %q", got)
		}
		// The same version with other bytes: a changed package needs a new version.
		pkg = demoPackage(t, "2.4", false)
		if _, err := in.Install(ctx, target, pkg); err == nil || !strings.Contains(err.Error(), "needs a new version") {
			t.Errorf("changed 2.4: %v", err)
		}
		running(t, "2.4")
	})

	t.Run("an image goes through the package's import hook once; a corrupted archive is refused, naming it", func(t *testing.T) {
		m := demoPackage(t, "2.4", true).Manifest // what runs
		data := []byte("an image archive\n")
		sum := sha256.Sum256(data)
		img := install.Image{Name: "pause", Digest: hex.EncodeToString(sum[:]), Archive: sshexec.Bytes(data)}
		res, err := in.ImportImage(ctx, target, m, img)
		if err != nil || res.Skipped {
			t.Fatalf("import: skipped %v, %v", res.Skipped, err)
		}
		if got := onHost(t, "cat /var/lib/edgefleet-demo/images/pause"); got != strings.TrimSpace(string(data)) {
			t.Errorf("the hook got %q", got)
		}
		if res, err := in.ImportImage(ctx, target, m, img); err != nil || !res.Skipped {
			t.Errorf("import again: skipped %v, %v; want found done", res.Skipped, err)
		}
		bad := install.Image{Name: "app", Digest: img.Digest, Archive: sshexec.Bytes([]byte("another archive"))}
		bad.Digest = strings.Repeat("e", 64)
		_, err = in.ImportImage(ctx, target, m, bad)
		if err == nil || !strings.Contains(err.Error(), "image app (sha256:eeee") || !strings.Contains(err.Error(), "received an archive of sha256") {
			t.Fatalf("err %v, want the corrupted archive refused, naming the image", err)
		}
		if got := onHost(t, "ls -A /var/lib/edgefleet-demo/images "+install.ImagesDir+"/demo | tr '\\n' ' '"); strings.Contains(got, "app") || strings.Contains(got, "eeee") || strings.Contains(got, ".import") {
			t.Errorf("the refused import left %q", got)
		}
	})

	t.Run("deactivate stops the units, once; an install starts them again", func(t *testing.T) {
		res, err := in.Deactivate(ctx, target, "demo")
		if err != nil || res.Skipped {
			t.Fatalf("deactivate: skipped %v, %v", res.Skipped, err)
		}
		if got := onHost(t, "systemctl is-active edgefleet-demo.service; systemctl is-enabled edgefleet-demo.service || true"); got != "inactive\ndisabled" {
			t.Errorf("service after deactivate: %q, want inactive and disabled", got)
		}
		if st, err := in.Installed(ctx, target, "demo"); err != nil || st.Current != "2.4" || st.Active != "" {
			t.Errorf("state %+v (%v), want 2.4 current and nothing active", st, err)
		}
		if res, err := in.Deactivate(ctx, target, "demo"); err != nil || !res.Skipped {
			t.Errorf("deactivate again: skipped %v, %v; want found done", res.Skipped, err)
		}
		if _, err := in.Install(ctx, target, demoPackage(t, "2.4", true)); err != nil {
			t.Fatal(err)
		}
		running(t, "2.4")
	})

	t.Run("files are written once, with their mode", func(t *testing.T) {
		data := []byte("not really a key\n")
		res, err := in.WriteFile(ctx, target, "/etc/edgefleet/demo/pki/demo.key", data, 0o600)
		if err != nil || res.Skipped {
			t.Fatalf("write: skipped %v, %v", res.Skipped, err)
		}
		if got := onHost(t, "stat -c %a /etc/edgefleet/demo/pki/demo.key; cat /etc/edgefleet/demo/pki/demo.key"); got != "600\nnot really a key" {
			t.Errorf("file: %q", got)
		}
		if res, err := in.WriteFile(ctx, target, "/etc/edgefleet/demo/pki/demo.key", data, 0o600); err != nil || !res.Skipped {
			t.Errorf("rewrite: skipped %v, %v", res.Skipped, err)
		}
		if _, err := in.WriteFile(ctx, target, "etc/relative", data, 0o600); err == nil || !strings.Contains(err.Error(), "clean absolute path") {
			t.Errorf("relative path: %v", err)
		}
	})
}

// TestFirstInstallFailingHealth: with no version to go back to, the failed one's units are
// stopped and nothing is current (needs root).
func TestFirstInstallFailingHealth(t *testing.T) {
	signer, authorized := testhosts.SSHKey(t)
	h := testhosts.StartHosts(t, 1, authorized, testhosts.HostOptions{}).Hosts[0]
	exec := sshexec.New(signer, &sshexec.MemoryHostKeys{}, sshexec.Options{DefaultTimeout: time.Minute})
	t.Cleanup(exec.Close)
	in := install.New(exec)
	target := sshexec.Target{Name: h.Name, Addr: h.SSHAddr()}
	_, err := in.Install(t.Context(), target, demoPackage(t, "1.0", false))
	var herr *install.HealthError
	if !errors.As(err, &herr) || herr.RolledBackTo != "" || !strings.Contains(err.Error(), "no previous version") {
		t.Fatalf("err %v, want a *HealthError without rollback", err)
	}
	out, _ := h.Exec(t.Context(), "sh", "-c", "systemctl is-active edgefleet-demo.service; ls /etc/systemd/system/edgefleet-demo.service "+install.DefaultRoot+"/demo/current 2>&1 | wc -l")
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "inactive") {
		t.Errorf("after the failed first install: %q, want the unit inactive", got)
	}
	st, err := in.Installed(t.Context(), target, "demo")
	if err != nil || st != (install.State{}) {
		t.Errorf("state %+v (%v), want nothing current", st, err)
	}
}
