package ipa_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// osImage is bin/osimage resolved: the OS disk image (disk.qcow2) and its sha256. Missing, the
// test fails naming the command that builds it.
type osImage struct {
	dir    string
	sha256 string
}

func osImageFiles(t *testing.T) osImage {
	t.Helper()
	repo, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(repo, "bin", "osimage"))
	var sum []byte
	if err == nil {
		if _, err = os.Stat(filepath.Join(dir, "disk.qcow2")); err == nil {
			sum, err = os.ReadFile(filepath.Join(dir, "disk.qcow2.sha256"))
		}
	}
	if err != nil {
		t.Fatalf("the OS disk image is missing (%v): run 'hack/tools.sh osimage' (as root, a few minutes once; make tools builds it too)", err)
	}
	f := strings.Fields(string(sum))
	if len(f) != 2 || f[1] != "disk.qcow2" || len(f[0]) != 64 {
		t.Fatalf("%s/disk.qcow2.sha256 is not sha256sum's line for disk.qcow2: %q (rebuild: hack/tools.sh osimage)", dir, sum)
	}
	return osImage{dir: dir, sha256: f[0]}
}

// deployBed is a bed for deploys: the OS image served by the run's HTTP server, an SSH forward,
// and the node enrolled, without automated cleaning, and available.
func deployBed(t *testing.T) (*bed, osImage, ironicNode) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ipa: needs root (Ironic in private namespaces, chroot)")
	}
	img := osImageFiles(t)
	b := newBedWith(t, bedOptions{OSImage: img.dir, SSH: true})
	node := b.enroll()
	b.ir.CallT(t, http.MethodPatch, "/v1/nodes/"+node.UUID, []map[string]any{
		// Cleaning is TestCleaning's: providing the node here goes straight to available.
		{"op": "add", "path": "/automated_clean", "value": false},
		// The image's URL names the host's loopback (where Ironic checks it with a HEAD); the
		// agent on qemu's user-mode network reaches that loopback at 10.0.2.2 only, so it asks
		// the run's HTTP server there, as its proxy, for the same URL.
		{"op": "add", "path": "/driver_info/image_http_proxy", "value": "http://10.0.2.2:" + port(b.ir.HTTPURL)},
	}, http.StatusOK, nil)
	b.provision(node.UUID, "provide")
	node = b.wait(node.UUID, "available", 2*time.Minute, 2*time.Minute)
	return b, img, node
}

// port is the port of an http://HOST:PORT URL.
func port(u string) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	return p
}

// setImage sets the node's instance_info: the image from the run's HTTP server, qcow2, with
// its sha256.
func (b *bed) setImage(uuid, sha string) {
	b.ir.CallT(b.t, http.MethodPatch, "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": b.ir.FileURL("osimage", "disk.qcow2")},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": sha},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
	}, http.StatusOK, nil)
}

// deploy asks Ironic to deploy the node with a config drive it builds from configdrive.
func (b *bed) deploy(uuid string, configdrive map[string]any) {
	body := map[string]any{"target": "active"}
	if configdrive != nil {
		body["configdrive"] = configdrive
	}
	b.ir.CallT(b.t, http.MethodPut, "/v1/nodes/"+uuid+"/states/provision", body, http.StatusAccepted, nil)
}

