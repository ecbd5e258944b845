package siteimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// AreaSize is the identity area's size in the base image.
	AreaSize = 64 << 10
	// HeaderSize is the room of the header line at the start of the area.
	HeaderSize = 128
	// MaxPayload is the largest identity payload the area holds.
	MaxPayload = AreaSize - HeaderSize
	// magic starts the header line.
	magic = "EDGEFLEET-IDENTITY"
	// version is the format this package writes and reads.
	version = "v1"
)

// ErrNoIdentity is Read's error for a base image, whose area holds no identity yet.
var ErrNoIdentity = errors.New("the image carries no site identity (a generic base image)")

// notImage wraps why path is not an edgefleet image.
func notImage(path string, err error) error {
	return fmt.Errorf("%s is not an edgefleet bootstrap image (usb-image/build.sh makes one): %w", path, err)
}

// Check says whether path is an edgefleet bootstrap image with an identity area of this
// version, base or site image alike.
func Check(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = open(f, path)
	return err
}

// open locates and parses the identity area of f: its offset and its header.
func open(f io.ReaderAt, path string) (int64, header, error) {
	ext, err := locateArea(f)
	if err != nil {
		return 0, header{}, notImage(path, err)
	}
	if ext.size != AreaSize {
		return 0, header{}, notImage(path, fmt.Errorf("its identity area is %d bytes, not %d", ext.size, AreaSize))
	}
	buf := make([]byte, HeaderSize)
	if _, err := f.ReadAt(buf, ext.offset); err != nil {
		return 0, header{}, notImage(path, fmt.Errorf("read the identity area: %w", err))
	}
	h, err := parseHeader(buf)
	if err != nil {
		return 0, header{}, notImage(path, err)
	}
	return ext.offset, h, nil
}

// header is the area's header line.
type header struct {
	length int
	sum    string
}

func parseHeader(b []byte) (header, error) {
	line, _, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return header{}, errors.New("identity area without a header line")
	}
	f := strings.Fields(string(line))
	if len(f) != 4 || f[0] != magic {
		return header{}, errors.New("identity area without the " + magic + " header")
	}
	if f[1] != version {
		return header{}, fmt.Errorf("identity area of format %s, this edgefleet knows %s: use the edgefleet version of the base image", f[1], version)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 || n > MaxPayload {
		return header{}, fmt.Errorf("identity area header: bad length %q", f[2])
	}
	return header{length: n, sum: f[3]}, nil
}

// area is the whole identity area holding payload.
func area(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	b := make([]byte, AreaSize)
	n := copy(b, fmt.Sprintf("%s %s %d %s\n", magic, version, len(payload), hex.EncodeToString(sum[:])))
	if n > HeaderSize {
		panic("siteimage: header line longer than HeaderSize")
	}
	copy(b[HeaderSize:], payload)
	return b
}

// Read returns the identity in image; ErrNoIdentity for a base image.
func Read(image string) (Identity, error) {
	f, err := os.Open(image)
	if err != nil {
		return Identity{}, err
	}
	defer f.Close()
	off, h, err := open(f, image)
	if err != nil {
		return Identity{}, err
	}
	if h.length == 0 {
		return Identity{}, ErrNoIdentity
	}
	p := make([]byte, h.length)
	if _, err := f.ReadAt(p, off+HeaderSize); err != nil {
		return Identity{}, fmt.Errorf("read the identity of %s: %w", image, err)
	}
	if sum := sha256.Sum256(p); hex.EncodeToString(sum[:]) != h.sum {
		return Identity{}, fmt.Errorf("the identity area of %s is damaged (checksum mismatch)", image)
	}
	return parsePayload(p)
}

// Inject writes a copy of base to out (mode 0600: it holds a token) with id in its identity area.
// base is left as it is; it may be a base image or another site's image (whose site pack, if
// any, is not copied). out must not exist
// unless replace is set. On any error out is not created (nor replaced): the copy is made in a
// temporary file next to it and renamed at the end.
func Inject(base, out string, id Identity, replace bool) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if !replace {
		if _, err := os.Lstat(out); err == nil {
			return fmt.Errorf("%s exists: choose another output or replace it (--force)", out)
		}
	}
	if same(base, out) {
		return fmt.Errorf("the output %s is the base image itself: write the site's image to another file", out)
	}
	src, err := os.Open(base)
	if err != nil {
		return err
	}
	defer src.Close()
	off, _, err := open(src, base)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return fmt.Errorf("create the output: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := write(tmp, src, off, area(id.payload())); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if !replace {
		// Link refuses an existing name: out is never replaced without replace.
		if err := os.Link(tmp.Name(), out); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
		return nil
	}
	return os.Rename(tmp.Name(), out)
}

// write copies src's ISO volume into dst (0600, os.CreateTemp's mode) and overwrites the area at
// off. What follows the volume (another site's pack) is not copied.
func write(dst *os.File, src *os.File, off int64, a []byte) error {
	size, err := volumeSize(src)
	if err != nil {
		return err
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.CopyN(dst, src, size); err != nil {
		return err
	}
	if _, err := dst.WriteAt(a, off); err != nil {
		return err
	}
	return dst.Sync()
}

// same reports whether a and b name the same existing file.
func same(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// EmptyArea is the identity area of a base image: a header of an empty identity, NULs after it.
// usb-image/build.sh writes the same bytes.
func EmptyArea() []byte { return area(nil) }
