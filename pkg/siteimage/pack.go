package siteimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// The air-gapped site pack: a Release's artifacts on the site's image, after its ISO 9660 volume,
// at the byte the primary volume descriptor's volume size names — the same offset in the ISO
// file, on a CD and on a USB stick written from it:
//
//	+0            the pack header, PackHeaderSize bytes: "EDGEFLEET-PACK v1 LENGTH SHA256\n", NUL-padded
//	+PackHeaderSize  the manifest: LENGTH bytes of JSON (PackManifest) whose sha256 is SHA256
//	+OFFSET       each artifact's content, at the offset (from the pack's start, a multiple of
//	              packAlign) its manifest entry gives
//
// Every artifact is verified against its sha256 when it is read, so a damaged stick gives an
// error, never a wrong file.
const (
	// PackHeaderSize is the room of the pack's header line.
	PackHeaderSize = 4096
	// MaxManifest bounds the manifest read from a medium.
	MaxManifest = 1 << 20
	// MaxPackArtifacts bounds the artifacts of one pack.
	MaxPackArtifacts = 10000
	packMagic        = "EDGEFLEET-PACK"
	packVersion      = "v1"
	packAlign        = 4096
)

// ErrNoPack is OpenPack's error for an image that carries no pack.
var ErrNoPack = errors.New("the image carries no site pack")

// ErrNotInPack is wrapped by Pack.Download's error for a digest the pack lacks.
var ErrNotInPack = errors.New("not in the site pack")

var sha256RE = regexp.MustCompile(`^[a-f0-9]{64}$`)

// PackManifest says what a pack holds: a Release's artifacts.
type PackManifest struct {
	// Release is the Release's "namespace/name" on the global cluster.
	Release string `json:"release"`
	// KubernetesVersion is the Release's.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Artifacts are the Release's artifacts, each once, in the order of their offsets.
	Artifacts []PackArtifact `json:"artifacts"`
}

