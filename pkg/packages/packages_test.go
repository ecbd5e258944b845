package packages_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/pkg/packages"
)

// srcDir lays out a package source directory.
func srcDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, c := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"files/bin/tool":          {"#!/bin/sh\necho tool\n", 0o755},
		"files/share/tool/README": {"read me\n", 0o644},
		"units/tool.service":      {"[Service]\nExecStart=/bin/true\n", 0o644},
		"hooks/health-check":      {"#!/bin/sh\nexit 0\n", 0o755},
		"hooks/pre-install":       {"#!/bin/sh\n:\n", 0o755},
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func manifest() packages.Manifest {
	return packages.Manifest{
		Name: "tool", Version: "1.2.3", Architecture: "amd64",
		Units: []string{"tool.service"},
		Hooks: packages.Hooks{PreInstall: "pre-install", HealthCheck: "health-check"},
	}
}

func TestBuildAndRead(t *testing.T) {
	dir := srcDir(t)
	var a, b bytes.Buffer
	m, err := packages.Build(&a, manifest(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].Path != "bin/tool" || m.Files[0].Mode != "0755" || m.Files[1].Path != "share/tool/README" || m.Files[1].Mode != "0644" {
		t.Errorf("files %+v", m.Files)
	}
	if _, err := packages.Build(&b, manifest(), dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two builds of the same inputs differ")
	}
	got, err := packages.Read(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "tool" || got.Version != "1.2.3" || got.APIVersion != packages.APIVersion || len(got.Files) != 2 || got.Files[0].SHA256 != m.Files[0].SHA256 {
		t.Errorf("read back %+v", got)
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(m *packages.Manifest, dir string)
		want   string
	}{
		"bad name":         {func(m *packages.Manifest, _ string) { m.Name = "Tool" }, "manifest: name"},
		"bad version":      {func(m *packages.Manifest, _ string) { m.Version = "" }, "manifest: version"},
		"bad unit":         {func(m *packages.Manifest, _ string) { m.Units = []string{"../x.service"} }, "manifest: units[0]"},
		"missing unit":     {func(m *packages.Manifest, _ string) { m.Units = []string{"other.service"} }, "units/other.service"},
		"missing hook":     {func(m *packages.Manifest, _ string) { m.Hooks.PostInstall = "post-install" }, "hooks/post-install"},
		"bad hook name":    {func(m *packages.Manifest, _ string) { m.Hooks.PostInstall = "../x" }, "hooks.postInstall"},
		"negative check":   {func(m *packages.Manifest, _ string) { m.HealthCheck.TimeoutSeconds = -1 }, "healthCheck"},
		"bad hosts":        {func(m *packages.Manifest, _ string) { m.Hosts = "workers" }, `manifest: hosts "workers"`},
		"after itself":     {func(m *packages.Manifest, _ string) { m.After = []string{"tool"} }, "after[0] \"tool\": a package cannot come after itself"},
		"after twice":      {func(m *packages.Manifest, _ string) { m.After = []string{"a", "a"} }, "after[1] \"a\": listed twice"},
		"after a bad name": {func(m *packages.Manifest, _ string) { m.After = []string{"A"} }, "after[0] \"A\": not a package name"},
		"relative config":  {func(m *packages.Manifest, _ string) { m.Config = []packages.ConfigFile{{Path: "etc/x", Template: "x"}} }, `config[0].path "etc/x"`},
		"config in packages": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/opt/edgefleet/packages/tool/x", Template: "x"}}
		}, "inside the packages' directory"},
		"config twice": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "x"}, {Path: "/etc/x", PKI: "pki/ca.crt"}}
		}, `config[1].path "/etc/x": listed twice`},
		"server of a certificate": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", PKI: "pki/ca.crt", Server: "https://127.0.0.1:6444"}}
		}, `config[0].server "https://127.0.0.1:6444": only a kubeconfig of the PKI`},
		"server of a template": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "x", Server: "https://127.0.0.1:6444"}}
		}, `config[0].server "https://127.0.0.1:6444": only a kubeconfig of the PKI`},
		"server not https": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x.conf", PKI: "kubelet.conf", Server: "http://127.0.0.1:6444"}}
		}, `config[0].server "http://127.0.0.1:6444": want https://host:port`},
		"server with a path": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x.conf", PKI: "kubelet.conf", Server: "https://127.0.0.1:6444/api"}}
		}, `want https://host:port and nothing more`},
		"config of two sources": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "x", PKI: "pki/ca.crt"}}
		}, "config[0] (/etc/x): want exactly one of template, pki and kms"},
		"config of a template and a KMS file": {func(m *packages.Manifest, _ string) {
			m.Requires = packages.RequiresKMS
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "x", KMS: packages.KMSToken}}
		}, "config[0] (/etc/x): want exactly one of template, pki and kms"},
		"a KMS file of a package that does not require KMS": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/t", KMS: packages.KMSToken}}
		}, `config[0].kms (/etc/t): only a package that requires "kms"`},
		"an unknown KMS file": {func(m *packages.Manifest, _ string) {
			m.Requires = packages.RequiresKMS
			m.Config = []packages.ConfigFile{{Path: "/etc/t", KMS: "key"}}
		}, `config[0].kms "key": want "vault-ca.crt" or "token"`},
		"the KMS token readable by all": {func(m *packages.Manifest, _ string) {
			m.Requires = packages.RequiresKMS
			m.Config = []packages.ConfigFile{{Path: "/etc/t", KMS: packages.KMSToken, Mode: "0644"}}
		}, `config[0].mode "0644": token holds a private key or a credential`},
		"an unknown requirement":  {func(m *packages.Manifest, _ string) { m.Requires = "vault" }, `requires "vault": want "kms" or nothing`},
		"config without a source": {func(m *packages.Manifest, _ string) { m.Config = []packages.ConfigFile{{Path: "/etc/x"}} }, "want exactly one"},
		"a key readable by all": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/k", PKI: "pki/sa.key", Mode: "0644"}}
		}, `config[0].mode "0644": pki/sa.key holds a private key or a credential`},
		"a template that does not parse": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "{{.Node.Name"}}
		}, "config[0].template (/etc/x)"},
		"a template naming an unknown value": {func(m *packages.Manifest, _ string) {
			m.Config = []packages.ConfigFile{{Path: "/etc/x", Template: "--ip={{.Node.Address}}"}}
		}, "can't evaluate field Address"},
		"symlink in files": {func(_ *packages.Manifest, dir string) {
			_ = os.Symlink("/etc/passwd", filepath.Join(dir, "files", "passwd"))
		}, "only regular files"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := srcDir(t)
			m := manifest()
			tc.mutate(&m, dir)
			_, err := packages.Build(&bytes.Buffer{}, m, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// entry is one entry of a hand-made archive.
type entry struct {
	name string
	typ  byte
	mode int64
	data string
}

func archive(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: e.mode, Size: int64(len(e.data))}
		if typ != tar.TypeReg {
			hdr.Size = 0
			hdr.Linkname = e.data
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadRefusesWhatTheManifestDoesNotSay(t *testing.T) {
	const tool = "#!/bin/sh\necho tool\n"
	var built bytes.Buffer
	good, err := packages.Build(&built, manifest(), srcDir(t))
	if err != nil {
		t.Fatal(err)
	}
	mf := func(mutate func(*packages.Manifest)) entry {
		m := *good
		m.Files = slices.Clone(good.Files[:1]) // bin/tool only
		m.Hooks = packages.Hooks{HealthCheck: "health-check"}
		if mutate != nil {
			mutate(&m)
		}
		raw, err := yaml.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		return entry{name: packages.ManifestFile, mode: 0o644, data: string(raw)}
	}
	unit := entry{name: "units/tool.service", mode: 0o644, data: "[Service]\n"}
	hook := entry{name: "hooks/health-check", mode: 0o755, data: "#!/bin/sh\n"}
	bin := entry{name: "files/bin/tool", mode: 0o755, data: tool}
	for name, tc := range map[string]struct {
		entries []entry
		want    string
	}{
		"accepted with directories": {[]entry{mf(nil), {name: "files/", typ: tar.TypeDir, mode: 0o755}, bin, unit, hook}, ""},
		"manifest not first":        {[]entry{bin, mf(nil), unit, hook}, "first entry"},
		"unknown manifest field":    {[]entry{{name: packages.ManifestFile, mode: 0o644, data: "apiVersion: " + packages.APIVersion + "\nname: tool\nversion: '1'\narchitecture: amd64\nbogus: 1\n"}}, "bogus"},
		"altered file":              {[]entry{mf(nil), {name: "files/bin/tool", mode: 0o755, data: "#!/bin/sh\necho evil\n"}, unit, hook}, "sha256"},
		"wrong mode":                {[]entry{mf(nil), {name: "files/bin/tool", mode: 0o4755, data: tool}, unit, hook}, "mode 4755"},
		"extra file":                {[]entry{mf(nil), bin, unit, hook, {name: "files/etc/shadow", mode: 0o644, data: "x"}}, "not in the manifest"},
		"missing file":              {[]entry{mf(nil), unit, hook}, "files/bin/tool is in the manifest but not in the archive"},
		"missing unit":              {[]entry{mf(nil), bin, hook}, "units/tool.service is in the manifest but not in the archive"},
		"file twice":                {[]entry{mf(nil), bin, bin, unit, hook}, "twice"},
		"symlink":                   {[]entry{mf(nil), {name: "files/bin/tool", typ: tar.TypeSymlink, data: "/etc/passwd"}, unit, hook}, "not a regular file"},
		"hook not executable":       {[]entry{mf(nil), bin, unit, {name: "hooks/health-check", mode: 0o644, data: "#!/bin/sh\n"}}, "not executable"},
		"path leaves the package":   {[]entry{mf(func(m *packages.Manifest) { m.Files[0].Path = "../../etc/passwd" }), bin, unit, hook}, "leaves the package"},
		"directory leaves":          {[]entry{mf(nil), {name: "../x/", typ: tar.TypeDir, mode: 0o755}, bin, unit, hook}, "leaves the package"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := packages.Read(bytes.NewReader(archive(t, tc.entries)))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := packages.Read(strings.NewReader("not gzip")); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("plain text: %v", err)
	}
	// ReadManifest reads the manifest alone: the payload after it is not checked.
	if m, err := packages.ReadManifest(bytes.NewReader(archive(t, []entry{mf(nil), {name: "files/bin/tool", mode: 0o755, data: "evil"}}))); err != nil || m.Name != good.Name {
		t.Errorf("ReadManifest of a package with an altered file = %+v, %v; want its manifest", m, err)
	}
	if _, err := packages.ReadManifest(bytes.NewReader(archive(t, []entry{bin, mf(nil)}))); err == nil || !strings.Contains(err.Error(), "first entry") {
		t.Errorf("ReadManifest of an archive whose manifest is not first: %v", err)
	}
}

// TestRender: a template sees the cluster, its host and every host, with hostPort and join.
func TestRender(t *testing.T) {
	c := packages.ConfigFile{Path: "/etc/x/env", Template: `NAME={{.Node.Name}} ETCD={{range $i, $m := .ControlPlane}}{{if $i}},{{end}}https://{{hostPort $m.IP 2379}}{{end}} POD={{.Node.PodCIDR}} DNS={{.Cluster.DNSServiceIP}}{{with .Node.ProviderID}} ID={{.}}{{end}}`}
	v := packages.Values{
		Cluster: packages.ClusterValues{DNSServiceIP: "10.96.0.10"},
		Node:    packages.NodeValues{Name: "w-0", PodCIDR: "10.244.20.0/24"},
		ControlPlane: []packages.NodeValues{
			{Name: "cp-0", IP: "10.0.0.10"}, {Name: "cp-1", IP: "fd00::11"},
		},
	}
	got, err := c.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := "NAME=w-0 ETCD=https://10.0.0.10:2379,https://[fd00::11]:2379 POD=10.244.20.0/24 DNS=10.96.0.10"; string(got) != want {
		t.Errorf("rendered\n %q\nwant\n %q", got, want)
	}
	if got, err := (packages.ConfigFile{Path: "/etc/k", PKI: "pki/ca.crt"}).Render(v); err != nil || got != nil {
		t.Errorf("a PKI file rendered %q, %v; want nothing (the BPA fills it in)", got, err)
	}
	for _, tc := range []struct {
		c    packages.ConfigFile
		want uint32
	}{
		{packages.ConfigFile{Template: "x"}, 0o644},
		{packages.ConfigFile{Template: "x", Mode: "0640"}, 0o640},
		{packages.ConfigFile{PKI: "pki/ca.crt"}, 0o644},
		{packages.ConfigFile{PKI: "pki/etcd/server.key"}, 0o600},
		{packages.ConfigFile{PKI: "kubelet.conf"}, 0o600},
		{packages.ConfigFile{PKI: "encryption-config.yaml"}, 0o600},
	} {
		if got := tc.c.Perm(); got != tc.want {
			t.Errorf("%+v: mode %o, want %o", tc.c, got, tc.want)
		}
	}
}
