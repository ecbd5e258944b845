package ironic

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigVirtualMedia checks what virtual-media boot needs in ironic.conf, and the run's
// HTTP server, without starting Ironic.
func TestConfigVirtualMedia(t *testing.T) {
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "vmlinuz"), []byte("kernel"), 0o600); err != nil {
		t.Fatal(err)
	}
	i := &Ironic{Dir: t.TempDir()}
	t.Cleanup(func() { _ = i.Stop() })
	if err := i.serveHTTP(map[string]string{"ipa": files}); err != nil {
		t.Fatal(err)
	}
	if err := i.writeConfig(6385, &VirtualMediaOptions{AgentHost: "10.0.2.2"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(i.Dir, "ironic.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{
		"isolinux_bin = /usr/lib/ISOLINUX/isolinux.bin",
		"http_root = /var/lib/ironic/httpboot\nhttp_url = " + i.HTTPURL + "\n",
		"default_boot_mode = bios",
		"[redfish]\nkernel_append_params = nofb vga=normal console=ttyS0,115200n8",
		"[service_catalog]\n# The agent's way to Ironic: lookup, heartbeats and continue_inspection.\nendpoint_override = http://10.0.2.2:6385",
		"disable_zstandard_decompression = true",
		"erase_devices_priority = 0\nerase_devices_metadata_priority = 10\n",
		"[agent]\n# The agent's logs of a failed deploy or cleaning (the default is in the read-only tree).\ndeploy_logs_local_path = /var/lib/ironic/deploy-logs\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf lacks %q:\n%s", want, conf)
		}
	}
	if err := os.WriteFile(filepath.Join(i.Dir, "httpboot", "boot.iso"), []byte("iso"), 0o600); err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]string{i.HTTPURL + "/boot.iso": "iso", i.FileURL("ipa", "vmlinuz"): "kernel"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != want {
			t.Errorf("GET %s: %s %q, want 200 %q", url, resp.Status, got, want)
		}
	}

	if strings.Contains(conf, "fast_track") || strings.Contains(conf, "http_proxy") {
		t.Errorf("ironic.conf has fast track or the agent's proxy, which were not asked for:\n%s", conf)
	}

	// For baremetal-operator: fast track, and the run's HTTP server as the agent's proxy after
	// the caller's kernel parameters.
	op := &Ironic{Dir: t.TempDir(), HTTPURL: "http://127.0.0.1:8089"}
	if err := op.writeConfig(6385, &VirtualMediaOptions{AgentHost: "10.0.2.2", KernelParams: "console=ttyS0", ImageProxy: true, FastTrack: true}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(op.Dir, "ironic.conf"))
	for _, want := range []string{
		"[redfish]\nkernel_append_params = console=ttyS0 systemd.setenv=http_proxy=http://10.0.2.2:8089 systemd.setenv=no_proxy=10.0.2.2\n",
		"erase_devices_metadata_priority = 10\nfast_track = true\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ironic.conf for baremetal-operator lacks %q:\n%s", want, b)
		}
	}

	// Without virtual media, none of it.
	plain := &Ironic{Dir: t.TempDir()}
	if err := plain.writeConfig(6385, nil); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(plain.Dir, "ironic.conf"))
	for _, not := range []string{"http_url", "endpoint_override", "default_boot_mode"} {
		if strings.Contains(string(b), not) {
			t.Errorf("ironic.conf without virtual media has %s:\n%s", not, b)
		}
	}
	if err := (&Ironic{Dir: t.TempDir()}).writeConfig(6385, &VirtualMediaOptions{}); err == nil || !strings.Contains(err.Error(), "AgentHost") {
		t.Errorf("virtual media without AgentHost: %v, want an error naming AgentHost", err)
	}
}

// TestVirtualMediaTree: a tree without isolinux or mkisofs (built before hack/ironic.sh added
// them) is refused before anything starts, naming the command that rebuilds it.
func TestVirtualMediaTree(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "var/lib/ironic", "usr/lib/ISOLINUX", "usr/lib/syslinux/modules/bios", "usr/local/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"usr/bin/ironic", "usr/bin/ironic-dbsync", "usr/lib/ISOLINUX/isolinux.bin", "usr/lib/syslinux/modules/bios/ldlinux.c32"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Start(t.Context(), Options{Root: root, Dir: t.TempDir(), VirtualMedia: &VirtualMediaOptions{AgentHost: "10.0.2.2"}})
	if err == nil || !strings.Contains(err.Error(), "/usr/local/bin/mkisofs") || !strings.Contains(err.Error(), "hack/tools.sh ironic") {
		t.Fatalf("Start over a tree without mkisofs: %v, want an error naming mkisofs and hack/tools.sh ironic", err)
	}
	// The tree's link, absolute, resolves inside the tree only: it must count as there.
	if err := os.Symlink("/nonexistent-on-the-host/xorrisofs", filepath.Join(root, "usr/local/bin/mkisofs")); err != nil {
		t.Fatal(err)
	}
	if err := virtualMediaTree(root); err != nil {
		t.Errorf("a tree with isolinux, ldlinux.c32 and mkisofs: %v", err)
	}
}