// PackArtifact is one artifact of a pack.
type PackArtifact struct {
	Name   string `json:"name,omitempty"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Offset is where the content starts, from the pack's start.
	Offset int64 `json:"offset"`
}

// PackFile is an artifact to pack: its content is read from Path and must hash to SHA256.
type PackFile struct {
	Name, SHA256, Path string
}

// AppendPack writes a pack of files after image's ISO 9660 volume, replacing a pack the image
// carries already. A file whose content does not hash to its SHA256 fails it. On an error the
// image is left with a damaged pack: write into a copy (the caller publishes it on success).
func AppendPack(image, release, kubernetesVersion string, files []PackFile) (PackManifest, error) {
	m := PackManifest{Release: release, KubernetesVersion: kubernetesVersion}
	if len(files) == 0 {
		return m, errors.New("a site pack needs at least one artifact")
	}
	if len(files) > MaxPackArtifacts {
		return m, fmt.Errorf("%d artifacts, more than the %d a site pack holds", len(files), MaxPackArtifacts)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !sha256RE.MatchString(f.SHA256) {
			return m, fmt.Errorf("artifact %q: %q is not a sha256 digest (64 lower-case hex digits)", f.Name, f.SHA256)
		}
		if seen[f.SHA256] {
			continue
		}
		seen[f.SHA256] = true
		fi, err := os.Stat(f.Path)
		if err != nil {
			return m, fmt.Errorf("artifact %q: %w", f.Name, err)
		}
		m.Artifacts = append(m.Artifacts, PackArtifact{Name: f.Name, SHA256: f.SHA256, Size: fi.Size()})
	}
	// The manifest's length fixes the first offset, and the offsets are in the manifest: lay
	// out with a manifest of the final length (offsets in decimal only grow the text, so two
	// passes settle).
	for range 3 {
		next := align(PackHeaderSize + int64(len(mustJSON(m))))
		for i := range m.Artifacts {
			m.Artifacts[i].Offset = next
			next = align(next + m.Artifacts[i].Size)
		}
	}
	manifest := mustJSON(m)
	if int64(PackHeaderSize+len(manifest)) > m.Artifacts[0].Offset {
		return m, errors.New("site pack layout did not settle") // cannot happen: offsets only grow
	}
	if len(manifest) > MaxManifest {
		return m, fmt.Errorf("the manifest of %d artifacts is %d bytes, more than %d", len(m.Artifacts), len(manifest), MaxManifest)
	}
	out, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return m, err
	}
	defer out.Close()
	base, err := volumeSize(out)
	if err != nil {
		return m, notImage(image, err)
	}
	if err := out.Truncate(base); err != nil {
		return m, err
	}
	sum := sha256.Sum256(manifest)
	header := make([]byte, PackHeaderSize)
	copy(header, fmt.Sprintf("%s %s %d %s\n", packMagic, packVersion, len(manifest), hex.EncodeToString(sum[:])))
	if _, err := out.WriteAt(append(header, manifest...), base); err != nil {
		return m, fmt.Errorf("write the site pack into %s: %w", image, err)
	}
	byDigest := map[string]PackFile{}
	for _, f := range files {
		byDigest[f.SHA256] = f
	}
	for _, a := range m.Artifacts {
		if err := copyVerified(out, base+a.Offset, byDigest[a.SHA256]); err != nil {
			return m, err
		}
	}
	// The last artifact's end, aligned: the image ends on a whole sector.
	last := m.Artifacts[len(m.Artifacts)-1]
	if err := out.Truncate(base + align(last.Offset+last.Size)); err != nil {
		return m, err
	}
	return m, out.Sync()
}

// copyVerified writes f's content at off of out and checks it hashes to f.SHA256.
func copyVerified(out *os.File, off int64, f PackFile) error {
	in, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("artifact %q: %w", f.Name, err)
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(io.NewOffsetWriter(out, off), io.TeeReader(in, h)); err != nil {
		return fmt.Errorf("pack artifact %q: %w", f.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("artifact %q: its content hashes to sha256 %s, not %s", f.Name, got, f.SHA256)
	}
	return nil
}

func align(n int64) int64 { return (n + packAlign - 1) / packAlign * packAlign }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings and numbers only
	}
	return b
}

// volumeSize is the size in bytes of the ISO 9660 volume at the start of r (the primary volume
// descriptor's volume space size times its logical block size).
func volumeSize(r io.ReaderAt) (int64, error) {
	pvd := make([]byte, sectorSize)
	if _, err := r.ReadAt(pvd, pvdSector*sectorSize); err != nil {
		return 0, fmt.Errorf("no ISO 9660 volume descriptor: %w", err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return 0, errors.New("not an ISO 9660 image (no primary volume descriptor)")
	}
	blocks := int64(binary.LittleEndian.Uint32(pvd[80:84]))
	block := int64(binary.LittleEndian.Uint16(pvd[128:130]))
	if blocks == 0 || block == 0 || block%512 != 0 {
		return 0, fmt.Errorf("ISO 9660 volume of %d blocks of %d bytes", blocks, block)
	}
	return blocks * block, nil
}

// Pack is a site pack opened on an image file or the block device of a medium written from one.
type Pack struct {
	Manifest PackManifest
	// Digest is the manifest's sha256: it names the pack.
	Digest string
	f      *os.File
	base   int64
}

// OpenPack opens the pack of the image or device at path: ErrNoPack when it carries none, an
// error naming the damage when its header or manifest is damaged or points outside the medium.
func OpenPack(path string) (*Pack, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	p, err := openPack(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

func openPack(f *os.File, path string) (*Pack, error) {
	base, err := volumeSize(f)
	if err != nil {
		return nil, notImage(path, err)
	}
	// A block device's Stat size is 0: its end is where Seek finds it.
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	if end < base+PackHeaderSize {
		return nil, ErrNoPack
	}
	header := make([]byte, PackHeaderSize)
	if _, err := f.ReadAt(header, base); err != nil {
		return nil, fmt.Errorf("read the site pack's header on %s: %w", path, err)
	}
	if !bytes.HasPrefix(header, []byte(packMagic+" ")) {
		return nil, ErrNoPack
	}
	damaged := func(format string, a ...any) error {
		return fmt.Errorf("the site pack on %s is damaged (%s): write the image to the stick again", path, fmt.Sprintf(format, a...))
	}
	line, _, ok := bytes.Cut(header, []byte("\n"))
	if !ok {
		return nil, damaged("no header line")
	}
	fields := strings.Fields(string(line))
	if len(fields) != 4 {
		return nil, damaged("header %q", line)
	}
	if fields[1] != packVersion {
		return nil, fmt.Errorf("site pack format %s on %s unknown to this edgefleet (expected %s): make the image with the same edgefleet version", fields[1], path, packVersion)
	}
	length, err := strconv.Atoi(fields[2])
	if err != nil || length <= 0 || length > MaxManifest {
		return nil, damaged("manifest length %q", fields[2])
	}
	if base+PackHeaderSize+int64(length) > end {
		return nil, damaged("its manifest ends past the medium's end")
	}
	manifest := make([]byte, length)
	if _, err := f.ReadAt(manifest, base+PackHeaderSize); err != nil {
		return nil, fmt.Errorf("read the site pack's manifest on %s: %w", path, err)
	}
	sum := sha256.Sum256(manifest)
	if hex.EncodeToString(sum[:]) != fields[3] {
		return nil, damaged("manifest checksum mismatch")
	}
	p := &Pack{Digest: fields[3], f: f, base: base}
	if err := json.Unmarshal(manifest, &p.Manifest); err != nil {
		return nil, damaged("manifest: %v", err)
	}
	if err := p.Manifest.check(PackHeaderSize+int64(length), end-base); err != nil {
		return nil, damaged("%v", err)
	}
	return p, nil
}

// check says what is wrong with a manifest whose artifacts must lie in [from, size) of the pack,
// in order, without overlapping, each digest once.
func (m PackManifest) check(from, size int64) error {
	if len(m.Artifacts) == 0 || len(m.Artifacts) > MaxPackArtifacts {
		return fmt.Errorf("%d artifacts", len(m.Artifacts))
	}
	seen := map[string]bool{}
	next := from
	for _, a := range m.Artifacts {
		switch {
		case !sha256RE.MatchString(a.SHA256):
			return fmt.Errorf("artifact %q: digest %q", a.Name, a.SHA256)
		case seen[a.SHA256]:
			return fmt.Errorf("artifact sha256:%s listed twice", a.SHA256)
		case a.Size < 0 || a.Offset < next || a.Offset > size || a.Size > size-a.Offset:
			return fmt.Errorf("artifact sha256:%s at %d+%d is outside the medium's %d bytes or overlaps another", a.SHA256, a.Offset, a.Size, size)
		}
		seen[a.SHA256] = true
		next = a.Offset + a.Size
	}
	return nil
}

// Close closes the medium.
func (p *Pack) Close() error { return p.f.Close() }

// Download writes the pack's content with digest to path, verified: it is written to
// path+".part" and renamed to path only when its sha256 matches. It is a sitecache.Fetcher, so
// the site cache takes the pack's artifacts as it takes the global artifact API's.
func (p *Pack) Download(ctx context.Context, digest, path string, progress artifactclient.Progress) error {
	i := slices.IndexFunc(p.Manifest.Artifacts, func(a PackArtifact) bool { return a.SHA256 == digest })
	if i < 0 {
		return fmt.Errorf("sha256:%s: %w of release %s", digest, ErrNotInPack, p.Manifest.Release)
	}
	a := p.Manifest.Artifacts[i]
	part := path + ".part"
	out, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha256.New()
	r := &ctxReader{ctx: ctx, r: io.NewSectionReader(p.f, p.base+a.Offset, a.Size), progress: progress}
	if _, err := io.Copy(io.MultiWriter(out, h), r); err != nil {
		return fmt.Errorf("read %s (sha256:%s) from the site pack: %w", a.Name, digest, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		_ = os.Remove(part)
		return fmt.Errorf("%s in the site pack hashes to sha256 %s, not %s: the stick is damaged, write the image to it again", a.Name, got, digest)
	}
	return os.Rename(part, path)
}

// ctxReader stops a copy when ctx is done and reports progress.
type ctxReader struct {
	ctx      context.Context
	r        io.Reader
	done     int64
	progress artifactclient.Progress
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(b)
	c.done += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.done)
	}
	return n, err
}