// TestDeploy: real Ironic deploys the OS image with its real agent (booted by Redfish virtual
// media) to a VM's disk, with a config drive it builds from JSON; the VM boots its own disk,
// cloud-init applies the config drive, and the test logs in with its SSH key.
func TestDeploy(t *testing.T) {
	start := time.Now()
	b, img, node := deployBed(t)
	t.Logf("available after %s", time.Since(start).Round(time.Second))

	signer := loginKey(t)
	hostname := fmt.Sprintf("edge-%d", time.Now().UnixNano()%1_000_000)
	marker := fmt.Sprintf("edgefleet-user-data-%d", time.Now().UnixNano())

	b.setImage(node.UUID, img.sha256)
	deployStart := time.Now()
	b.deploy(node.UUID, map[string]any{
		"meta_data": map[string]any{
			"hostname":    hostname,
			"public_keys": map[string]string{"0": authorizedKey(signer)},
		},
		// user data: cloud-init runs it at first boot; the test reads the file back over SSH.
		"user_data": "#cloud-config\nwrite_files:\n- path: /etc/edgefleet-user-data\n  content: " + marker + "\n",
	})
	node = b.wait(node.UUID, "active", 10*time.Minute, 25*time.Minute)
	active := time.Now()
	if node.LastError != "" {
		t.Errorf("node's last error after the deploy: %s", node.LastError)
	}

	// The VM now boots its own disk: cloud-init prints the host keys it made on the console;
	// the test pins the ed25519 one, then logs in with its own key.
	hostKey := b.waitHostKey()
	keyed := time.Now()
	t.Logf("host key printed on the console after %s: %s", keyed.Sub(active).Round(time.Second), ssh.FingerprintSHA256(hostKey))
	client := dialSSH(t, b.sshPort, signer, hostKey, 3*time.Minute)
	loggedIn := time.Now()
	defer client.Close()

	if got := strings.TrimSpace(runSSH(t, client, "hostname")); got != hostname {
		t.Errorf("hostname = %q, want the config drive's %q", got, hostname)
	}
	if got := strings.TrimSpace(runSSH(t, client, "findmnt -no SOURCE /")); got != "/dev/vda1" {
		t.Errorf("root is %q, want the disk's /dev/vda1", got)
	}
	if got := strings.TrimSpace(runSSH(t, client, "cat /etc/edgefleet-user-data")); got != marker {
		t.Errorf("/etc/edgefleet-user-data = %q, want the user data's %q", got, marker)
	}
	// cloud-init finished its first boot without an error in any module.
	if got := runSSH(t, client, "cloud-init status --wait"); !strings.Contains(got, "status: done") {
		t.Errorf("cloud-init status: %s", got)
	}
	t.Logf("the guest: %s", strings.TrimSpace(runSSH(t, client, "uname -r; cat /proc/cmdline; lsblk -rno NAME,SIZE,LABEL,MOUNTPOINT /dev/vda")))

	// SeaBIOS booted the CD (the agent) and then the disk, the disk last.
	fw, err := os.ReadFile(b.vm.FirmwareLog)
	if err != nil {
		t.Fatal(err)
	}
	boots := regexp.MustCompile(`Booting from (DVD/CD|Hard Disk)`).FindAllString(string(fw), -1)
	if len(boots) < 2 || boots[0] != "Booting from DVD/CD" || boots[len(boots)-1] != "Booting from Hard Disk" {
		t.Errorf("SeaBIOS's boots were %q: want the CD (the agent) first, the hard disk last", boots)
	}
	if m := b.vm.Media(); m != "" {
		t.Errorf("the deployed VM's drive still holds %s", m)
	}

	// The phases, from the agent's log on the serial console (its lines carry the guest's clock,
	// which is the host's) and the test's own clock.
	agent := agentTimes(readFile(b.vm.SerialLog))
	t.Logf("phases: deploy asked → the agent's first log line (ISO, BMC, the agent's boot) %s; → prepare_image (lookup, heartbeat) %s; → image written (download, sha256, then qemu-img convert: %s s by the agent's count) %s; → active (config drive, power cycle) %s; → host keys on the console (GRUB, kernel, cloud-init) %s; → logged in %s; whole test %s",
		since(deployStart, agent.first), since(agent.first, agent.prepare), agent.writeSeconds, since(agent.prepare, agent.written), since(agent.written, active),
		since(active, keyed), since(keyed, loggedIn), time.Since(start).Round(time.Second))
}

// agentLog is what the phases read of the agent's log on the serial console.
type agentLog struct {
	first, prepare, written time.Time
	writeSeconds            string
}

var (
	agentLine    = regexp.MustCompile(`ironic-python-agent\[\d+\]: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) `)
	writtenInSec = regexp.MustCompile(`written to device /dev/\w+ in ([0-9.]+) seconds`)
)

func agentTimes(serial []byte) agentLog {
	var a agentLog
	for _, line := range strings.Split(string(serial), "\n") {
		m := agentLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", m[1], time.UTC)
		if err != nil {
			continue
		}
		if a.first.IsZero() {
			a.first = at
		}
		if a.prepare.IsZero() && strings.Contains(line, "prepare_image") {
			a.prepare = at
		}
		if w := writtenInSec.FindStringSubmatch(line); w != nil && a.written.IsZero() {
			a.written, a.writeSeconds = at, w[1]
		}
	}
	return a
}

