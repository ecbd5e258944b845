package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// anchorResult is the anchor: the site's install steps, one at a time.
type anchorResult struct {
	// took is the install's wall time: the sequential sum.
	took time.Duration
	res  *cluster.Result
	// own is each host's time on the hosts' side of the gate: its own install path.
	own map[string]time.Duration
	// cpu is the CPU time the hosts used during the install, all together.
	cpu time.Duration
}

// runAnchor boots ten fresh hosts of the site's names and installs the stack's packages and
// images on them with cluster.BringUp, one call at a time (serialInstaller); everything it
// started is stopped when it returns.
func runAnchor(ctx context.Context, dir string, stack []stackFile, timeout time.Duration) (_ *anchorResult, err error) {
	vault, err := testvault.StartVaultIn(ctx, filepath.Join(dir, "anchor-vault"))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, vault.Stop()) }()
	logf("anchor: booting %d fresh hosts", controlPlanes+workers)
	hostsDir := filepath.Join(dir, "anchor-hosts")
	hn, err := testhosts.NewHostNet(controlPlanes+workers, testhosts.HostOptions{Dir: hostsDir, Names: hostNames()})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("anchor: stopping the hosts")
		err = errors.Join(err, hn.Close(), os.RemoveAll(hostsDir))
	}()
	signer, authorizedKey, err := testhosts.NewSSHKey()
	if err != nil {
		return nil, err
	}
	if _, err := hn.BootAll(ctx, authorizedKey); err != nil {
		return nil, err
	}

	network := hn.ClusterNetwork()
	spec := cluster.Spec{
		Name: siteName, KubernetesVersion: kubernetesVersion,
		ServiceCIDR: network.ServiceCIDRs[0], PodCIDR: network.PodCIDRs[0], APIEndpoint: network.ControlPlaneEndpoint.Host,
		Workers: workers,
	}
	for i, h := range hn.Hosts {
		spec.Hosts = append(spec.Hosts, cluster.Host{
			Name: h.Name, IP: h.IP, SSH: sshexec.Target{Name: h.Name, Addr: h.SSHAddr()},
			ControlPlane: i < controlPlanes, ProviderID: "metal3://" + sitev1.HostsNamespace + "/" + h.Name,
		})
	}
	for _, a := range stack {
		open := func() (io.ReadCloser, error) { return os.Open(a.Path) }
		switch a.Kind {
		case "binary-package":
			m, err := readManifest(a.Path)
			if err != nil {
				return nil, err
			}
			spec.Packages = append(spec.Packages, install.Package{Manifest: m, Digest: a.SHA256, Archive: open})
		case "container-image-archive":
			spec.Images = append(spec.Images, install.Image{Name: a.Kind + " " + a.Name + " " + a.Version, Digest: a.SHA256, Archive: open})
		}
	}
	exec := sshexec.New(signer, &sshexec.MemoryHostKeys{}, sshexec.Options{})
	defer exec.Close()
	// An etcd member passes its health check only once a quorum of members runs: etcd's installs
	// go through together.
	gate, err := newSerialInstaller(install.New(exec), spec, "etcd")
	if err != nil {
		return nil, err
	}
	store := secrets.NewVault(vault.Client, "secret", "edgefleet/anchor")
	logf("anchor: installing the stack on the %d hosts, one call at a time (etcd's %d members together)", len(spec.Hosts), controlPlanes)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cpu0, err := hostsCPU(hn)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := cluster.New(gate, store).Run(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("anchor: install one call at a time: %w", err)
	}
	out := &anchorResult{took: time.Since(start), res: res, own: gate.own}
	cpu1, err := hostsCPU(hn)
	if err != nil {
		return nil, err
	}
	out.cpu = cpu1 - cpu0
	logf("anchor: installed in %s", out.took.Round(time.Millisecond))
	return out, nil
}

// hostsCPU is the CPU time the hosts used since they booted, all together.
func hostsCPU(hn *testhosts.HostNet) (time.Duration, error) {
	var sum time.Duration
	for _, h := range hn.Hosts {
		cpu, err := h.CPU()
		if err != nil {
			return 0, err
		}
		sum += cpu
	}
	return sum, nil
}

