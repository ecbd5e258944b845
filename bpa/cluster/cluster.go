package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// Defaults of a Spec's zero fields.
const (
	// APIPort is the kube-apiserver's secure port.
	APIPort = 6443
	// DefaultPodCIDR is the cluster's pod CIDR when the spec names none.
	DefaultPodCIDR = "10.244.0.0/16"
	// DNSDomain is the cluster's DNS domain.
	DNSDomain = "cluster.local"
)

// maxParallel bounds the hosts a phase works on at once.
const maxParallel = 32

// Host is one host of the cluster.
type Host struct {
	// Name is the host's node name.
	Name string
	// IP is the host's address on the cluster network.
	IP netip.Addr
	// SSH is how the BPA reaches the host.
	SSH sshexec.Target
	// ControlPlane hosts run the packages for control-plane hosts.
	ControlPlane bool
	// ProviderID is the Node's spec.providerID (the Machine's).
	ProviderID string
}

// Spec is the cluster to bring up.
type Spec struct {
	// Name of the cluster: a DNS-1123 subdomain; its secrets are named after it.
	Name string
	// KubernetesVersion the nodes run (v1.36.3).
	KubernetesVersion string
	// ServiceCIDR of the cluster; pki.DefaultServiceCIDR when empty.
	ServiceCIDR string
	// PodCIDR of the cluster, IPv4, at most a /18 so that every host gets a part of it
	// (see NodePodCIDR); DefaultPodCIDR when empty.
	PodCIDR string
	// APIEndpoint is the address nodes and kubeconfigs use for the API server; the first
	// control-plane host's IP when empty.
	APIEndpoint string
	// Hosts, control plane first: those the BPA may install on now.
	Hosts []Host
	// Workers is how many worker hosts the cluster has, provisioned yet or not (the templates'
	// .Cluster.Workers).
	Workers int
	// Packages are what the cluster runs: any packages, each installed as its manifest says
	// (docs/packages.md).
	Packages []install.Package
	// Images are container image archives imported on every host that runs a package with an
	// importImage hook (the container runtime), right after that package.
	Images []install.Image
	// Certificates is the lifetime of the cluster's leaf certificates (zero: a year, renewed 30
	// days before expiry). A renewed certificate reaches the services that use it at the next
	// Run, one host at a time.
	Certificates certs.Lifetime
	// SecretEncryptionKeyRotations is how many rotations of the key the API servers encrypt
	// Secrets with are asked for: each Run takes one asked for and not done one phase on
	// (pki.AdvanceSecretEncryption).
	SecretEncryptionKeyRotations int64
	// CARotations is how many roll-overs of the cluster's CAs are asked for: each Run takes one
	// asked for and not done one phase on (pki.AdvanceCARotation).
	CARotations int64
	// ClientCertificateMaxTTL is the longest a cluster user's client certificate lives (the
	// BPA's --max-credential-ttl): during a roll-over the old CAs stay trusted that long after
	// the new cluster CA began signing them, so that those signed before keep working.
	ClientCertificateMaxTTL time.Duration
	// KMS, when set, has the API servers encrypt Secrets through Vault: the packages that
	// require packages.RequiresKMS (the KMS plugin on each control-plane host) run, and the
	// encryption configuration names the plugin (pki.KMSSocket). Without it those packages are
	// left out and Secrets are encrypted with a secretbox key of the PKI. A cluster keeps the
	// one it was built with (pki.Spec.SecretEncryptionKMS).
	KMS *KMS
}

// KMS is how a cluster's KMS plugin reaches Vault.
type KMS struct {
	packages.KMSValues
	// VaultCA is the PEM bundle of the CAs the plugin trusts for Vault's certificate.
	VaultCA []byte
	// Token is the ServiceAccount token of the site's cluster the plugin logs in to Vault
	// with. Each Run writes the current one; the plugin reads it again when it changes.
	Token []byte
}

// PKISecret is the name of the secret holding the PKI of cluster name.
func PKISecret(name string) string { return name + "-pki" }

// AdminKubeconfigSecret is the name of the secret holding the admin kubeconfig of cluster name
// (key "value").
func AdminKubeconfigSecret(name string) string { return name + "-admin-kubeconfig" }

