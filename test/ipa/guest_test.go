package ipa_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
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
