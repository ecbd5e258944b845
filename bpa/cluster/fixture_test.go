package cluster_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/install/fixture"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/secrets/secretsfake"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// fakePkg is a package for fake hosts: its manifest says everything the BPA needs.
func fakePkg(name, version string, hosts packages.HostSelector, after []string, config ...packages.ConfigFile) install.Package {
	return install.Package{
		Manifest: &packages.Manifest{
			APIVersion: packages.APIVersion, Name: name, Version: version, Architecture: "amd64",
			Hosts: hosts, After: after, Config: config, Hooks: packages.Hooks{HealthCheck: "health-check"},
		},
		Digest: fmt.Sprintf("%x", sha256.Sum256([]byte(name+" "+version))),
	}
}

// fakeSpec is a cluster of two control-plane hosts and two workers, running a database on the
// control plane (its members a group: join and leave hooks), an API server after it, and an
// agent on every host after that.
func fakeSpec() cluster.Spec {
	s := cluster.Spec{Name: "app", KubernetesVersion: "v1.36.3"}
	for i, n := range []string{"cp-0", "cp-1", "w-0", "w-1"} {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)})
		s.Hosts = append(s.Hosts, cluster.Host{Name: n, IP: ip, SSH: sshexec.Target{Name: n, Addr: ip.String() + ":22"}, ControlPlane: i < 2})
	}
	db := fakePkg("db", "1", packages.HostsControlPlane, nil,
		packages.ConfigFile{Path: "/etc/db/server.key", PKI: "pki/etcd/server.key"},
		packages.ConfigFile{Path: "/etc/db/env", Template: "NAME={{.Node.Name}}"})
	db.Manifest.Hooks.Join, db.Manifest.Hooks.Leave = "join", "leave"
	s.Packages = []install.Package{
		db,
		fakePkg("api", "1", packages.HostsControlPlane, []string{"db"}),
		fakePkg("agent", "1", packages.HostsAll, []string{"api"},
			packages.ConfigFile{Path: "/etc/agent/env", Template: "NODE={{.Node.Name}} VERSION={{.Cluster.KubernetesVersion}} PODS={{.Node.PodCIDR}}"},
			packages.ConfigFile{Path: "/etc/agent/control-plane", Template: "{{range .ControlPlane}}{{.Name}} {{end}}"},
			packages.ConfigFile{Path: "/etc/agent/kubeconfig", PKI: "kubelet.conf"},
			packages.ConfigFile{Path: "/etc/agent/local.conf", PKI: "kubelet.conf", Server: "https://127.0.0.1:6444"}),
	}
	return s
}

// installs are the "<host> <package>: activate" lines of a log, in order.
func activations(log []string) []string {
	var out []string
	for _, l := range log {
		if strings.HasSuffix(l, ": activate") {
			out = append(out, strings.TrimSuffix(l, ": activate"))
		}
	}
	return out
}

