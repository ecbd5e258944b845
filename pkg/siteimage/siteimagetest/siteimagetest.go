// Package siteimagetest makes small images for tests of pkg/siteimage and its callers: real ISO
// 9660 images made by xorriso with the base image's layout but no operating system, and a CA
// certificate made at test time.
package siteimagetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/siteimage"
)

// CA is a self-signed CA certificate made at test time, in PEM.
func CA(t testing.TB) []byte {
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

// ISO builds a real ISO 9660 image with xorriso (the tool grub-mkrescue drives) from the
// files given (path in the ISO → content), padded by a large file before them so the area is
// not at the start.
func ISO(t testing.TB, files map[string][]byte) string {
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

// Base is an ISO laid out as usb-image/build.sh lays out the base: an empty identity area.
func Base(t testing.TB) string {
	return ISO(t, map[string][]byte{
		"live/filesystem.squashfs": bytes.Repeat([]byte("squash"), 100000),
		"edgefleet/identity.img":   siteimage.EmptyArea(),
		"boot/grub/grub.cfg":       []byte("menuentry x {}\n"),
	})
}

// PackFiles writes one artifact of random content per size given and returns them to pack.
func PackFiles(t testing.TB, sizes ...int) []siteimage.PackFile {
	t.Helper()
	dir := t.TempDir()
	var files []siteimage.PackFile
	for i, n := range sizes {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		sum := sha256.Sum256(b)
		p := filepath.Join(dir, hex.EncodeToString(sum[:]))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, siteimage.PackFile{Name: fmt.Sprintf("artifact-%d", i), SHA256: hex.EncodeToString(sum[:]), Path: p})
	}
	return files
}

// Packed is a site image (Base with an identity) with a pack of files of release.
func Packed(t testing.TB, release string, files []siteimage.PackFile) (string, siteimage.PackManifest) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "site.iso")
	id := siteimage.Identity{URL: "https://global.example:8443", CA: CA(t), Site: "stores/store-1", Token: "efs1.abc.def"}
	if err := siteimage.Inject(Base(t), img, id, false); err != nil {
		t.Fatal(err)
	}
	m, err := siteimage.AppendPack(img, release, "v1.36.3", files)
	if err != nil {
		t.Fatal(err)
	}
	return img, m
}
