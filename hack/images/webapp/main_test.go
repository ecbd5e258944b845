package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestWebapp runs the program: it answers with its pod's and node's names and is healthy;
// on SIGTERM it goes on answering for the drain while /healthz fails, then exits 0. Without
// the downward API's variables it refuses to start.
func TestWebapp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "webapp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const drain = 2 * time.Second
	cmd := exec.Command(bin, "-http", addr, "-drain", drain.String())
	cmd.Env = append(os.Environ(), "POD_NAME=web-0", "NODE_NAME=node-a")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	get := func(path string) (int, string) {
		c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testutil.WaitFor(t, 10*time.Second, "webapp healthy", func() (bool, string) {
		code, body := get("/healthz")
		return code == http.StatusOK && body == "ok\n", fmt.Sprintf("%d %q", code, body)
	})
	if code, body := get("/"); code != http.StatusOK || body != "hello from web-0 on node-a\n" {
		t.Errorf("GET /: %d %q", code, body)
	}
	if code, _ := get("/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	terminated := time.Now()
	testutil.WaitFor(t, drain/2, "/healthz failing once terminated", func() (bool, string) {
		code, body := get("/healthz")
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %q", code, body)
	})
	if code, body := get("/"); code != http.StatusOK || time.Since(terminated) > drain {
		t.Errorf("GET / while draining (%s after SIGTERM): %d %q", time.Since(terminated).Round(time.Millisecond), code, body)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("webapp after SIGTERM: %v, want exit 0", err)
	}
	if d := time.Since(terminated); d < drain {
		t.Errorf("webapp exited %s after SIGTERM, before its drain of %s", d, drain)
	}
	if code, body := get("/"); code != 0 {
		t.Errorf("GET / after the exit: %d %q", code, body)
	}

	out, err := exec.Command(bin, "-http", addr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "$POD_NAME and $NODE_NAME must be set") {
		t.Errorf("webapp without POD_NAME and NODE_NAME: %v: %s", err, out)
	}
}
