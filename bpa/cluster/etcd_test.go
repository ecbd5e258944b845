package cluster_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// etcdctl runs the etcd package's etcdctl on host h against its local member (or the
// --endpoints= that args start with), with the member's certificate.
func etcdctl(ctx context.Context, h *testhosts.Host, args ...string) (string, error) {
	const pki = "/etc/kubernetes/pki/etcd"
	endpoints := "--endpoints=https://127.0.0.1:2379"
	if len(args) > 0 && strings.HasPrefix(args[0], "--endpoints=") {
		endpoints, args = args[0], args[1:]
	}
	out, err := h.Exec(ctx, append([]string{"/opt/edgefleet/packages/etcd/current/files/bin/etcdctl",
		endpoints, "--cacert=" + pki + "/ca.crt", "--cert=" + pki + "/server.crt", "--key=" + pki + "/server.key",
		"--dial-timeout=5s", "--command-timeout=20s"}, args...)...)
	return string(out), err
}

// members are the names of the etcd members host h's member knows, sorted; a member added but
// not started yet shows as "(unstarted)".
func members(t *testing.T, h *testhosts.Host) []string {
	t.Helper()
	out, err := etcdctl(t.Context(), h, "member", "list", "-w", "simple")
	if err != nil {
		t.Fatalf("%s: etcdctl member list: %v\n%s", h.Name, err, out)
	}
	var names []string
	for line := range strings.Lines(strings.TrimSpace(out)) {
		f := strings.Split(strings.TrimSpace(line), ", ") // id, status, name, peer URLs, client URLs, learner
		if len(f) < 4 {
			t.Fatalf("%s: member list line %q", h.Name, line)
		}
		if f[1] != "started" {
			f[2] = "(unstarted)"
		}
		names = append(names, f[2])
	}
	slices.Sort(names)
	return names
}

// healthy fails the test unless every member host h's member knows answers healthy.
func healthy(t *testing.T, h *testhosts.Host) {
	t.Helper()
	if out, err := etcdctl(t.Context(), h, "endpoint", "health", "--cluster"); err != nil {
		t.Errorf("%s: etcdctl endpoint health --cluster: %v\n%s", h.Name, err, out)
	}
}

// etcdHealthClient is an HTTPS client of etcd members with a client certificate, trusting the
// etcd CA; each request is bounded to 2 s.
func etcdHealthClient(t *testing.T, caPEM, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no etcd CA")
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}
}

// healthSamples are what startHealthSamples saw: per sample, how many members answered healthy,
// or -1 when a member's request timed out (the test bed could not tell: a machine busy enough
// answers nothing within 2 s, while an election answers at once, RAFT NO LEADER), and why each
// member that was not healthy was not (its answer, or the request's error), the first 30.
type healthSamples struct {
	counts []int
	// handover marks the samples whose every member that was not healthy answered as one
	// does while the leadership moves ("leader changed", "RAFT NO LEADER").
	handover []bool
	why      []string
}

// maxHandoverSamples is the longest run of handover samples a leadership handover makes
// (400 ms): the new leader campaigns at once, while an election waits out etcd's election
// timeout (1 s) first, 5 samples or more without a leader.
const maxHandoverSamples = 2

// fewest is the fewest healthy members of the samples the bed could measure (min), leaving
// out the samples cut by a leadership handover, in runs of maxHandoverSamples at most; a longer
// run of them is an election and counts.
func (s healthSamples) fewest(t *testing.T) int {
	t.Helper()
	rest := healthSamples{why: s.why}
	for i := 0; i < len(s.counts); {
		j := i
		for j < len(s.counts) && s.handover[j] {
			j++
		}
		if j > i && j-i <= maxHandoverSamples {
			i = j // a handover's samples
			continue
		}
		if j == i {
			j = i + 1
		}
		rest.counts = append(rest.counts, s.counts[i:j]...)
		i = j
	}
	return rest.min(t)
}

// min is the fewest healthy members of the samples the bed could measure; it fails the test
// when it could measure fewer than half of them.
func (s healthSamples) min(t *testing.T) int {
	t.Helper()
	var measured []int
	for _, n := range s.counts {
		if n >= 0 {
			measured = append(measured, n)
		}
	}
	if len(measured) == 0 || 2*len(measured) < len(s.counts) {
		t.Fatalf("the test bed measured %d of %d health samples (the others timed out): too busy to tell; %s", len(measured), len(s.counts), s)
	}
	return slices.Min(measured)
}