// BringUp brings up clusters.
type BringUp struct {
	installer Installer
	secrets   secrets.Store
	// Progress, when set, is told each step of a patch as it starts (Patch).
	Progress func(PatchStep)
}

// Installer is what BringUp does on hosts: install.Installer over SSH, or a fake in tests.
type Installer interface {
	Reachable(ctx context.Context, target sshexec.Target) error
	Install(ctx context.Context, target sshexec.Target, pkg install.Package) (install.Report, error)
	Installed(ctx context.Context, target sshexec.Target, name string) (install.State, error)
	Healthy(ctx context.Context, target sshexec.Target, name string) error
	Deactivate(ctx context.Context, target sshexec.Target, name string) (sshexec.Result, error)
	Leave(ctx context.Context, target sshexec.Target, name, leaving, leavingIP string) (sshexec.Result, error)
	ImportImage(ctx context.Context, target sshexec.Target, m *packages.Manifest, img install.Image) (sshexec.Result, error)
	WriteFile(ctx context.Context, target sshexec.Target, file string, data []byte, mode uint32) (sshexec.Result, error)
}

// New returns a BringUp working on hosts through i and keeping secrets in s.
func New(i Installer, s secrets.Store) *BringUp {
	return &BringUp{installer: i, secrets: s}
}

// Result is what a run did, level by level.
type Result struct {
	// Levels the run worked on, in install order; when Run returns an error, the last one is
	// the level that failed.
	Levels []Level
	// Files is how many files were written (not found in place already).
	Files int
	// Images is how many image imports ran (were not found done).
	Images int
	// LeftOut are the worker hosts the run did not install because they did not answer.
	LeftOut []HostError
	// SecretEncryption is where the Secret encryption key stands after the run; zero when no
	// package of the cluster reads the encryption configuration (no API server to encrypt).
	SecretEncryption pki.SecretEncryption
	// Reencrypted is how many Secrets the run stored again under the key that encrypts (nil
	// when they all were before).
	Reencrypted *encryption.Result
	// CAs is where a roll-over of the cluster's CAs stands after the run.
	CAs CAStep
}

// HostError is why a host was left out of a run.
type HostError struct {
	Host string
	Err  error
}

// Level is what a run did at one level of the install order (Levels).
type Level struct {
	// Packages of the level, by name.
	Packages []string
	// Took is the level's wall time: its jobs run at once.
	Took time.Duration
	// Jobs are the level's packages on their hosts, one per package and host, in the level's
	// order; a job that failed before it wrote or ran anything is not listed.
	Jobs []Job
}

// Job is one package on one host: its configuration files written, its install, the cluster's
// images imported through it.
type Job struct {
	// Host is the host's name, Package the package's.
	Host, Package string
	// Install is the install's report, step by step.
	Install install.Report
	// Files are the results of writing the package's configuration files, Imports those of
	// importing the images, in order.
	Files, Imports []sshexec.Result
	// Took is the job's wall time.
	Took time.Duration
}

// Ran lists "<host>/<package>: <step>" for every install step that ran (was not found done).
func (r *Result) Ran() []string {
	var ran []string
	for _, l := range r.Levels {
		for _, j := range l.Jobs {
			for _, s := range j.Install.Ran() {
				ran = append(ran, j.Host+"/"+j.Package+": "+s)
			}
		}
	}
	return ran
}

// Ran counts the steps of the level that ran (were not found done): file writes, install steps
// and image imports.
func (l Level) Ran() int {
	n := 0
	for _, j := range l.Jobs {
		for _, s := range j.steps() {
			if !s.Skipped {
				n++
			}
		}
	}
	return n
}

// Slowest is the level's job that took longest; the zero Job when it has none.
func (l Level) Slowest() Job {
	var slowest Job
	for _, j := range l.Jobs {
		if j.Took > slowest.Took {
			slowest = j
		}
	}
	return slowest
}

// StepKinds are the kinds of steps StepTimes sums, in the order a job runs them: configuration
// files, the install's steps (install.Installer: stage sends and unpacks the package, join makes
// the host a member of the package's group, activate starts its units and waits until its
// health check passes) and image imports.
func StepKinds() []string {
	return []string{"write", "stage", "pre-install", "join", "activate", "post-install", "prune", "import"}
}

