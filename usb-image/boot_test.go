package usbimage_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/siteimage"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const (
	// marker is what the site stack's ready unit prints on the console once every service of
	// the stack is healthy (usb-image/stack/lib/site-ready).
	marker = "EDGEFLEET-SITE-READY version="
	// buildTimeout bounds usb-image/build.sh: minutes cold (mmdebstrap), seconds warm.
	buildTimeout = 30 * time.Minute
	// bootTimeout bounds one boot under TCG emulation on a shared machine (go test -timeout is
	// 45m). A boot's console is no measure of its progress: after the login prompt the stack
	// starts its services without a line until the marker (9 quiet minutes at a load of 20).
	bootTimeout = 35 * time.Minute
	// maxConsole bounds what is kept of a console's output.
	maxConsole = 4 << 20
	ovmfCode   = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars   = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// TestBootImage builds the base image (cached), injects a site identity made here, appends a site
// pack of two artifacts, and boots it in qemu-system-x86_64 -accel tcg twice, concurrently: BIOS
// with the image as a CD, UEFI (OVMF) with the image as a USB stick. Both boots must show the
// identity unit's line with the identity files as injected (digests and 0600) and the pack unit's
// line with both artifacts imported from the boot medium. The CD boot then runs on, on two vCPUs,
// until the marker line says the whole site stack is healthy. The stick boot stops at the pack
// line: the firmware, the boot loader and the medium are what differ between the two, and after
// the pack the stack starts the same way from either; emulating it twice took both cores for
// about 18 minutes of every `make test`.
// Needs root (the build) and qemu-system-x86 and ovmf.
func TestBootImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("building the base image needs root (mmdebstrap, overlay mount)")
	}
	for _, need := range []string{"qemu-system-x86_64", ovmfCode, ovmfVars} {
		if _, err := exec.LookPath(need); err != nil {
			if _, err := os.Stat(need); err != nil {
				t.Fatalf("%s missing: apt-get install qemu-system-x86 ovmf", need)
			}
		}
	}
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := buildBase(t, root)

	ca := siteimagetest.CA(t)
	id := siteimage.Identity{URL: "https://global.edgefleet.test:8443", CA: ca, Site: "stores/store-0042", Token: "efs1." + rand.Text()}
	dir := t.TempDir()
	image := filepath.Join(dir, "site-a.iso")
	start := time.Now()
	if err := siteimage.Inject(base, image, id, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("identity injected in %v", time.Since(start).Round(time.Millisecond))
	// An air-gapped site pack after the ISO volume: the stack imports it from the boot medium
	// (/dev/sr0 for the CD, the whole disk for the stick) before the local controller starts.
	files := siteimagetest.PackFiles(t, 3<<20, 100<<10)
	if _, err := siteimage.AppendPack(image, "stores/edge-1", "v1.36.3", files); err != nil {
		t.Fatal(err)
	}
	const packLine = "EDGEFLEET-PACK " // the pack unit's one line, whatever it found
	wantPack := fmt.Sprintf("EDGEFLEET-PACK release=stores/edge-1 artifacts=2 imported=2 bytes=%d", 3<<20+100<<10)
	// The identity line the boot prints (usb-image/boot/edgefleet-identity): digests, never the token.
	wantIdentity := fmt.Sprintf("EDGEFLEET-IDENTITY url=%s site=%s ca-sha256=%s token-sha256=%s modes=600,600,600,600",
		id.URL, id.Site, digest(append(bytes.TrimSpace(ca), '\n')), digest([]byte(id.Token)))

	t.Run("BIOS CD", func(t *testing.T) {
		t.Parallel()
		boot(t, marker, []string{wantIdentity, wantPack}, 2, "-machine", "pc", "-cdrom", image, "-boot", "d")
	})
	t.Run("UEFI USB stick", func(t *testing.T) {
		t.Parallel()
		vars := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
		b, err := os.ReadFile(ovmfVars)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vars, b, 0o600); err != nil {
			t.Fatal(err)
		}
		boot(t, packLine, []string{wantIdentity, wantPack}, 1, "-machine", "q35",
			"-drive", "if=pflash,format=raw,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,file="+vars,
			"-device", "qemu-xhci",
			"-drive", "if=none,id=stick,format=raw,readonly=on,file="+image,
			"-device", "usb-storage,drive=stick,bootindex=0")
	})
}

// buildBase runs usb-image/build.sh into the tools cache and returns the base image's path.
func buildBase(t *testing.T, root string) string {
	t.Helper()
	cache := os.Getenv("EDGEFLEET_TOOLS_CACHE")
	if cache == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, "edgefleet", "tools")
	}
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "usb-image", "build.sh"), cache, filepath.Join(root, "bin"))
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("usb-image/build.sh: %v\n%s", err, tail(stderr.Bytes(), 8<<10))
	}
	t.Logf("base image ready in %v:\n%s", time.Since(start).Round(time.Second), tail(stderr.Bytes(), 2<<10))
	return strings.TrimSpace(string(out))
}

// boot runs qemu with cpus vCPUs and args plus the common ones, its serial console into a file,
// until the line until comes (or the deadline), and checks the lines wanted came before it. More
// than one vCPU runs multi-threaded TCG, a host thread each.
func boot(t *testing.T, until string, want []string, cpus int, args ...string) {
	console := filepath.Join(t.TempDir(), "console.log")
	ctx, cancel := context.WithTimeout(t.Context(), bootTimeout)
	defer cancel()
	args = append([]string{"-accel", "tcg,thread=multi", "-m", "2048", "-smp", strconv.Itoa(cpus), "-display", "none", "-no-reboot",
		"-serial", "file:" + console, "-monitor", "none", "-nic", "none"}, args...)
	cmd := exec.Command("qemu-system-x86_64", args...)
	var qemuOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qemuOut, &qemuOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error // set before exited closes
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails only when qemu has exited already
		<-exited
	})

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		lines := consoleLines(t, console)
		if has(lines, until) {
			t.Logf("%s after %v", until, time.Since(start).Round(time.Second))
			for _, w := range want {
				if !has(lines, w) {
					t.Errorf("no line %q on the console", w)
				}
			}
			if t.Failed() {
				t.Fatalf("console:\n%s", strings.Join(lastN(lines, 60), "\n"))
			}
			return
		}
		select {
		case <-exited:
			t.Fatalf("qemu exited before %s: %v\n%s\nconsole:\n%s", until, waitErr, qemuOut.String(), strings.Join(lastN(consoleLines(t, console), 80), "\n"))
		case <-ctx.Done():
			load, _ := os.ReadFile("/proc/loadavg")
			t.Fatalf("no %s within %v (load average %s); console's end:\n%s", until, bootTimeout, bytes.TrimSpace(load), strings.Join(lastN(consoleLines(t, console), 30), "\n"))
		case <-tick.C:
		}
	}
}

// consoleLines reads up to maxConsole bytes of the console, split into lines without carriage
// returns.
func consoleLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(f, maxConsole))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
	}
	return lines
}

// has reports whether a line is want, after any console prefix (systemd's status column).
func has(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

func lastN(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
