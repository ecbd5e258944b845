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
