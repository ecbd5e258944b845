package siteimage_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/siteimage"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func TestInjectThenRead(t *testing.T) {
	base := siteimagetest.Base(t)
	before, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := siteimage.Read(base); !errors.Is(err, siteimage.ErrNoIdentity) {
		t.Fatalf("siteimage.Read(base) = %v, want siteimage.ErrNoIdentity", err)
	}
	id := siteimage.Identity{URL: "https://global.example:8443", CA: siteimagetest.CA(t), Site: "stores/store-1", Token: "efs1.abc.def"}
	out := filepath.Join(t.TempDir(), "site-a.iso")
	if err := siteimage.Inject(base, out, id, false); err != nil {
		t.Fatal(err)
	}
	got, err := siteimage.Read(out)
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
	off := bytes.Index(before, siteimage.EmptyArea()[:siteimage.HeaderSize])
	if off < 0 || off%2048 != 0 {
		t.Fatalf("the base's identity area at %d, want a sector boundary", off)
	}
	if !bytes.Equal(after[:off], before[:off]) || !bytes.Equal(after[off+siteimage.AreaSize:], before[off+siteimage.AreaSize:]) {
		t.Error("bytes outside the identity area changed")
	}
	if now, _ := os.ReadFile(base); !bytes.Equal(now, before) {
		t.Error("the base image changed")
	}

	// A site image is a base for another (the area is replaced whole), and --force replaces.
	id2 := siteimage.Identity{URL: "https://other.example", CA: id.CA, Site: "stores/store-1", Token: "t2"}
	if err := siteimage.Inject(out, out+".2", id2, false); err != nil {
		t.Fatal(err)
	}
	if err := siteimage.Inject(out+".2", out, id2, true); err != nil {
		t.Fatal(err)
	}
	if got, err := siteimage.Read(out); err != nil || got.Token != "t2" || got.URL != id2.URL {
		t.Fatalf("Read after replace = %+v, %v", got, err)
	}
}

func TestInjectRefusesBadInput(t *testing.T) {
	base := siteimagetest.Base(t)
	ca := siteimagetest.CA(t)
	good := siteimage.Identity{URL: "https://global.example", CA: ca, Site: "stores/store-1", Token: "tok"}
	notEdgefleet := siteimagetest.ISO(t, map[string][]byte{"live/x": []byte("x")})
	wrongSize := siteimagetest.ISO(t, map[string][]byte{"edgefleet/identity.img": siteimage.EmptyArea()[:4096]})
	otherHeader := siteimagetest.ISO(t, map[string][]byte{"edgefleet/identity.img": make([]byte, siteimage.AreaSize)})
	newerFormat := siteimagetest.ISO(t, map[string][]byte{"edgefleet/identity.img": append([]byte("EDGEFLEET-IDENTITY v9 0 x\n"), make([]byte, siteimage.AreaSize-26)...)})
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
		id         siteimage.Identity
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
		{"identity too large", base, siteimage.Identity{URL: good.URL, CA: ca, Site: "stores/store-1", Token: strings.Repeat("t", siteimage.AreaSize)}, "", "more than the 65408 bytes", false},
		{"URL not https", base, siteimage.Identity{URL: "http://global.example", CA: ca, Site: "stores/store-1", Token: "t"}, "", "must be https", false},
		{"URL without host", base, siteimage.Identity{URL: "https://", CA: ca, Site: "stores/store-1", Token: "t"}, "", "must be https", false},
		{"URL empty", base, siteimage.Identity{CA: ca, Site: "stores/store-1", Token: "t"}, "", "URL is empty", false},
		{"CA not PEM", base, siteimage.Identity{URL: good.URL, CA: []byte("hello"), Site: "stores/store-1", Token: "t"}, "", "not PEM", false},
		{"CA a key", base, siteimage.Identity{URL: good.URL, CA: keyPEM, Site: "stores/store-1", Token: "t"}, "", "never a key", false},
		{"CA not a certificate", base, siteimage.Identity{URL: good.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), Token: "t"}, "", "not a certificate", false},
		{"CA empty", base, siteimage.Identity{URL: good.URL, Site: "stores/store-1", Token: "t"}, "", "CA to pin is empty", false},
		{"site without its namespace", base, siteimage.Identity{URL: good.URL, CA: ca, Site: "store-1", Token: "t"}, "", `the site "store-1" must be namespace/name`, false},
		{"site name not a DNS label", base, siteimage.Identity{URL: good.URL, CA: ca, Site: "stores/Store_1", Token: "t"}, "", `its name "Store_1"`, false},
		{"token empty", base, siteimage.Identity{URL: good.URL, CA: ca, Site: "stores/store-1"}, "", "token is empty", false},
		{"token with a newline", base, siteimage.Identity{URL: good.URL, CA: ca, Site: "stores/store-1", Token: "a\nb"}, "", "whitespace", false},
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
			err := siteimage.Inject(c.base, out, c.id, c.replace)
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
	base := siteimagetest.Base(t)
	out := filepath.Join(t.TempDir(), "site.iso")
	if err := siteimage.Inject(base, out, siteimage.Identity{URL: "https://g.example", CA: siteimagetest.CA(t), Site: "stores/store-1", Token: "tok"}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(b, []byte("EDGEFLEET-IDENTITY v1 "))
	if off < 0 {
		t.Fatal("no identity header in the site image")
	}
	b[off+siteimage.HeaderSize+3] ^= 0xff
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := siteimage.Read(out); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Read = %v, want a checksum error", err)
	}
}

// BenchmarkInject writes a site's identity into a copy of the real base image
// (bin/edgefleet-base.iso, made by make usb-image; EDGEFLEET_BASE_ISO names another).
func BenchmarkInject(b *testing.B) {
	base := os.Getenv("EDGEFLEET_BASE_ISO")
	if base == "" {
		root, err := testutil.RepoRoot()
		if err != nil {
			b.Fatal(err)
		}
		base = filepath.Join(root, "bin", "edgefleet-base.iso")
	}
	if _, err := os.Stat(base); err != nil {
		b.Skipf("no base image (%v): make usb-image, or EDGEFLEET_BASE_ISO", err)
	}
	id := siteimage.Identity{URL: "https://global.example", CA: siteimagetest.CA(b), Site: "stores/store-1", Token: "efs1.bench"}
	out := filepath.Join(b.TempDir(), "site.iso")
	for b.Loop() {
		if err := siteimage.Inject(base, out, id, true); err != nil {
			b.Fatal(err)
		}
	}
}