// TestDeployRefusesABadChecksum: an image whose sha256 is not the one instance_info names is
// refused by the agent: the deploy fails naming the checksum, and nothing boots from the disk.
func TestDeployRefusesABadChecksum(t *testing.T) {
	start := time.Now()
	b, img, node := deployBed(t)
	wrong := sha256.Sum256([]byte("not the image " + img.sha256))
	b.setImage(node.UUID, hex.EncodeToString(wrong[:]))
	// The agent downloads again after a mismatch (9 times by default, 10 s apart: ~4 minutes
	// here); once is enough to see it refuse.
	b.ir.CallT(t, http.MethodPatch, "/v1/nodes/"+node.UUID, []map[string]any{
		{"op": "add", "path": "/driver_info/kernel_append_params", "value": b.kernelParams() + " ipa-image-download-connection-retries=0"},
	}, http.StatusOK, nil)
	b.deploy(node.UUID, map[string]any{"meta_data": map[string]any{"hostname": "never"}})
	node = b.wait(node.UUID, "deploy failed", 10*time.Minute, 25*time.Minute)
	t.Logf("deploy failed after %s: %s", time.Since(start).Round(time.Second), node.LastError)
	if !strings.Contains(strings.ToLower(node.LastError), "checksum") {
		t.Errorf("last_error does not name the checksum: %q", node.LastError)
	}
	// Nothing was written: the disk has no partition table (no MBR signature), and SeaBIOS never
	// booted it.
	head, err := readHead(b.vm.Disk, 512)
	if err != nil {
		t.Fatal(err)
	}
	if head[510] == 0x55 && head[511] == 0xaa {
		t.Errorf("the disk has a boot sector after a refused image")
	}
	if fw := readFile(b.vm.FirmwareLog); bytes.Contains(fw, []byte("Booting from Hard Disk")) {
		t.Errorf("SeaBIOS booted the disk after a refused image")
	}
	if bytes.Contains(readFile(b.vm.SerialLog), []byte("BEGIN SSH HOST KEY KEYS")) {
		t.Errorf("the image's OS ran (its host keys are on the console) after a refused image")
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}

// loginKey is an ed25519 key made for the test, to log in to the deployed OS with.
func loginKey(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// authorizedKey is signer's public key as an authorized_keys line.
func authorizedKey(signer ssh.Signer) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

// waitHostKey waits until the deployed OS printed its SSH host keys on the serial console and
// returns the ed25519 one: the only host key the test's SSH client accepts.
func (b *bed) waitHostKey() ssh.PublicKey {
	b.t.Helper()
	var hostKey ssh.PublicKey
	testutil.WaitProgress(b.t, 3*time.Minute, 10*time.Minute, "the deployed OS to print its SSH host keys on the serial console", func() (bool, string) {
		hostKey = consoleHostKey(b.vm.SerialLog)
		return hostKey != nil, fmt.Sprintf("serial console %d bytes", b.serialSize())
	})
	return hostKey
}

// serialSize is the size of the VM's serial console log: it grows while the guest works.
func (b *bed) serialSize() int64 {
	if st, err := os.Stat(b.vm.SerialLog); err == nil {
		return st.Size()
	}
	return 0
}

// consoleHostKey is the ed25519 host key cloud-init printed between its BEGIN/END SSH HOST KEY
// KEYS lines on the console, nil until it did.
func consoleHostKey(serialLog string) ssh.PublicKey {
	sc := bufio.NewScanner(bytes.NewReader(readFile(serialLog)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	in := false
	var key ssh.PublicKey
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimRight(sc.Text(), "\r"))
		switch {
		case strings.Contains(line, "-----BEGIN SSH HOST KEY KEYS-----"):
			in = true
		case strings.Contains(line, "-----END SSH HOST KEY KEYS-----"):
			in = false
		case in && strings.HasPrefix(line, "ssh-ed25519 "):
			if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err == nil {
				key = k
			}
		}
	}
	return key
}

// dialSSH logs in as root at the host's loopback port, with signer, accepting only hostKey;
// it retries while the guest's sshd is not up yet.
func dialSSH(t *testing.T, port int, signer ssh.Signer, hostKey ssh.PublicKey, limit time.Duration) *ssh.Client {
	t.Helper()
	cfg := &ssh.ClientConfig{
		User:              "root",
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   ssh.FixedHostKey(hostKey),
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           20 * time.Second,
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(limit)
	for {
		c, err := ssh.Dial("tcp", addr, cfg)
		if err == nil {
			return c
		}
		// sshd answered with the pinned key and refused the key: cloud-init printed the host
		// keys after it installed the authorized keys, so waiting changes nothing.
		if time.Now().After(deadline) || strings.Contains(err.Error(), "unable to authenticate") {
			t.Fatalf("ssh root@%s with the config drive's key, pinned host key %s: %v", addr, ssh.FingerprintSHA256(hostKey), err)
		}
		time.Sleep(2 * time.Second)
	}
}

func runSSH(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("ssh session for %q: %v", cmd, err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("ssh %q: %v: %s", cmd, err, out)
	}
	return string(out)
}

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

func since(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "?"
	}
	return to.Sub(from).Round(time.Second).String()
}