// TestBringUpOnFakeHosts takes bring-up through its transitions on fake hosts: a first install
// level by level on the hosts each manifest selects, a run that finds everything done, a step
// failing on one host (the level stops, the next run resumes), a health check failing, and a
// configuration change that restarts exactly the packages whose files changed.
func TestBringUpOnFakeHosts(t *testing.T) {
	ctx := t.Context()
	hosts := fixture.New()
	bu := cluster.New(hosts, &secretsfake.Store{})
	spec := fakeSpec()

	// Each level that ran anything is logged as it ends, with the context's logger.
	var logged []string
	ctx = logr.NewContext(ctx, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))

	t.Run("first install: level by level, where each manifest says", func(t *testing.T) {
		res, err := bu.Run(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		for i, pkgs := range []string{"db", "api", "agent"} {
			want := fmt.Sprintf(`"msg"="installed level" "index"=%d "packages"=%q "hosts"=%d`, i, pkgs, len(res.Levels[i].Jobs))
			if i >= len(logged) || !strings.Contains(logged[i], want) || !strings.Contains(logged[i], "stage ") {
				t.Errorf("log line %d: %q, want it to say %s and the step times", i, logged[min(i, len(logged)-1)], want)
			}
		}
		if len(logged) != 3 {
			t.Errorf("logged %d lines, want one per level: %q", len(logged), logged)
		}
		// The result, level by level: its packages, a job per package and host, the steps by kind.
		for i, want := range []struct {
			pkgs  []string
			jobs  int
			kinds []string
		}{{[]string{"db"}, 2, []string{"write", "stage", "join", "activate"}}, {[]string{"api"}, 2, []string{"stage", "activate"}}, {[]string{"agent"}, 4, []string{"write", "stage", "activate"}}} {
			if i >= len(res.Levels) {
				t.Fatalf("%d levels in the result, want 3", len(res.Levels))
			}
			l := res.Levels[i]
			kinds := slices.Sorted(maps.Keys(l.StepTimes()))
			if !slices.Equal(l.Packages, want.pkgs) || len(l.Jobs) != want.jobs || !slices.Equal(kinds, slices.Sorted(slices.Values(want.kinds))) || l.Ran() == 0 {
				t.Errorf("level %d: packages %v, %d jobs, steps %v, %d ran; want %v, %d jobs, steps %v", i, l.Packages, len(l.Jobs), kinds, l.Ran(), want.pkgs, want.jobs, want.kinds)
			}
			if s := l.Slowest(); !slices.Contains(l.Packages, s.Package) {
				t.Errorf("level %d: slowest job %s/%s is not of the level", i, s.Host, s.Package)
			}
		}
		got := activations(hosts.Log())
		// Each level's hosts run at once: compare per level, in level order.
		levels := [][]string{{"cp-0 db", "cp-1 db"}, {"cp-0 api", "cp-1 api"}, {"cp-0 agent", "cp-1 agent", "w-0 agent", "w-1 agent"}}
		if want := slices.Concat(levels...); len(got) != len(want) {
			t.Fatalf("activated %v, want %v", got, want)
		}
		at := 0
		for _, l := range levels {
			if level := slices.Sorted(slices.Values(got[at : at+len(l)])); !slices.Equal(level, l) {
				t.Errorf("activations %d..%d: %v, want %v (all: %v)", at, at+len(l), level, l, got)
			}
			at += len(l)
		}
		f, ok := hosts.File("w-1", "/etc/agent/env")
		if want := "NODE=w-1 VERSION=v1.36.3 PODS=10.244.13.0/24"; !ok || string(f.Data) != want || f.Mode != 0o644 {
			t.Errorf("w-1's /etc/agent/env: %q %o (%v), want %q 0644", f.Data, f.Mode, ok, want)
		}
		if f, ok := hosts.File("cp-1", "/etc/db/env"); !ok || string(f.Data) != "NAME=cp-1" {
			t.Errorf("cp-1's /etc/db/env: %q (%v)", f.Data, ok)
		}
		if f, ok := hosts.File("w-0", "/etc/agent/control-plane"); !ok || string(f.Data) != "cp-0 cp-1 " {
			t.Errorf("w-0's /etc/agent/control-plane: %q (%v)", f.Data, ok)
		}
		for _, p := range []struct{ host, path string }{{"cp-0", "/etc/db/server.key"}, {"w-0", "/etc/agent/kubeconfig"}} {
			if f, ok := hosts.File(p.host, p.path); !ok || f.Mode != 0o600 || len(f.Data) == 0 {
				t.Errorf("%s:%s: mode %o, %d bytes (%v); want a key written 0600", p.host, p.path, f.Mode, len(f.Data), ok)
			}
		}
		// The same credentials, the cluster's endpoint or the one the manifest names.
		for _, kc := range []struct{ path, server string }{{"/etc/agent/kubeconfig", "https://10.0.0.10:6443"}, {"/etc/agent/local.conf", "https://127.0.0.1:6444"}} {
			f, _ := hosts.File("w-0", kc.path)
			cfg, err := clientcmd.RESTConfigFromKubeConfig(f.Data)
			if err != nil {
				t.Fatalf("w-0's %s: %v", kc.path, err)
			}
			if cfg.Host != kc.server || !strings.Contains(string(cfg.CertData), "BEGIN CERTIFICATE") || len(cfg.KeyData) == 0 {
				t.Errorf("w-0's %s: server %q, %d bytes of certificate and %d of key; want server %q and the node's credentials", kc.path, cfg.Host, len(cfg.CertData), len(cfg.KeyData), kc.server)
			}
		}
		if _, ok := hosts.File("w-0", "/etc/db/env"); ok {
			t.Error("w-0 got the control plane's database configuration")
		}
	})

	t.Run("again: nothing to do", func(t *testing.T) {
		before := len(hosts.Log())
		res, err := bu.Run(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if ran := hosts.Log()[before:]; len(ran) != 0 || res.Files != 0 || len(res.Ran()) != 0 {
			t.Errorf("ran %v, %d files written", ran, res.Files)
		}
		for i, l := range res.Levels {
			if l.Ran() != 0 || len(l.StepTimes()) != 0 {
				t.Errorf("level %d: %d steps ran (%v), want none", i, l.Ran(), l.StepTimes())
			}
		}
		if len(logged) != 3 {
			t.Errorf("a run that found everything done logged %q", logged[3:])
		}
	})

	t.Run("a control-plane host that does not answer: nothing is installed anywhere, and the error names it", func(t *testing.T) {
		withExtra := spec
		withExtra.Packages = append(slices.Clone(spec.Packages), fakePkg("early", "1", packages.HostsAll, nil))
		hosts.FailStep("cp-1", "", fixture.StepReachable, 1, &sshexec.UnreachableError{Host: "cp-1", Addr: "10.0.0.11:22", Err: errors.New("connection refused")})
		before := len(hosts.Log())
		res, err := bu.Run(ctx, withExtra)
		if unreachable := (*sshexec.UnreachableError)(nil); !errors.As(err, &unreachable) || unreachable.Host != "cp-1" {
			t.Fatalf("err %v, want cp-1 unreachable", err)
		}
		if ran := hosts.Log()[before:]; len(ran) != 0 || len(res.Levels) != 0 {
			t.Errorf("ran %v (%d levels) while cp-1 did not answer, want nothing", ran, len(res.Levels))
		}
		if _, err := bu.Run(ctx, spec); err != nil {
			t.Fatalf("the next run, cp-1 answering: %v", err)
		}
	})

	t.Run("a worker that does not answer is left out, the others installed; the next run joins it", func(t *testing.T) {
		withExtra := spec
		withExtra.Packages = append(slices.Clone(spec.Packages), fakePkg("late", "1", packages.HostsAll, nil))
		refused := &sshexec.UnreachableError{Host: "w-1", Addr: "10.0.0.13:22", Err: errors.New("connection refused")}
		hosts.FailStep("w-1", "", fixture.StepReachable, 1, refused)
		before := len(hosts.Log())
		res, err := bu.Run(ctx, withExtra)
		if err != nil {
			t.Fatalf("run with w-1 not answering: %v", err)
		}
		if len(res.LeftOut) != 1 || res.LeftOut[0].Host != "w-1" || !errors.Is(res.LeftOut[0].Err, refused) {
			t.Errorf("left out %+v, want w-1 and why", res.LeftOut)
		}
		if got := slices.Sorted(slices.Values(activations(hosts.Log()[before:]))); !slices.Equal(got, []string{"cp-0 late", "cp-1 late", "w-0 late"}) {
			t.Errorf("activated %v, want late on every host but w-1", got)
		}
		before = len(hosts.Log())
		res, err = bu.Run(ctx, withExtra)
		if err != nil || len(res.LeftOut) != 0 {
			t.Fatalf("the next run, w-1 answering: left out %+v, %v", res.LeftOut, err)
		}
		if got := activations(hosts.Log()[before:]); !slices.Equal(got, []string{"w-1 late"}) {
			t.Errorf("activated %v, want late on w-1 alone", got)
		}
	})

	t.Run("a new package that fails to stage on one host stops there, and the next run resumes", func(t *testing.T) {
		withExtra := spec
		withExtra.Packages = append(slices.Clone(spec.Packages), fakePkg("extra", "1", packages.HostsWorker, []string{"agent"}), fakePkg("last", "1", packages.HostsAll, []string{"extra"}))
		hosts.FailStep("w-1", "extra", fixture.StepStage, 1, errors.New("connection reset"))
		before := len(hosts.Log())
		res, err := bu.Run(ctx, withExtra)
		if err == nil || !strings.Contains(err.Error(), "host w-1: package extra 1") || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("err %v, want one naming w-1, extra and the cause", err)
		}
		if last := res.Levels[len(res.Levels)-1]; !slices.Equal(last.Packages, []string{"extra"}) || len(last.Jobs) != 2 {
			t.Errorf("the result's last level: %v, %d jobs; want the failed level, extra on w-0 and w-1", last.Packages, len(last.Jobs))
		}
		if last := logged[len(logged)-1]; !strings.Contains(last, `"msg"="level not installed" "index"=3 "packages"="extra" "hosts"=2`) {
			t.Errorf("the failed level was logged %q, want it not installed", last)
		}
		ran := hosts.Log()[before:]
		if !slices.Equal(activations(ran), []string{"w-0 extra"}) {
			t.Errorf("activated %v, want only w-0 extra (the level stops; last comes after it)", activations(ran))
		}
		before = len(hosts.Log())
		if _, err := bu.Run(ctx, withExtra); err != nil {
			t.Fatal(err)
		}
		ran = hosts.Log()[before:]
		if got := activations(ran); len(got) != 5 || got[0] != "w-1 extra" {
			t.Errorf("the resumed run activated %v, want w-1 extra, then last on the four hosts", got)
		}
		if st := hosts.State("cp-0", "extra"); st.Current != "" {
			t.Errorf("cp-0 has extra %+v, a worker package", st)
		}
	})

	t.Run("a first install failing its health check has nothing to roll back to", func(t *testing.T) {
		s := spec
		s.Packages = append(slices.Clone(spec.Packages), fakePkg("flaky", "1", packages.HostsControlPlane, nil))
		hosts.FailHealth("cp-1", "flaky", "1", 1)
		_, err := bu.Run(ctx, s)
		var herr *install.HealthError
		if !errors.As(err, &herr) || herr.Host != "cp-1" || herr.RolledBackTo != "" || !strings.Contains(err.Error(), "no previous version") {
			t.Fatalf("err %v, want cp-1's health check failing with nothing to roll back to", err)
		}
		if st := hosts.State("cp-1", "flaky"); st.Current != "" || st.Active != "" {
			t.Errorf("cp-1 keeps flaky %+v", st)
		}
		if _, err := bu.Run(ctx, s); err != nil {
			t.Fatalf("the next run: %v", err)
		}
	})

	t.Run("images go into every host of the package that imports them, once, after it", func(t *testing.T) {
		s := spec
		runtime := fakePkg("runtime", "1", packages.HostsAll, []string{"agent"})
		runtime.Manifest.Hooks.ImportImage = "import-image"
		s.Packages = append(slices.Clone(spec.Packages), runtime)
		for _, n := range []string{"pause", "app"} {
			s.Images = append(s.Images, install.Image{Name: n, Digest: fmt.Sprintf("%x", sha256.Sum256([]byte(n)))})
		}
		hosts.FailStep("w-0", "app", fixture.StepImport, 1, errors.New("ctr: unexpected EOF"))
		before := len(hosts.Log())
		_, err := bu.Run(ctx, s)
		if err == nil || !strings.Contains(err.Error(), "host w-0: image app (sha256:") || !strings.Contains(err.Error(), "ctr: unexpected EOF") {
			t.Fatalf("err %v, want w-0's import of app failing, naming both", err)
		}
		ran := hosts.Log()[before:]
		for i, l := range ran {
			if strings.Contains(l, ": import ") && !slices.Contains(ran[:i], strings.Fields(l)[0]+" runtime: activate") {
				t.Errorf("%s before the runtime was active there", l)
			}
		}
		res, err := bu.Run(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Images != 1 {
			t.Errorf("the next run imported %d images, want 1 (app on w-0)", res.Images)
		}
		for _, h := range s.Hosts {
			if got := hosts.Images(h.SSH.Name, "runtime"); len(got) != 2 {
				t.Errorf("%s imported %d images, want pause and app", h.Name, len(got))
			}
		}
		if hosts.Images("w-0", "agent") != nil {
			t.Error("a package without an importImage hook imported images")
		}
	})

	t.Run("a configuration change restarts the packages whose files changed, one host at a time", func(t *testing.T) {
		s := spec
		s.KubernetesVersion = "v1.36.4" // in the agent's environment only
		before := len(hosts.Log())
		if _, err := bu.Run(ctx, s); err != nil {
			t.Fatal(err)
		}
		// In the spec's order, each host's files written after the previous host's restart.
		var got []string
		for _, l := range hosts.Log()[before:] {
			if strings.HasSuffix(l, "/etc/agent/env: write") || strings.HasSuffix(l, "agent: activate") {
				got = append(got, l)
			}
		}
		var want []string
		for _, h := range []string{"cp-0", "cp-1", "w-0", "w-1"} {
			want = append(want, h+" /etc/agent/env: write", h+" agent: activate")
		}
		if !slices.Equal(got, want) {
			t.Errorf("restarted as\n%s\nwant one host at a time:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// A restart for configuration that fails its health check rolls nothing back, and
		// stops the restarts: w-1 keeps its running configuration, files included.
		s.KubernetesVersion = "v1.36.5"
		hosts.FailHealth("w-0", "agent", "1", 1)
		_, err := bu.Run(ctx, s)
		var herr *install.HealthError
		if !errors.As(err, &herr) || !herr.Reconfigured || herr.Host != "w-0" || !strings.Contains(err.Error(), "nothing was rolled back") {
			t.Fatalf("err %v, want w-0's restart for its configuration failing, nothing rolled back", err)
		}
		if !strings.Contains(err.Error(), "host w-1: package agent not restarted for its new configuration: the restart on host w-0 failed first") {
			t.Errorf("err %v, want it to say w-1 was not restarted, and why", err)
		}
		if st := hosts.State("w-0", "agent"); st.Current != "1" || st.Active != "1" {
			t.Errorf("w-0's agent %+v, want still 1", st)
		}
		if f, _ := hosts.File("w-1", "/etc/agent/env"); !strings.Contains(string(f.Data), "v1.36.4") {
			t.Errorf("w-1's /etc/agent/env after w-0 failed: %q, want its running configuration (v1.36.4)", f.Data)
		}
		before = len(hosts.Log())
		if _, err := bu.Run(ctx, s); err != nil {
			t.Fatalf("the next run: %v", err)
		}
		if got := activations(hosts.Log()[before:]); !slices.Equal(got, []string{"w-0 agent", "w-1 agent"}) {
			t.Errorf("the next run restarted %v, want w-0's and w-1's agent", got)
		}
	})
}

// broughtUp is the fakeSpec cluster brought up on fake hosts.
func broughtUp(t *testing.T) (*fixture.Hosts, *cluster.BringUp, cluster.Spec) {
	t.Helper()
	hosts := fixture.New()
	bu := cluster.New(hosts, &secretsfake.Store{})
	spec := fakeSpec()
	if _, err := bu.Run(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	return hosts, bu, spec
}

// TestPatchOnFakeHosts: a patch goes one host at a time, control plane first, only on the hosts
// the package runs on; it does not start while another host of the package is unhealthy; a host
// failing its health check is rolled back and the patch stops there; run again, it resumes.
func TestPatchOnFakeHosts(t *testing.T) {
	ctx := t.Context()
	hosts, bu, spec := broughtUp(t)
	with := func(p install.Package) cluster.Spec { return withPackage(spec, p) }

	t.Run("a database patch goes over the control plane, one host at a time, telling each step", func(t *testing.T) {
		old := spec.Packages[0].Manifest
		db2 := fakePkg("db", "2", old.Hosts, old.After, old.Config...)
		before := len(hosts.Log())
		var steps []cluster.PatchStep
		bu.Progress = func(s cluster.PatchStep) { steps = append(steps, s) }
		defer func() { bu.Progress = nil }()
		res, err := bu.Patch(ctx, with(db2), "db")
		if err != nil {
			t.Fatal(err)
		}
		want := []cluster.PatchStep{
			{Package: "db", Version: "2", Host: "cp-0", Index: 1, Of: 2, Step: cluster.StepCheckOthers},
			{Package: "db", Version: "2", Host: "cp-0", Index: 1, Of: 2, Step: cluster.StepInstall},
			{Package: "db", Version: "2", Host: "cp-1", Index: 2, Of: 2, Step: cluster.StepCheckOthers},
			{Package: "db", Version: "2", Host: "cp-1", Index: 2, Of: 2, Step: cluster.StepInstall},
		}
		if !slices.Equal(steps, want) {
			t.Errorf("steps %+v, want %+v", steps, want)
		}
		if got := order(res); !slices.Equal(got, []string{"cp-0", "cp-1"}) {
			t.Errorf("patched %v, want cp-0, cp-1", got)
		}
		if got := activations(hosts.Log()[before:]); !slices.Equal(got, []string{"cp-0 db", "cp-1 db"}) {
			t.Errorf("activated %v", got)
		}
	})

	agent2 := fakePkg("agent", "2", packages.HostsAll, []string{"api"}, spec.Packages[2].Manifest.Config...)
	t.Run("a patch does not start while the package stays unhealthy on another host", func(t *testing.T) {
		hosts.FailHealth("w-1", "agent", "1", 1000)
		defer hosts.StopFailing("w-1", "health")
		m := *agent2.Manifest
		m.HealthCheck = packages.HealthCheck{TimeoutSeconds: 2}
		impatient := agent2
		impatient.Manifest = &m
		start := time.Now()
		res, err := bu.Patch(ctx, with(impatient), "agent")
		if err == nil || !strings.Contains(err.Error(), "stopped at host cp-0") || !strings.Contains(err.Error(), "unhealthy on w-1") || !errors.Is(err, install.ErrUnhealthy) {
			t.Fatalf("err %v, want the patch refusing to start on cp-0 while w-1 is unhealthy", err)
		}
		if waited := time.Since(start); waited < 2*time.Second {
			t.Errorf("refused after %s, want it to wait the health check's timeout (2s) for w-1", waited)
		}
		if len(res.Nodes) != 0 {
			t.Errorf("patched %v", order(res))
		}
		if st := hosts.State("cp-0", "agent"); st.Current != "1" {
			t.Errorf("cp-0's agent %+v, want untouched", st)
		}
	})

	t.Run("a host failing its health check is rolled back, and the patch stops there", func(t *testing.T) {
		hosts.FailHealth("cp-1", "agent", "2", 1)
		res, err := bu.Patch(ctx, with(agent2), "agent")
		var herr *install.HealthError
		if !errors.As(err, &herr) || herr.Host != "cp-1" || herr.RolledBackTo != "1" {
			t.Fatalf("err %v, want cp-1 rolled back to 1", err)
		}
		if got := order(res); !slices.Equal(got, []string{"cp-0", "cp-1"}) {
			t.Errorf("went through %v, want cp-0 then cp-1", got)
		}
		for host, want := range map[string]string{"cp-0": "2", "cp-1": "1", "w-0": "1", "w-1": "1"} {
			if st := hosts.State(host, "agent"); st.Current != want || st.Active != want {
				t.Errorf("%s: agent %+v, want %s", host, st, want)
			}
		}
	})

	t.Run("run again, the patch resumes, waiting for a host unhealthy for a moment", func(t *testing.T) {
		hosts.FailHealth("w-1", "agent", "1", 1)
		res, err := bu.Patch(ctx, with(agent2), "agent")
		if err != nil {
			t.Fatal(err)
		}
		var skipped, patched []string
		for _, n := range res.Nodes {
			if n.Skipped {
				skipped = append(skipped, n.Host)
			} else {
				patched = append(patched, n.Host)
			}
		}
		if !slices.Equal(skipped, []string{"cp-0"}) || !slices.Equal(patched, []string{"cp-1", "w-0", "w-1"}) {
			t.Errorf("skipped %v, patched %v; want cp-0 skipped, the others patched in order", skipped, patched)
		}
	})

	t.Run("a package the cluster does not run", func(t *testing.T) {
		if _, err := bu.Patch(ctx, spec, "nothing"); err == nil || !strings.Contains(err.Error(), "no nothing") {
			t.Errorf("err %v, want one naming the package", err)
		}
	})
}

// TestLeave takes hosts out of a cluster on fake hosts: their packages deactivated in the
// reverse of the install order, nothing again on a second call, a failure naming the host and
// the package, and a later bring-up starting them again.
func TestLeave(t *testing.T) {
	ctx := t.Context()
	hosts, bu, spec := broughtUp(t)
	deactivated := func(from int) []string {
		var out []string
		for _, l := range hosts.Log()[from:] {
			if s, ok := strings.CutSuffix(l, ": "+fixture.StepDeactivate); ok {
				out = append(out, s)
			}
		}
		return out
	}
	w1, cp0 := spec.Hosts[3], spec.Hosts[0]

	before := len(hosts.Log())
	if _, err := bu.Leave(ctx, spec, w1); err != nil {
		t.Fatal(err)
	}
	if got := deactivated(before); !slices.Equal(got, []string{"w-1 agent"}) {
		t.Errorf("deactivated %v, want the worker's one package", got)
	}
	if st := hosts.State("w-1", "agent"); st.Active != "" || st.Current != "1" {
		t.Errorf("w-1's agent %+v, want inactive, its version kept", st)
	}
	before = len(hosts.Log())
	res, err := bu.Leave(ctx, spec, w1)
	if err != nil || len(hosts.Log()) != before || len(res.Steps) != 1 || !res.Steps[0].Skipped {
		t.Errorf("leave again: %v, %+v, ran %v; want it found done", err, res, hosts.Log()[before:])
	}

	hosts.FailStep("cp-0", "api", fixture.StepDeactivate, 1, errors.New("connection reset"))
	before = len(hosts.Log())
	if _, err := bu.Leave(ctx, spec, cp0); err == nil || !strings.Contains(err.Error(), "host cp-0 leaving") || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("err %v, want one naming cp-0 and the cause", err)
	}
	if got := deactivated(before); !slices.Equal(got, []string{"cp-0 agent"}) {
		t.Errorf("deactivated %v before the failure, want agent only", got)
	}
	before = len(hosts.Log())
	if _, err := bu.Leave(ctx, spec, cp0); err != nil {
		t.Fatal(err)
	}
	if got := deactivated(before); !slices.Equal(got, []string{"cp-0 api", "cp-0 db"}) {
		t.Errorf("deactivated %v, want the rest in the reverse of the install order", got)
	}

	// A host that joins again gets its packages started again.
	before = len(hosts.Log())
	if _, err := bu.Run(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(activations(hosts.Log()[before:]))); !slices.Equal(got, []string{"cp-0 agent", "cp-0 api", "cp-0 db", "w-1 agent"}) {
		t.Errorf("activated %v, want what left started again", got)
	}
}

// TestGroupMembership: a package with join and leave hooks (the database: etcd's shape) founds
// its group on the first run — no host running it, all join at once —; a control-plane host
// replaced leaves first, through a host that stays and whether it answers or not, and a new one
// joins the running group; leave hooks find a host that answers; a failing leave hook stops
// the leave before anything is stopped.
func TestGroupMembership(t *testing.T) {
	ctx := t.Context()
	hosts, bu, spec := broughtUp(t)
	joins := func(from int) []string {
		var out []string
		for _, l := range hosts.Log()[from:] {
			if strings.Contains(l, ": "+fixture.StepJoin) {
				out = append(out, l)
			}
		}
		return out
	}
	if got := slices.Sorted(slices.Values(joins(0))); !slices.Equal(got, []string{"cp-0 db: join running=", "cp-1 db: join running="}) {
		t.Errorf("founding joins %q, want both control-plane hosts with none running", got)
	}
	before := len(hosts.Log())
	if _, err := bu.Run(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := joins(before); len(got) != 0 {
		t.Errorf("a second run joined %q again", got)
	}

	cp0, cp1 := spec.Hosts[0], spec.Hosts[1]
	stay := spec
	stay.Hosts = slices.Delete(slices.Clone(spec.Hosts), 1, 2)

	t.Run("a leave hook that fails stops the leave before anything is stopped", func(t *testing.T) {
		hosts.FailStep("cp-0", "db", fixture.StepLeave, 1, errors.New("etcdserver: unhealthy cluster"))
		before := len(hosts.Log())
		_, err := bu.Leave(ctx, stay, cp1)
		if err == nil || !strings.Contains(err.Error(), "host cp-1 leaving") || !strings.Contains(err.Error(), "unhealthy cluster") {
			t.Errorf("err %v, want one naming cp-1 and the cause", err)
		}
		if got := hosts.Log()[before:]; len(got) != 0 {
			t.Errorf("ran %q, want nothing", got)
		}
	})

	t.Run("a dead control-plane host leaves through one that stays", func(t *testing.T) {
		hosts.FailStep("cp-1", "", fixture.StepReachable, 1000, &sshexec.UnreachableError{Host: "cp-1", Err: errors.New("no route to host")})
		before := len(hosts.Log())
		res, err := bu.Leave(ctx, stay, cp1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Unreachable == nil || !strings.Contains(res.Unreachable.Error(), "no route to host") {
			t.Errorf("unreachable %v, want why cp-1 was not stopped", res.Unreachable)
		}
		if got := hosts.Log()[before:]; !slices.Equal(got, []string{"cp-0 db: leave cp-1"}) {
			t.Errorf("ran %q, want the database's leave hook on cp-0 only", got)
		}
		hosts.StopFailing("cp-1", fixture.StepReachable)
	})

	t.Run("a host that answers is stopped after its group let it go", func(t *testing.T) {
		before := len(hosts.Log())
		if _, err := bu.Leave(ctx, stay, cp1); err != nil {
			t.Fatal(err)
		}
		want := []string{"cp-0 db: leave cp-1", "cp-1 agent: deactivate", "cp-1 api: deactivate", "cp-1 db: deactivate"}
		if got := hosts.Log()[before:]; !slices.Equal(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
	})

	t.Run("a new control-plane host joins the running group", func(t *testing.T) {
		ip := netip.MustParseAddr("10.0.0.20")
		cp2 := cluster.Host{Name: "cp-2", IP: ip, SSH: sshexec.Target{Name: "cp-2", Addr: "10.0.0.20:22"}, ControlPlane: true}
		next := stay
		next.Hosts = slices.Insert(slices.Clone(stay.Hosts), 1, cp2)
		before := len(hosts.Log())
		if _, err := bu.Run(ctx, next); err != nil {
			t.Fatal(err)
		}
		if got := joins(before); !slices.Equal(got, []string{"cp-2 db: join running=cp-0=10.0.0.10"}) {
			t.Errorf("joins %q, want cp-2 joining the group cp-0 runs", got)
		}
		if got := activations(hosts.Log()[before:]); !slices.Contains(got, "cp-2 db") || slices.Contains(got, "cp-0 db") {
			t.Errorf("activated %q, want cp-2's database started and cp-0's left running", got)
		}
	})

	t.Run("a leave hook goes to the next host when one does not answer", func(t *testing.T) {
		three := spec
		three.Hosts = slices.Insert(slices.Clone(spec.Hosts), 2, cluster.Host{Name: "cp-2", IP: netip.MustParseAddr("10.0.0.20"), SSH: sshexec.Target{Name: "cp-2", Addr: "10.0.0.20:22"}, ControlPlane: true})
		others := three
		others.Hosts = slices.Delete(slices.Clone(three.Hosts), 0, 1) // cp-0 leaves
		hosts.FailStep("cp-1", "", fixture.StepReachable, 1, &sshexec.UnreachableError{Host: "cp-1", Err: errors.New("i/o timeout")})
		before := len(hosts.Log())
		if _, err := bu.Leave(ctx, others, cp0); err != nil {
			t.Fatal(err)
		}
		if got := hosts.Log()[before:]; len(got) == 0 || got[0] != "cp-2 db: leave cp-0" {
			t.Errorf("ran %q, want cp-2 to take cp-0 out when cp-1 does not answer", got)
		}
	})
}
