package siteimage_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/siteimage"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
)

// TestPackRoundTrip packs artifacts after a site image's ISO volume and reads each back verified:
// the identity still reads, the image ends on a sector, an empty pack is refused, a second pack
// replaces the first, and a base image has none.
func TestPackRoundTrip(t *testing.T) {
	files := siteimagetest.PackFiles(t, 5000, 0, 1<<20+3, 4096)
	img, m := siteimagetest.Packed(t, "stores/edge-1", files)
	if _, err := siteimage.Read(img); err != nil {
		t.Errorf("the identity after packing: %v", err)
	}
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size()%2048 != 0 {
		t.Errorf("the image is %d bytes, not whole 2048-byte sectors", st.Size())
	}
	p, err := siteimage.OpenPack(img)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Manifest.Release != "stores/edge-1" || p.Manifest.KubernetesVersion != "v1.36.3" || len(p.Manifest.Artifacts) != len(files) {
		t.Fatalf("manifest %+v, want release stores/edge-1 with %d artifacts (written: %+v)", p.Manifest, len(files), m)
	}
	out := t.TempDir()
	for _, f := range files {
		var last int64
		path := filepath.Join(out, f.SHA256)
		if err := p.Download(t.Context(), f.SHA256, path, func(done int64) { last = done }); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		got, _ := os.ReadFile(path)
		want, _ := os.ReadFile(f.Path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: read back %d bytes that differ from the %d packed", f.Name, len(got), len(want))
		}
		if last != int64(len(want)) {
			t.Errorf("%s: progress ended at %d, want %d", f.Name, last, len(want))
		}
	}
	if err := p.Download(t.Context(), strings.Repeat("0", 64), filepath.Join(out, "x"), nil); !errors.Is(err, siteimage.ErrNotInPack) {
		t.Errorf("a digest the pack lacks: %v, want ErrNotInPack", err)
	}

	if _, err := siteimage.AppendPack(img, "stores/edge-1", "", nil); err == nil {
		t.Error("an empty pack was written")
	}
	second := files[:1]
	if _, err := siteimage.AppendPack(img, "stores/edge-2", "", second); err != nil {
		t.Fatal(err)
	}
	p2, err := siteimage.OpenPack(img)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if p2.Manifest.Release != "stores/edge-2" || len(p2.Manifest.Artifacts) != 1 {
		t.Errorf("after a second pack: %+v, want it alone", p2.Manifest)
	}
	if _, err := siteimage.OpenPack(siteimagetest.Base(t)); !errors.Is(err, siteimage.ErrNoPack) {
		t.Errorf("OpenPack(base) = %v, want ErrNoPack", err)
	}
	// Another site's image made from this one does not inherit its pack.
	other := filepath.Join(t.TempDir(), "other.iso")
	if err := siteimage.Inject(img, other, siteimage.Identity{URL: "https://g.example", CA: siteimagetest.CA(t), Site: "stores/store-2", Token: "efs1.x.y"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := siteimage.OpenPack(other); !errors.Is(err, siteimage.ErrNoPack) {
		t.Errorf("OpenPack(an image injected from a packed one) = %v, want ErrNoPack", err)
	}
}

// TestPackRefusesDamage: a packed file that does not match its digest is refused when packing;
// a damaged header, manifest or artifact is refused when reading, with nothing written.
func TestPackRefusesDamage(t *testing.T) {
	files := siteimagetest.PackFiles(t, 10000, 3000)
	img, _ := siteimagetest.Packed(t, "stores/edge-1", files)
	good, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	base := bytes.Index(good, []byte("EDGEFLEET-PACK v1 "))
	if base < 0 {
		t.Fatal("no pack header in the image")
	}

	wrong := append([]siteimage.PackFile(nil), files...)
	wrong[1].SHA256 = files[0].SHA256[:63] + "0"
	if wrong[1].SHA256 == files[0].SHA256 {
		wrong[1].SHA256 = files[0].SHA256[:63] + "1"
	}
	if _, err := siteimage.AppendPack(filepath.Join(t.TempDir(), "copy.iso"), "a/b", "", wrong); err == nil {
		t.Error("AppendPack to a missing image succeeded")
	}
	cp := filepath.Join(t.TempDir(), "copy.iso")
	if err := os.WriteFile(cp, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := siteimage.AppendPack(cp, "a/b", "", wrong); err == nil || !strings.Contains(err.Error(), "hashes to sha256") {
		t.Errorf("packing a file under another digest: %v, want a digest mismatch", err)
	}

	damage := func(name string, edit func(b []byte) []byte, want string) {
		t.Run(name, func(t *testing.T) {
			b := edit(bytes.Clone(good))
			p := filepath.Join(t.TempDir(), "damaged.iso")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			pk, err := siteimage.OpenPack(p)
			if err == nil {
				defer pk.Close()
				dir := t.TempDir()
				for _, f := range files {
					out := filepath.Join(dir, f.SHA256)
					if err = pk.Download(t.Context(), f.SHA256, out, nil); err != nil {
						if _, serr := os.Stat(out); serr == nil {
							t.Errorf("a damaged artifact was written to %s", out)
						}
						break
					}
				}
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got %v, want an error containing %q", err, want)
			}
		})
	}
	damage("unknown version", func(b []byte) []byte { copy(b[base:], "EDGEFLEET-PACK v9"); return b }, "format v9 on")
	damage("manifest edited", func(b []byte) []byte {
		i := bytes.Index(b[base:], []byte(`"release":"`)) + base + len(`"release":"`)
		b[i] = 'X'
		return b
	}, "manifest checksum mismatch")
	damage("truncated", func(b []byte) []byte { return b[:len(b)-8192] }, "outside the medium")
	damage("artifact bytes flipped", func(b []byte) []byte {
		b[len(b)-4096+100] ^= 0xff // inside the last artifact (the image ends on its aligned end)
		return b
	}, "the stick is damaged")
	damage("header line garbled", func(b []byte) []byte { copy(b[base:], "EDGEFLEET-PACK v1 x\n"); return b }, "header")
}

// BenchmarkPack measures the site pack's two passes over a release of 256 MiB (four artifacts)
// against an anchor run here: copying the same files once while hashing them (what a pack's
// write and read each must do at least). "append" is AppendPack onto a small site image,
// "import" reads every artifact back verified (Pack.Download, as local-controller pack-import).
func BenchmarkPack(b *testing.B) {
	files := siteimagetest.PackFiles(b, 96<<20, 96<<20, 48<<20, 16<<20)
	img, _ := siteimagetest.Packed(b, "stores/edge-1", files[:1])
	dir := b.TempDir()
	var total int64
	for _, f := range files {
		st, err := os.Stat(f.Path)
		if err != nil {
			b.Fatal(err)
		}
		total += st.Size()
	}
	b.Run("anchor-copy-and-hash", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for _, f := range files {
				in, err := os.Open(f.Path)
				if err != nil {
					b.Fatal(err)
				}
				out, err := os.Create(filepath.Join(dir, "copy"))
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
					b.Fatal(err)
				}
				in.Close()
				if err := out.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			if _, err := siteimage.AppendPack(img, "stores/edge-1", "v1.36.3", files); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("import", func(b *testing.B) {
		p, err := siteimage.OpenPack(img)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.SetBytes(total)
		for b.Loop() {
			for _, f := range files {
				if err := p.Download(b.Context(), f.SHA256, filepath.Join(dir, "imported"), nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