func (s healthSamples) String() string {
	return fmt.Sprintf("healthy members per sample (-1: a request timed out) %v; not healthy: %s", s.counts, strings.Join(s.why, "; "))
}

// startHealthSamples starts sampling, every 200 ms from the test, how many of hosts' etcd
// members answer /health true, with the API servers' etcd client certificate from the cluster's
// stored PKI; the function it returns stops the sampling and returns the samples.
func startHealthSamples(t *testing.T, pki map[string][]byte, hosts ...*testhosts.Host) func() healthSamples {
	t.Helper()
	health := etcdHealthClient(t, pki["etcd-ca.crt"], pki["apiserver-etcd-client.crt"], pki["apiserver-etcd-client.key"])
	stop := make(chan struct{})
	samples := make(chan healthSamples, 1)
	go func() {
		var out healthSamples
		defer func() { samples <- out }()
		for i := 0; ; i++ {
			n, moving, unhealthy := 0, 0, 0
			for _, h := range hosts {
				start := time.Now()
				resp, err := health.Get("https://" + h.IP.String() + ":2379/health")
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<10))
					resp.Body.Close()
					if strings.Contains(string(body), `"health":"true"`) {
						if n >= 0 {
							n++
						}
						continue
					}
				}
				unhealthy++
				if strings.Contains(string(body), "leader changed") || strings.Contains(string(body), "RAFT NO LEADER") {
					moving++
				}
				if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
					n = -1
				}
				if len(out.why) < 30 {
					answer := fmt.Sprintf("answered %s", bytes.TrimSpace(body))
					if err != nil {
						answer = err.Error()
					}
					out.why = append(out.why, fmt.Sprintf("sample %d, %s after %s: %s", i, h.Name, time.Since(start).Round(time.Millisecond), answer))
				}
			}
			out.counts = append(out.counts, n)
			out.handover = append(out.handover, unhealthy > 0 && moving == unhealthy)
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() healthSamples {
		close(stop)
		return <-samples
	}
}

