package siteimage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	sectorSize = 2048
	// pvdSector is where ISO 9660's primary volume descriptor is.
	pvdSector = 16
	// maxDirSize bounds the directories read while looking for the area.
	maxDirSize = 1 << 20
)

// areaPath is the identity area's path in the ISO (Rock Ridge names, as grub-mkrescue writes them).
var areaPath = []string{"edgefleet", "identity.img"}

// extent is a file's or directory's bytes in the image.
type extent struct {
	offset, size int64
	dir          bool
}

// locateArea finds the identity area's extent by walking the ISO 9660 directories from the primary
// volume descriptor's root.
func locateArea(r io.ReaderAt) (extent, error) {
	pvd := make([]byte, sectorSize)
	if _, err := r.ReadAt(pvd, pvdSector*sectorSize); err != nil {
		return extent{}, fmt.Errorf("no ISO 9660 volume descriptor: %w", err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return extent{}, errors.New("not an ISO 9660 image (no primary volume descriptor)")
	}
	cur, err := parseRecord(pvd[156 : 156+34])
	if err != nil {
		return extent{}, fmt.Errorf("root directory record: %w", err)
	}
	for _, name := range areaPath {
		if !cur.dir {
			return extent{}, fmt.Errorf("%s is not a directory", name)
		}
		cur, err = lookup(r, cur, name)
		if err != nil {
			return extent{}, err
		}
	}
	if cur.dir {
		return extent{}, fmt.Errorf("/%s is a directory", strings.Join(areaPath, "/"))
	}
	return cur, nil
}

// lookup finds name in directory d.
func lookup(r io.ReaderAt, d extent, name string) (extent, error) {
	if d.size > maxDirSize {
		return extent{}, fmt.Errorf("directory of %d bytes, more than %d", d.size, maxDirSize)
	}
	buf := make([]byte, d.size)
	if _, err := r.ReadAt(buf, d.offset); err != nil {
		return extent{}, fmt.Errorf("read directory: %w", err)
	}
	for off := 0; off < len(buf); {
		n := int(buf[off])
		if n == 0 { // records do not cross sectors: the rest of this sector is padding
			off = (off/sectorSize + 1) * sectorSize
			continue
		}
		if n < 34 || off+n > len(buf) {
			return extent{}, errors.New("malformed directory record")
		}
		rec := buf[off : off+n]
		nameLen := int(rec[32])
		if 33+nameLen > n {
			return extent{}, errors.New("malformed directory record name")
		}
		if recordName(rec, nameLen) == name {
			return parseRecord(rec)
		}
		off += n
	}
	return extent{}, fmt.Errorf("no /%s", strings.Join(areaPath, "/"))
}

// recordName is a directory record's Rock Ridge name (its NM entry) when it has one, else its
// ISO 9660 name without the version. Rock Ridge keeps the name whole where ISO 9660 level 1
// shortens it to 8.3 (EDGEFLEE).
func recordName(rec []byte, nameLen int) string {
	su := 33 + nameLen
	if nameLen%2 == 0 {
		su++ // padding to an even offset
	}
	for su+4 <= len(rec) {
		n := int(rec[su+2])
		if n < 4 || su+n > len(rec) {
			break
		}
		if string(rec[su:su+2]) == "NM" && n > 5 && rec[su+4]&^0x01 == 0 { // no CURRENT/PARENT flags
			return string(rec[su+5 : su+n]) // one NM entry: the names here are short
		}
		su += n
	}
	iso, _, _ := strings.Cut(string(rec[33:33+nameLen]), ";")
	return strings.ToLower(strings.TrimSuffix(iso, "."))
}

// parseRecord reads a directory record's extent (little-endian halves of the both-endian fields).
func parseRecord(rec []byte) (extent, error) {
	if len(rec) < 34 {
		return extent{}, errors.New("short directory record")
	}
	if rec[26] != 0 { // interleaved files are not contiguous
		return extent{}, errors.New("interleaved file")
	}
	return extent{
		offset: int64(binary.LittleEndian.Uint32(rec[2:6])) * sectorSize,
		size:   int64(binary.LittleEndian.Uint32(rec[10:14])),
		dir:    rec[25]&0x02 != 0,
	}, nil
}