// StepTimes sums the time of the level's steps that ran, by kind (StepKinds: a step's name up
// to its first space).
func (l Level) StepTimes() map[string]time.Duration {
	times := map[string]time.Duration{}
	for _, j := range l.Jobs {
		for _, s := range j.steps() {
			if !s.Skipped {
				kind, _, _ := strings.Cut(s.Step, " ")
				times[kind] += s.Duration
			}
		}
	}
	return times
}

// steps are the job's step results in the order they ran.
func (j Job) steps() []sshexec.Result {
	return slices.Concat(j.Files, j.Install.Steps, j.Imports)
}

// Run brings the cluster of spec up; see the package documentation.
func (b *BringUp) Run(ctx context.Context, spec Spec) (*Result, error) {
	spec, bundle, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	levels, err := Levels(spec.Packages)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	if err := b.saveAdminKubeconfig(ctx, spec, bundle); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	res := &Result{}
	if spec.Hosts, err = b.reachable(ctx, res, spec.Hosts); err != nil {
		return res, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	for _, level := range levels {
		if err := b.installLevel(ctx, res, spec, bundle, level); err != nil {
			return res, fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
	}
	if err := b.advanceSecretEncryption(ctx, res, spec, bundle); err != nil {
		return res, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	if err := b.advanceCARotation(ctx, res, spec, bundle, time.Now()); err != nil {
		return res, fmt.Errorf("cluster %s: CA roll-over: %w", spec.Name, err)
	}
	return res, nil
}

// advanceSecretEncryption takes the Secret encryption key one step on, now that every API
// server runs the configuration of its phase: the run wrote it to every control-plane host (a
// run does not start while one does not answer) and restarted each whose file changed, one at a
// time. Where no package reads the encryption configuration there is no API server to move on.
func (b *BringUp) advanceSecretEncryption(ctx context.Context, res *Result, spec Spec, bundle *pki.Bundle) error {
	if !runsAPIServer(spec) {
		return nil
	}
	st, reencrypted, err := pki.AdvanceSecretEncryption(ctx, b.secrets, PKISecret(spec.Name), func(ctx context.Context) (encryption.Result, error) {
		meta, err := adminMetadataClient(bundle)
		if err != nil {
			return encryption.Result{}, err
		}
		return encryption.Reencrypt(ctx, meta, "")
	})
	res.SecretEncryption, res.Reencrypted = st, reencrypted
	return err
}

// runsAPIServer tells whether a package of spec reads the API servers' encryption
// configuration: whether the cluster has API servers.
func runsAPIServer(spec Spec) bool {
	return slices.ContainsFunc(spec.Packages, func(p install.Package) bool {
		return slices.ContainsFunc(p.Manifest.Config, func(c packages.ConfigFile) bool { return c.PKI == pki.EncryptionConfigFile })
	})
}

// prepare checks spec, applies its defaults and ensures its PKI.
func (b *BringUp) prepare(ctx context.Context, spec Spec) (Spec, *pki.Bundle, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return spec, nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	bundle, err := pki.Ensure(ctx, b.secrets, PKISecret(spec.Name), spec.PKISpec())
	if err != nil {
		return spec, nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	return spec, bundle, nil
}

// reachable checks that every host answers (at most maxParallel at once) and returns those
// that do. Nothing is installed while a control-plane host does not answer: an etcd member
// started without the others would wait for a quorum that cannot form. A worker that does not
// answer is left out of the run (res.LeftOut) so the others are not held up by one; a later run
// joins it. The error joins each control-plane host's.
func (b *BringUp) reachable(ctx context.Context, res *Result, hosts []Host) ([]Host, error) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = b.installer.Reachable(ctx, h.SSH)
		})
	}
	wg.Wait()
	var answer []Host
	var cpErrs []error
	for i, h := range hosts {
		switch {
		case errs[i] == nil:
			answer = append(answer, h)
		case h.ControlPlane:
			cpErrs = append(cpErrs, errs[i])
		default:
			res.LeftOut = append(res.LeftOut, HostError{Host: h.Name, Err: errs[i]})
		}
	}
	return answer, errors.Join(cpErrs...)
}