func TestEtcdMembershipOnRealHosts(t *testing.T) {
	t.Parallel() // beside the other real-host test: both mostly wait on their hosts
	ctx := t.Context()
	vault := testvault.StartVault(t)
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")
	signer, authorizedKey := testhosts.SSHKey(t)
	hn := testhosts.StartHosts(t, 3, authorizedKey, testhosts.HostOptions{})
	exec := sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}, sshexec.Options{Parallelism: 3})
	t.Cleanup(exec.Close)
	var etcd install.Package
	for _, p := range builders.StackPackages(builders.KubernetesVersion) {
		if p.Name == "etcd" {
			etcd = pkg(builders.BuildPackage(t, p.Name, p.Version, nil))
		}
	}
	all := make([]cluster.Host, len(hn.Hosts))
	for i, h := range hn.Hosts {
		all[i] = cluster.Host{Name: h.Name, IP: h.IP, ControlPlane: true, ProviderID: "metal3://site/" + h.Name, SSH: sshexec.Target{Name: h.Name, Addr: h.SSHAddr()}}
	}
	spec := func(hosts ...cluster.Host) cluster.Spec {
		return cluster.Spec{Name: "members", KubernetesVersion: kubernetesVersion, Packages: []install.Package{etcd}, Hosts: hosts}
	}
	bu := cluster.New(install.New(exec), store)
	h0, h1, h2 := hn.Hosts[0], hn.Hosts[1], hn.Hosts[2]
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, h := range hn.Hosts {
			out, _ := h.Exec(ctx, "sh", "-c", "cat /etc/edgefleet/etcd/cluster.env; journalctl --no-pager -n 30 -u etcd")
			t.Logf("%s:\n%s", h.Name, out)
		}
	})
	started := func(h *testhosts.Host) string {
		out, err := h.Exec(ctx, "systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "--value", "etcd")
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		return strings.TrimSpace(string(out))
	}
	run := func(t *testing.T, s cluster.Spec) {
		t.Helper()
		if res, err := bu.Run(ctx, s); err != nil {
			t.Fatalf("bring-up: %v\nran: %v", err, res.Ran())
		}
	}

	t.Run("one host founds the group", func(t *testing.T) {
		run(t, spec(all[0]))
		if got := members(t, h0); !slices.Equal(got, []string{h0.Name}) {
			t.Errorf("members %v, want %s alone", got, h0.Name)
		}
	})

	t.Run("two hosts join: each a member before it starts, the founder not restarted", func(t *testing.T) {
		before := started(h0)
		run(t, spec(all...))
		if got, want := members(t, h0), []string{h0.Name, h1.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h0)
		if after := started(h0); after != before {
			t.Errorf("%s's etcd restarted (started at %s, now %s): a joining host must not restart the others", h0.Name, before, after)
		}
	})

	t.Run("a host leaves: its member removed through a host that stays, its etcd stopped", func(t *testing.T) {
		// The leaving host leads: the hook hands the leadership over before the removal, so
		// the members that stay are never without a leader.
		status, err := etcdctl(ctx, h1, "endpoint", "status", "-w", "simple") // endpoint, ID (hex), ...
		if err != nil {
			t.Fatalf("%s: endpoint status: %v\n%s", h1.Name, err, status)
		}
		memberID := strings.Split(strings.TrimSpace(status), ", ")[1]
		var endpoints []string
		for _, h := range hn.Hosts {
			endpoints = append(endpoints, "https://"+h.IP.String()+":2379")
		}
		if out, err := etcdctl(ctx, h1, "--endpoints="+strings.Join(endpoints, ","), "move-leader", memberID); err != nil {
			t.Fatalf("make %s the leader: %v\n%s", h1.Name, err, out)
		}
		stored, err := store.Get(ctx, cluster.PKISecret("members"))
		if err != nil {
			t.Fatal(err)
		}
		sample := startHealthSamples(t, stored, h0, h2)
		res, err := bu.Leave(ctx, spec(all[0], all[2]), all[1])
		time.Sleep(2 * time.Second) // an election would follow the removal
		got := sample()
		// The handover is one leader change: a sample it cuts answers "leader changed" or
		// "RAFT NO LEADER" for a moment (fewest leaves those out); an election after the
		// removal would leave the members without a leader for its timeout.
		if got.fewest(t) < 2 {
			t.Errorf("members that stay, sampled while the leader left and after: %s; want both healthy every time but for a handover's moment (no election after the removal)", got)
		}
		t.Logf("members that stay, sampled while the leader left and after: %s", got)
		if err != nil || res.Unreachable != nil {
			t.Fatalf("leave: %v (unreachable: %v)", err, res.Unreachable)
		}
		if got, want := members(t, h0), []string{h0.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h2)
		if out, _ := h1.Exec(ctx, "systemctl", "is-active", "etcd"); strings.TrimSpace(string(out)) == "active" {
			t.Errorf("%s's etcd still runs after it left", h1.Name)
		}
		// Leaving again is a no-op: the member is gone already.
		if _, err := bu.Leave(ctx, spec(all[0], all[2]), all[1]); err != nil {
			t.Errorf("leaving again: %v", err)
		}
	})

	t.Run("the host that left joins again, its old member's data moved aside", func(t *testing.T) {
		run(t, spec(all...))
		if got, want := members(t, h0), []string{h0.Name, h1.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h1)
		if out, err := h1.Exec(ctx, "sh", "-c", "ls -d /var/lib/etcd/member.left-*"); err != nil {
			t.Errorf("%s: no data moved aside: %v %s", h1.Name, err, out)
		}
	})

	t.Run("renewed certificates reach the members one at a time, the cluster keeping its quorum", func(t *testing.T) {
		// Every leaf inside its renewal window: the run issues them all again.
		s := spec(all...)
		s.Certificates = certs.Lifetime{RenewBefore: 2 * certs.LeafValidity}
		stored, err := store.Get(ctx, cluster.PKISecret(s.Name))
		if err != nil {
			t.Fatal(err)
		}
		before := map[string]string{}
		for _, h := range hn.Hosts {
			before[h.Name] = started(h)
		}
		sample := startHealthSamples(t, stored, hn.Hosts...)
		run(t, s)
		got := sample()
		if got.fewest(t) < 2 {
			t.Errorf("members sampled during the renewal: %s; want at least 2 of 3 healthy every time but for a handover's moment (quorum and a leader, no election)", got)
		}
		renewed, err := store.Get(ctx, cluster.PKISecret(s.Name))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hn.Hosts {
			key := "etcd-server." + h.Name + ".crt"
			if bytes.Equal(renewed[key], stored[key]) {
				t.Errorf("%s's etcd server certificate was not renewed in the store", h.Name)
			}
			out, err := h.Exec(ctx, "cat", "/etc/kubernetes/pki/etcd/server.crt")
			if err != nil || !bytes.Equal(out, renewed[key]) {
				t.Errorf("%s: /etc/kubernetes/pki/etcd/server.crt is not the renewed certificate (%v)", h.Name, err)
			}
			if after := started(h); after == before[h.Name] {
				t.Errorf("%s's etcd was not restarted with its renewed certificate", h.Name)
			}
		}
		if got, want := members(t, h0), []string{h0.Name, h1.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h0)
		t.Logf("members sampled during the renewal: %s", got)
	})

	// The patch restarts each member once its others are healthy, so two of three stay up; a
	// leading member hands the leadership over as it stops (its unit's ExecStop), so the others
	// keep a leader and answer healthy throughout.
	t.Run("an etcd patch goes member by member, the group keeping its quorum", func(t *testing.T) {
		etcd = pkg(builders.BuildPackage(t, "etcd", "3.6.16-edgefleet.1", nil)) // the later specs run it
		stored, err := store.Get(ctx, cluster.PKISecret("members"))
		if err != nil {
			t.Fatal(err)
		}
		sample := startHealthSamples(t, stored, hn.Hosts...)
		res, err := bu.Patch(ctx, spec(all...), "etcd")
		got := sample()
		if err != nil {
			t.Fatalf("patch: %v", err)
		}
		if got, want := order(res), []string{h0.Name, h1.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("patched %v, want %v", got, want)
		}
		if got.fewest(t) < 2 {
			t.Errorf("members sampled during the patch: %s; want at least 2 of 3 healthy every time but for a handover's moment (quorum and a leader, no election)", got)
		}
		for _, h := range all {
			st, err := install.New(exec).Installed(ctx, h.SSH, "etcd")
			if err != nil || st.Current != "3.6.16-edgefleet.1" || st.Active != "3.6.16-edgefleet.1" {
				t.Errorf("%s: etcd %+v (%v), want 3.6.16-edgefleet.1 active", h.Name, st, err)
			}
		}
		if got, want := members(t, h0), []string{h0.Name, h1.Name, h2.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h0)
		t.Logf("members sampled during the patch: %s", got)
	})

	t.Run("a powered-off host leaves: its member is removed all the same", func(t *testing.T) {
		if err := h2.Stop(); err != nil {
			t.Fatal(err)
		}
		res, err := bu.Leave(ctx, spec(all[0], all[1]), all[2])
		if err != nil {
			t.Fatalf("leave: %v", err)
		}
		if res.Unreachable == nil {
			t.Errorf("leave of a powered-off host says it answered: %+v", res)
		}
		if got, want := members(t, h0), []string{h0.Name, h1.Name}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		healthy(t, h0)
	})
}

// TestFewestLeavesOutHandovers: a handover's moment without a leader (at most
// maxHandoverSamples samples) is left out; a longer one is an election and counts, and so does
// a sample whose member answered anything else.
func TestFewestLeavesOutHandovers(t *testing.T) {
	for _, tt := range []struct {
		counts   []int
		handover []bool
		want     int
	}{
		{[]int{2, 0, 1, 2}, []bool{false, true, true, false}, 2},
		{[]int{2, 0, 0, 0, 0, 0, 2}, []bool{false, true, true, true, true, true, false}, 0},
		{[]int{2, 1, 2}, []bool{false, false, false}, 1},
		{[]int{0, 2, 2, 0, 2}, []bool{true, false, false, true, false}, 2},
	} {
		s := healthSamples{counts: tt.counts, handover: tt.handover}
		if got := s.fewest(t); got != tt.want {
			t.Errorf("fewest of %v (handover %v) = %d, want %d", tt.counts, tt.handover, got, tt.want)
		}
	}
}
