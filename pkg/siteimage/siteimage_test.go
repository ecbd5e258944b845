package siteimage

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a self-signed CA certificate made at test time, in PEM.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "siteimage test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// makeISO builds a real ISO 9660 image with xorriso (the tool grub-mkrescue drives) from the
// files given (path in the ISO → content), padded by a large file before them so the area is
// not at the start.
func makeISO(t *testing.T, files map[string][]byte) string {
	t.Helper()
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		t.Skip("xorriso missing: apt-get install xorriso (usb-image/build.sh installs it)")
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	for p, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	iso := filepath.Join(dir, "test.iso")
	out, err := exec.Command(xorriso, "-as", "mkisofs", "-R", "-J", "-V", "TEST", "-o", iso, tree).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	return iso
}

// baseISO is an ISO laid out as usb-image/build.sh lays out the base: an empty identity area.
func baseISO(t *testing.T) string {
	return makeISO(t, map[string][]byte{
		"live/filesystem.squashfs": bytes.Repeat([]byte("squash"), 100000),
		"edgefleet/identity.img":   area(nil),
		"boot/grub/grub.cfg":       []byte("menuentry x {}\n"),
	})
}

func TestInjectThenRead(t *testing.T) {
	base := baseISO(t)
	before, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Read(base); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("Read(base) = %v, want ErrNoIdentity", err)
	}
	id := Identity{URL: "https://global.example:8443", CA: testCA(t), Token: "efs1.abc.def"}
	out := filepath.Join(t.TempDir(), "site-a.iso")
	if err := Inject(base, out, id, false); err != nil {
		t.Fatal(err)
	}
	got, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != id.URL || got.Token != id.Token || !bytes.Equal(bytes.TrimSpace(got.CA), bytes.TrimSpace(id.CA)) {
		t.Fatalf("Read = %+v, want %+v", got, id)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("output mode %v, want 0600 (it holds a token)", st.Mode().Perm())
	}
	after, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("output is %d bytes, base %d", len(after), len(before))
	}
	// Only the area's bytes differ from the base.
	off, _, err := open(bytes.NewReader(after), out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after[:off], before[:off]) || !bytes.Equal(after[off+AreaSize:], before[off+AreaSize:]) {
		t.Error("bytes outside the identity area changed")
	}
	if now, _ := os.ReadFile(base); !bytes.Equal(now, before) {
		t.Error("the base image changed")
	}

	// A site image is a base for another (the area is replaced whole), and --force replaces.
	id2 := Identity{URL: "https://other.example", CA: id.CA, Token: "t2"}
	if err := Inject(out, out+".2", id2, false); err != nil {
		t.Fatal(err)
	}
	if err := Inject(out+".2", out, id2, true); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(out); err != nil || got.Token != "t2" || got.URL != id2.URL {
		t.Fatalf("Read after replace = %+v, %v", got, err)
	}
}

func TestInjectRefusesBadInput(t *testing.T) {
	base := baseISO(t)
	ca := testCA(t)
	good := Identity{URL: "https://global.example", CA: ca, Token: "tok"}
	notEdgefleet := makeISO(t, map[string][]byte{"live/x": []byte("x")})
	wrongSize := makeISO(t, map[string][]byte{"edgefleet/identity.img": area(nil)[:4096]})
	otherHeader := makeISO(t, map[string][]byte{"edgefleet/identity.img": make([]byte, AreaSize)})
	newerFormat := makeISO(t, map[string][]byte{"edgefleet/identity.img": append([]byte("EDGEFLEET-IDENTITY v9 0 x\n"), make([]byte, AreaSize-26)...)})
	plainFile := filepath.Join(t.TempDir(), "plain.iso")
	if err := os.WriteFile(plainFile, bytes.Repeat([]byte{0}, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("x")})
	existing := filepath.Join(t.TempDir(), "exists.iso")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, base string
		id         Identity
		out        string
		want       string
		replace    bool
	}{
		{"not an ISO", plainFile, good, "", "not an ISO 9660 image", false},
		{"ISO without the area", notEdgefleet, good, "", "no /edgefleet/identity.img", false},
		{"area of another size", wrongSize, good, "", "is 4096 bytes, not 65536", false},
		{"area without the header", otherHeader, good, "", "without a header line", false},
		{"area of a newer format", newerFormat, good, "", "format v9", false},
		{"missing base", filepath.Join(t.TempDir(), "none.iso"), good, "", "no such file", false},
		{"identity too large", base, Identity{URL: good.URL, CA: ca, Token: strings.Repeat("t", AreaSize)}, "", "more than the 65408 bytes", false},
		{"URL not https", base, Identity{URL: "http://global.example", CA: ca, Token: "t"}, "", "must be https", false},
		{"URL without host", base, Identity{URL: "https://", CA: ca, Token: "t"}, "", "must be https", false},
		{"URL empty", base, Identity{CA: ca, Token: "t"}, "", "URL is empty", false},
		{"CA not PEM", base, Identity{URL: good.URL, CA: []byte("hello"), Token: "t"}, "", "not PEM", false},
		{"CA a key", base, Identity{URL: good.URL, CA: keyPEM, Token: "t"}, "", "never a key", false},
		{"CA not a certificate", base, Identity{URL: good.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), Token: "t"}, "", "not a certificate", false},
		{"CA empty", base, Identity{URL: good.URL, Token: "t"}, "", "CA to pin is empty", false},
		{"token empty", base, Identity{URL: good.URL, CA: ca}, "", "token is empty", false},
		{"token with a newline", base, Identity{URL: good.URL, CA: ca, Token: "a\nb"}, "", "whitespace", false},
		{"output exists", base, good, existing, "exists", false},
		{"output is the base", base, good, base, "is the base image itself", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "out.iso")
			}
			var before []byte
			if c.out != "" {
				before, _ = os.ReadFile(out)
			}
			err := Inject(c.base, out, c.id, c.replace)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Inject = %v, want an error containing %q", err, c.want)
			}
			if c.out == "" {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("output created despite the error (%v)", err)
				}
				if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".out.iso.*")); len(left) > 0 {
					t.Errorf("temporary files left: %v", left)
				}
			} else if now, _ := os.ReadFile(out); !bytes.Equal(now, before) {
				t.Error("the existing output changed")
			}
		})
	}
}

func TestReadRefusesDamagedArea(t *testing.T) {
	base := baseISO(t)
	out := filepath.Join(t.TempDir(), "site.iso")
	if err := Inject(base, out, Identity{URL: "https://g.example", CA: testCA(t), Token: "tok"}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	off, _, err := open(bytes.NewReader(b), out)
	if err != nil {
		t.Fatal(err)
	}
	b[off+HeaderSize+3] ^= 0xff
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(out); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Read = %v, want a checksum error", err)
	}
}

func BenchmarkInject(b *testing.B) {
	base := os.Getenv("EDGEFLEET_BASE_ISO")
	if base == "" {
		b.Skip("EDGEFLEET_BASE_ISO: the base image to inject into (make usb-image links bin/edgefleet-base.iso)")
	}
	t := &testing.T{}
	id := Identity{URL: "https://global.example", CA: testCA(t), Token: "efs1.bench"}
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		out := filepath.Join(dir, "site.iso")
		if err := Inject(base, out, id, true); err != nil {
			b.Fatal(err)
		}
	}
}