// job is one package on one host.
type job struct {
	host Host
	pkg  install.Package
}

// installLevel installs the packages of one level on their hosts, all at once (at most
// maxParallel) except restarts for a new configuration, which go one host at a time after the
// others; it waits for all, adds the level to res and logs it (with the context's logger).
func (b *BringUp) installLevel(ctx context.Context, res *Result, spec Spec, bundle *pki.Bundle, level []install.Package) error {
	var jobs []job
	lr := Level{}
	for _, pkg := range level {
		lr.Packages = append(lr.Packages, pkg.Manifest.Name)
		for _, h := range spec.Hosts {
			if pkg.Manifest.Hosts.Selects(h.ControlPlane) {
				jobs = append(jobs, job{h, pkg})
			}
		}
	}
	start := time.Now()
	groups, err := b.memberships(ctx, spec, level)
	if err != nil {
		return err
	}
	rolling, err := b.restarts(ctx, spec, bundle, jobs)
	if err != nil {
		return err
	}
	// Hosts joining a running group do so one at a time: etcd adds one member at a time.
	joining := map[string]*sync.Mutex{}
	for name := range groups {
		joining[name] = &sync.Mutex{}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	errs := make([]error, len(jobs))
	done := make([]Job, len(jobs))
	for i, j := range jobs {
		if g := groups[j.pkg.Manifest.Name]; g != nil {
			j.pkg.Membership = g
		}
		if rolling[i] {
			continue
		}
		wg.Go(func() {
			if g := j.pkg.Membership; g != nil && len(g.Running) > 0 && !slices.Contains(g.Running, member(j.host)) {
				joining[j.pkg.Manifest.Name].Lock()
				defer joining[j.pkg.Manifest.Name].Unlock()
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			done[i], errs[i] = b.install(ctx, spec, bundle, j.host, j.pkg)
			done[i].Took = time.Since(start)
		})
	}
	wg.Wait()
	// Then the restarts for a new configuration (a renewed certificate, a changed template) of
	// packages running already: one host at a time, in the spec's order, each healthy before the
	// next writes its files, so that a group (etcd, the API servers) keeps its quorum; the first
	// failure stops them, the hosts after it keep their running configuration.
	var stopped string
	for i, j := range jobs {
		if !rolling[i] {
			continue
		}
		if stopped != "" {
			errs[i] = fmt.Errorf("host %s: package %s not restarted for its new configuration: the restart on host %s failed first", j.host.Name, j.pkg.Manifest.Name, stopped)
			continue
		}
		start := time.Now()
		done[i], errs[i] = b.install(ctx, spec, bundle, j.host, j.pkg)
		done[i].Took = time.Since(start)
		if errs[i] != nil {
			stopped = j.host.Name
		}
	}
	lr.Took = time.Since(start)
	for _, d := range done {
		if len(d.Files) > 0 || len(d.Install.Steps) > 0 {
			lr.Jobs = append(lr.Jobs, d)
		}
		for _, r := range d.Files {
			if !r.Skipped {
				res.Files++
			}
		}
		for _, r := range d.Imports {
			if !r.Skipped {
				res.Images++
			}
		}
	}
	res.Levels = append(res.Levels, lr)
	err = errors.Join(errs...)
	lr.log(logr.FromContextOrDiscard(ctx), len(res.Levels)-1, err == nil)
	return err
}

// memberships are the groups the packages of level with a join hook form (packages.Hooks.Join),
// by package: the hosts each selects, and those where it is active now — none when the group is
// founded by this run.
func (b *BringUp) memberships(ctx context.Context, spec Spec, level []install.Package) (map[string]*install.Membership, error) {
	groups := map[string]*install.Membership{}
	for _, pkg := range level {
		m := pkg.Manifest
		if m.Hooks.Join == "" {
			continue
		}
		var selected []Host
		for _, h := range spec.Hosts {
			if m.Hosts.Selects(h.ControlPlane) {
				selected = append(selected, h)
			}
		}
		active := make([]bool, len(selected))
		errs := make([]error, len(selected))
		var wg sync.WaitGroup
		for i, h := range selected {
			wg.Go(func() {
				st, err := b.installer.Installed(ctx, h.SSH, m.Name)
				active[i], errs[i] = st.Active != "", err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("package %s: which hosts run it: %w", m.Name, err)
		}
		g := &install.Membership{}
		for i, h := range selected {
			g.Selected = append(g.Selected, member(h))
			if active[i] {
				g.Running = append(g.Running, member(h))
			}
		}
		groups[m.Name] = g
	}
	return groups, nil
}

// restarts reports, for each job, whether its package runs on its host already at this version
// with another configuration than the one it would be given now: a restart, not an install.
func (b *BringUp) restarts(ctx context.Context, spec Spec, bundle *pki.Bundle, jobs []job) ([]bool, error) {
	out := make([]bool, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	for i, j := range jobs {
		m := j.pkg.Manifest
		if len(m.Config) == 0 {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			files, err := configFiles(spec, bundle, j.host, m)
			if err != nil {
				errs[i] = fmt.Errorf("host %s: package %s %s: %w", j.host.Name, m.Name, m.Version, err)
				return
			}
			st, err := b.installer.Installed(ctx, j.host.SSH, m.Name)
			if err != nil {
				errs[i] = fmt.Errorf("host %s: %w", j.host.Name, err)
				return
			}
			out[i] = st.Active == m.Version && st.Current == m.Version && st.Config != configDigest(files)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// member is how a join hook sees host h: "name=ip".
func member(h Host) string { return h.Name + "=" + h.IP.String() }

// log logs the level, index of its run's levels, when it ran anything: "installed level" (or
// "level not installed" when it failed) with its packages, how many hosts, its wall time, its
// slowest host and package, and where the time went by kind of step (stage: a package sent and
// unpacked; activate: its units started until its health check passed).
func (l Level) log(log logr.Logger, index int, installed bool) {
	if l.Ran() == 0 {
		return
	}
	msg := "installed level"
	if !installed {
		msg = "level not installed"
	}
	hosts := map[string]bool{}
	for _, j := range l.Jobs {
		hosts[j.Host] = true
	}
	times := l.StepTimes()
	var steps []string
	for _, k := range StepKinds() {
		if d, ok := times[k]; ok {
			steps = append(steps, k+" "+d.Round(time.Millisecond).String())
		}
	}
	slowest := l.Slowest()
	log.Info(msg, "index", index, "packages", strings.Join(l.Packages, ","), "hosts", len(hosts), "took", l.Took.Round(time.Millisecond).String(),
		"slowest", slowest.Host+"/"+slowest.Package, "slowestTook", slowest.Took.Round(time.Millisecond).String(),
		"stepsRan", l.Ran(), "stepTimes", strings.Join(steps, ", "))
}

// install writes the configuration files of pkg on host h, installs it there and, when it
// imports images, imports the cluster's images.
func (b *BringUp) install(ctx context.Context, spec Spec, bundle *pki.Bundle, h Host, pkg install.Package) (Job, error) {
	m := pkg.Manifest
	did := Job{Host: h.Name, Package: m.Name}
	fail := func(err error) error { return fmt.Errorf("host %s: package %s %s: %w", h.Name, m.Name, m.Version, err) }
	files, err := configFiles(spec, bundle, h, m)
	if err != nil {
		return did, fail(err)
	}
	for _, f := range files {
		r, err := b.installer.WriteFile(ctx, h.SSH, f.path, f.data, f.mode)
		if err != nil {
			return did, fail(err)
		}
		did.Files = append(did.Files, r)
	}
	pkg.ConfigDigest = configDigest(files)
	if did.Install, err = b.installer.Install(ctx, h.SSH, pkg); err != nil {
		var herr *install.HealthError
		if errors.As(err, &herr) {
			return did, err // names the host, the package and the version already
		}
		return did, fail(err)
	}
	if m.Hooks.ImportImage == "" {
		return did, nil
	}
	for _, img := range spec.Images {
		r, err := b.installer.ImportImage(ctx, h.SSH, m, img)
		if err != nil {
			return did, err // names the host, the image and the package
		}
		did.Imports = append(did.Imports, r)
	}
	return did, nil
}

// file is a configuration file for a host.
type file struct {
	path string
	data []byte
	mode uint32
	// renewed files are replaced while the package runs, which reads them again: they do not
	// count in the configuration digest (the KMS plugin's token).
	renewed bool
}

// configFiles renders the configuration files of m for host h, sorted by path.
func configFiles(spec Spec, bundle *pki.Bundle, h Host, m *packages.Manifest) ([]file, error) {
	if len(m.Config) == 0 {
		return nil, nil
	}
	vals, err := spec.values(h)
	if err != nil {
		return nil, err
	}
	var pkiFiles map[string][]byte
	var out []file
	for i, c := range m.Config {
		f := file{path: c.Path, mode: c.Perm()}
		if c.PKI != "" {
			if pkiFiles == nil {
				if pkiFiles, err = bundle.HostFiles(h.Name); err != nil {
					return nil, err
				}
			}
			data, ok := pkiFiles[c.PKI]
			if !ok {
				what := "a worker"
				if h.ControlPlane {
					what = "a control-plane host"
				}
				return nil, fmt.Errorf("config[%d] (%s): the cluster's PKI has no %q for %s (docs/packages.md lists the names)", i, c.Path, c.PKI, what)
			}
			if f.data = data; c.Server != "" {
				if f.data, err = pki.WithServer(data, c.Server); err != nil {
					return nil, fmt.Errorf("config[%d] (%s): %w", i, c.Path, err)
				}
			}
		} else if c.KMS != "" {
			if f.data, f.renewed, err = kmsFile(spec.KMS, c.KMS); err != nil {
				return nil, fmt.Errorf("config[%d] (%s): %w", i, c.Path, err)
			}
		} else if f.data, err = c.Render(vals); err != nil {
			return nil, fmt.Errorf("config[%d] (%s): %w", i, c.Path, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b file) int { return bytes.Compare([]byte(a.path), []byte(b.path)) })
	return out, nil
}

// kmsFile is the KMS plugin's file name (packages.ConfigFile.KMS) of kms, and whether it is
// renewed while the plugin runs.
func kmsFile(kms *KMS, name string) ([]byte, bool, error) {
	if kms == nil {
		return nil, false, errors.New("the cluster has no KMS") // Spec.withDefaults left the package out
	}
	switch name {
	case packages.KMSVaultCA:
		return kms.VaultCA, false, nil
	case packages.KMSToken:
		return kms.Token, true, nil
	}
	return nil, false, fmt.Errorf("no KMS file %q", name)
}

// configDigest identifies a set of configuration files: their paths, modes and contents, but
// for the files renewed while the package runs (their paths and modes count).
func configDigest(files []file) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		if f.renewed {
			fmt.Fprintf(h, "%s\x00%o\x00renewed\n", f.path, f.mode)
			continue
		}
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(h, "%s\x00%o\x00%x\n", f.path, f.mode, sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// values are what the templates of host h's files see.
func (s Spec) values(h Host) (packages.Values, error) {
	node := func(h Host) (packages.NodeValues, error) {
		cidr, err := NodePodCIDR(s.PodCIDR, h.IP)
		if err != nil {
			return packages.NodeValues{}, fmt.Errorf("host %s: %w", h.Name, err)
		}
		return packages.NodeValues{Name: h.Name, IP: h.IP.String(), ProviderID: h.ProviderID, PodCIDR: cidr, ControlPlane: h.ControlPlane}, nil
	}
	c, err := s.ClusterValues()
	if err != nil {
		return packages.Values{}, err
	}
	v := packages.Values{Cluster: c}
	if v.Node, err = node(h); err != nil {
		return v, err
	}
	for _, o := range s.Hosts {
		n, err := node(o)
		if err != nil {
			return v, err
		}
		v.Nodes = append(v.Nodes, n)
		if o.ControlPlane {
			v.ControlPlane = append(v.ControlPlane, n)
		}
	}
	return v, nil
}

// ClusterValues describe the cluster of spec, defaults applied: what its packages' templates
// see as .Cluster, and its charts as global.edgefleet.cluster (charts.WithCluster).
func (s Spec) ClusterValues() (packages.ClusterValues, error) {
	s = s.withDefaults()
	dns, err := dnsServiceIP(s.ServiceCIDR)
	if err != nil {
		return packages.ClusterValues{}, err
	}
	c := packages.ClusterValues{
		Name: s.Name, KubernetesVersion: s.KubernetesVersion,
		APIServer:   "https://" + hostPortString(s.APIEndpoint, APIPort),
		ServiceCIDR: s.ServiceCIDR, PodCIDR: s.PodCIDR, DNSServiceIP: dns.String(), DNSDomain: DNSDomain, Workers: s.Workers,
	}
	if s.KMS != nil {
		c.KMS = &s.KMS.KMSValues
	}
	return c, nil
}

// NodePodCIDR is the part of the cluster's pod CIDR (IPv4) whose pods run on the host at ip: the
// cluster's prefix cut in 256, the part numbered by the last byte of the host's address. It is
// stable whatever other hosts come and go; hosts whose addresses end in the same byte would
// share one and are refused (a site's hosts share a /24 in practice).
func NodePodCIDR(podCIDR string, ip netip.Addr) (string, error) {
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil || !p.Addr().Is4() {
		return "", fmt.Errorf("pod CIDR %q: want an IPv4 CIDR such as %s", podCIDR, DefaultPodCIDR)
	}
	bits := p.Bits() + 8
	if bits > 26 {
		return "", fmt.Errorf("pod CIDR %q: at most a /18, so that each of 256 hosts gets a /26 or more", podCIDR)
	}
	if !ip.Is4() {
		return "", fmt.Errorf("address %s: the pod network needs an IPv4 host address", ip)
	}
	base := p.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n |= uint32(ip.As4()[3]) << (32 - bits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), bits).String(), nil
}

// dnsServiceIP is the cluster DNS service's address: the tenth of the service CIDR.
func dnsServiceIP(serviceCIDR string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("service CIDR %q: %w", serviceCIDR, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}, fmt.Errorf("service CIDR %q: too small for the DNS service's address (its tenth)", serviceCIDR)
	}
	return a, nil
}

// saveAdminKubeconfig keeps the admin kubeconfig in the secret store, writing only a change.
func (b *BringUp) saveAdminKubeconfig(ctx context.Context, spec Spec, bundle *pki.Bundle) error {
	kc, err := bundle.AdminKubeconfig()
	if err != nil {
		return err
	}
	name := AdminKubeconfigSecret(spec.Name)
	old, err := b.secrets.Get(ctx, name)
	switch {
	case errors.Is(err, secrets.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read the admin kubeconfig: %w", err)
	case bytes.Equal(old["value"], kc):
		return nil
	}
	if err := b.secrets.Put(ctx, name, map[string][]byte{"value": kc}); err != nil {
		return fmt.Errorf("save the admin kubeconfig: %w", err)
	}
	return nil
}

func hostPort(ip netip.Addr, port int) string { return netip.AddrPortFrom(ip, uint16(port)).String() }

func hostPortString(host string, port int) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return hostPort(ip, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

func (s Spec) controlPlane() []Host {
	var cp []Host
	for _, h := range s.Hosts {
		if h.ControlPlane {
			cp = append(cp, h)
		}
	}
	return cp
}

// withDefaults fills in APIEndpoint, ServiceCIDR and PodCIDR.
func (s Spec) withDefaults() Spec {
	if s.APIEndpoint == "" {
		if cp := s.controlPlane(); len(cp) > 0 {
			s.APIEndpoint = cp[0].IP.String()
		}
	}
	if s.ServiceCIDR == "" {
		s.ServiceCIDR = pki.DefaultServiceCIDR
	}
	if s.PodCIDR == "" {
		s.PodCIDR = DefaultPodCIDR
	}
	// The packages the cluster runs: those whose requirement it meets.
	s.Packages = slices.DeleteFunc(slices.Clone(s.Packages), func(p install.Package) bool {
		return p.Manifest != nil && !p.Manifest.Requires.Met(s.KMS != nil)
	})
	return s
}

// PKISpec is the spec of the cluster's PKI (bpa/pki), defaults applied.
func (s Spec) PKISpec() pki.Spec {
	s = s.withDefaults()
	ps := pki.Spec{ClusterName: s.Name, APIEndpoint: s.APIEndpoint, APIPort: APIPort, ServiceCIDR: s.ServiceCIDR, Lifetime: s.Certificates,
		SecretEncryptionKeyRotations: s.SecretEncryptionKeyRotations, CARotations: s.CARotations, SecretEncryptionKMS: s.KMS != nil}
	for _, h := range s.Hosts {
		m := pki.Member{Name: h.Name, IP: h.IP}
		if h.ControlPlane {
			ps.ControlPlane = append(ps.ControlPlane, m)
		} else {
			ps.Nodes = append(ps.Nodes, m)
		}
	}
	return ps
}

// validate checks what the PKI does not, defaults applied: every error names the field at fault.
func (s Spec) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q: %s", s.Name, msgs[0]))
	}
	if s.KubernetesVersion == "" {
		errs = append(errs, errors.New("kubernetesVersion: required"))
	}
	if len(s.controlPlane()) == 0 {
		errs = append(errs, errors.New("hosts: no control-plane host"))
	}
	if _, err := dnsServiceIP(s.ServiceCIDR); err != nil {
		errs = append(errs, fmt.Errorf("serviceCIDR: %w", err))
	}
	podCIDRs := map[string]string{}
	for i, h := range s.Hosts {
		if !h.IP.IsValid() {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): ip: required", i, h.Name))
		} else if cidr, err := NodePodCIDR(s.PodCIDR, h.IP); err != nil {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): %w", i, h.Name, err))
		} else if other, dup := podCIDRs[cidr]; dup {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): its address %s ends in the same byte as %s's: hosts get their pod CIDR by that byte", i, h.Name, h.IP, other))
		} else {
			podCIDRs[cidr] = h.Name
		}
		if h.SSH.Name == "" || h.SSH.Addr == "" {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): ssh: name and address required", i, h.Name))
		}
	}
	if len(s.Packages) == 0 {
		errs = append(errs, errors.New("packages: none"))
	}
	if s.KMS != nil {
		errs = append(errs, s.KMS.validate())
	}
	importers := slices.ContainsFunc(s.Packages, func(p install.Package) bool { return p.Manifest != nil && p.Manifest.Hooks.ImportImage != "" })
	if len(s.Images) > 0 && !importers {
		errs = append(errs, fmt.Errorf("images: %d container images, but no package imports images (an importImage hook in its manifest, as a container runtime's has)", len(s.Images)))
	}
	if _, err := Levels(s.Packages); err != nil {
		errs = append(errs, err)
	}
	// Two packages may write one path only with the same file of the PKI (both want the CA).
	type writer struct{ pkg, pki string }
	writers := map[string]writer{}
	for _, p := range s.Packages {
		if p.Manifest == nil {
			continue // Levels said so
		}
		for _, c := range p.Manifest.Config {
			if w, dup := writers[c.Path]; dup && (c.PKI == "" || w.pki != c.PKI) {
				errs = append(errs, fmt.Errorf("packages: %s and %s both write %s", w.pkg, p.Manifest.Name, c.Path))
			}
			writers[c.Path] = writer{p.Manifest.Name, c.PKI}
		}
	}
	return errors.Join(errs...)
}

// validate checks what the KMS plugin needs to reach Vault; every error names the field.
func (k *KMS) validate() error {
	var errs []error
	if u, err := url.Parse(k.VaultAddr); err != nil || u.Scheme != "https" || u.Host == "" {
		errs = append(errs, fmt.Errorf("kms.vaultAddr %q: want an https URL (the control-plane hosts reach Vault over TLS)", k.VaultAddr))
	}
	for _, f := range []struct{ name, v string }{{"authMount", k.AuthMount}, {"role", k.Role}, {"transitMount", k.TransitMount}, {"transitKey", k.TransitKey}} {
		if name, v := f.name, f.v; v == "" || strings.ContainsAny(v, " \t\n\"'$`\\") {
			errs = append(errs, fmt.Errorf("kms.%s %q: required, without spaces, quotes, '$' or '\\'", name, v))
		}
	}
	if len(k.VaultCA) == 0 {
		errs = append(errs, errors.New("kms.vaultCA: required (the CAs the plugin trusts for Vault's certificate)"))
	}
	if len(bytes.TrimSpace(k.Token)) == 0 {
		errs = append(errs, errors.New("kms.token: required (a ServiceAccount token of the site's cluster for Vault's Kubernetes auth method)"))
	}
	return errors.Join(errs...)
}