func readManifest(path string) (*packages.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := packages.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// serialInstaller is a cluster.Installer that lets one call at a time through to the hosts — a
// host's check that it answers, a configuration file written, a package installed, an image
// imported — except the installs of a
// package named together, which go through at once on all the hosts that run it, and alone:
// they wait until every one of them is asked for. It adds up each host's time inside.
type serialInstaller struct {
	cluster.Installer
	// members is how many hosts install each package named together.
	members map[string]int

	mu   sync.Mutex
	cond *sync.Cond
	// busy: one call is through; group: the package named together whose installs are through,
	// inGroup of them; waiting: installs of packages of together asked for, by package.
	busy    bool
	group   string
	inGroup int
	waiting map[string]int
	own     map[string]time.Duration
}

func newSerialInstaller(i cluster.Installer, spec cluster.Spec, together ...string) (*serialInstaller, error) {
	s := &serialInstaller{Installer: i, members: map[string]int{}, waiting: map[string]int{}, own: map[string]time.Duration{}}
	s.cond = sync.NewCond(&s.mu)
	for _, name := range together {
		for _, p := range spec.Packages {
			if p.Manifest.Name != name {
				continue
			}
			for _, h := range spec.Hosts {
				if p.Manifest.Hosts.Selects(h.ControlPlane) {
					s.members[name]++
				}
			}
		}
		if s.members[name] == 0 {
			return nil, fmt.Errorf("anchor: no host runs %s", name)
		}
	}
	return s, nil
}

// wait waits on the condition until ok holds or ctx ends; s.mu is held.
func (s *serialInstaller) wait(ctx context.Context, ok func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cond.Broadcast()
	})
	defer stop()
	for !ok() {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.cond.Wait()
	}
	return nil
}

// groupReady: every install of some package named together is asked for.
func (s *serialInstaller) groupReady() bool {
	for name, n := range s.waiting {
		if n == s.members[name] {
			return true
		}
	}
	return false
}

// alone runs call with nothing else through, and adds its time to host's.
func (s *serialInstaller) alone(ctx context.Context, host string, call func() error) error {
	s.mu.Lock()
	err := s.wait(ctx, func() bool { return !s.busy && s.inGroup == 0 && !s.groupReady() })
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.busy = true
	s.mu.Unlock()
	start := time.Now()
	err = call()
	s.mu.Lock()
	s.busy = false
	s.own[host] += time.Since(start)
	s.cond.Broadcast()
	s.mu.Unlock()
	return err
}

// withGroup runs call, an install of package name (named together), with the other installs of
// name and nothing else, once all of them are asked for.
func (s *serialInstaller) withGroup(ctx context.Context, host, name string, call func() error) error {
	s.mu.Lock()
	s.waiting[name]++
	s.cond.Broadcast()
	err := s.wait(ctx, func() bool {
		return !s.busy && (s.group == name || (s.inGroup == 0 && s.waiting[name] == s.members[name]))
	})
	if err != nil {
		s.waiting[name]--
		s.mu.Unlock()
		return err
	}
	s.waiting[name]--
	s.group = name
	s.inGroup++
	s.cond.Broadcast()
	s.mu.Unlock()
	start := time.Now()
	err = call()
	s.mu.Lock()
	s.own[host] += time.Since(start)
	if s.inGroup--; s.inGroup == 0 {
		s.group = ""
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	return err
}

func (s *serialInstaller) Reachable(ctx context.Context, target sshexec.Target) error {
	return s.alone(ctx, target.Name, func() error { return s.Installer.Reachable(ctx, target) })
}

func (s *serialInstaller) Install(ctx context.Context, target sshexec.Target, pkg install.Package) (install.Report, error) {
	var rep install.Report
	call := func() (err error) { rep, err = s.Installer.Install(ctx, target, pkg); return err }
	if _, ok := s.members[pkg.Manifest.Name]; ok {
		err := s.withGroup(ctx, target.Name, pkg.Manifest.Name, call)
		return rep, err
	}
	err := s.alone(ctx, target.Name, call)
	return rep, err
}

func (s *serialInstaller) ImportImage(ctx context.Context, target sshexec.Target, m *packages.Manifest, img install.Image) (sshexec.Result, error) {
	var res sshexec.Result
	err := s.alone(ctx, target.Name, func() (err error) { res, err = s.Installer.ImportImage(ctx, target, m, img); return err })
	return res, err
}

func (s *serialInstaller) WriteFile(ctx context.Context, target sshexec.Target, file string, data []byte, mode uint32) (sshexec.Result, error) {
	var res sshexec.Result
	err := s.alone(ctx, target.Name, func() (err error) { res, err = s.Installer.WriteFile(ctx, target, file, data, mode); return err })
	return res, err
}
