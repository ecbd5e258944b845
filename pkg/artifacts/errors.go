package artifacts

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// ErrNotFound is returned for an unknown (or expired) artifact, upload or blob.
var ErrNotFound = errors.New("not found")

// ErrBusy is returned when another request is writing to the same upload session.
var ErrBusy = errors.New("another request is writing to this upload")

// ValidationError names the field at fault.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// ConflictError is returned when an artifact with the same kind, name, version and
// architecture exists already.
type ConflictError struct{ ID string }

func (e *ConflictError) Error() string {
	return "an artifact with this kind, name, version and architecture exists already (id " + e.ID + ")"
}

// OffsetError is returned for a chunk sent at another offset than the session's.
type OffsetError struct{ Expected, Got int64 }

func (e *OffsetError) Error() string {
	return fmt.Sprintf("chunk starts at offset %d, but the upload is at offset %d", e.Got, e.Expected)
}

// TooLargeError is returned when an upload declares more bytes than the store takes for one
// artifact; nothing was created. Undeclared: the upload declared no size, and its bytes went
// past the maximum; what it received before is kept until the session is deleted or expires.
type TooLargeError struct {
	Size, Max  int64
	Undeclared bool
}

func (e *TooLargeError) Error() string {
	if e.Undeclared {
		return fmt.Sprintf("upload refused at %s: it declared no size, and the artifact store takes artifacts of up to %s (the global controller's --max-artifact-size); delete the upload session",
			humanize.IBytes(uint64(e.Size)), humanize.IBytes(uint64(e.Max)))
	}
	return fmt.Sprintf("upload of %s refused: the artifact store takes artifacts of up to %s (the global controller's --max-artifact-size)",
		humanize.IBytes(uint64(e.Size)), humanize.IBytes(uint64(e.Max)))
}

// SpaceError is returned when an upload declares more bytes than the volume of the store's
// database has room for; nothing was created. All but Size are bytes on that volume.
type SpaceError struct {
	// Size is the declared size, OnDisk what the upload takes on the volume.
	Size, OnDisk int64
	// Free is the volume's free space, Reserve what uploads leave free, Open what the open
	// upload sessions have yet to write of their declared sizes.
	Free, Reserve, Open int64
	// Undeclared: the session declared no size; Size is then the bytes of one append that did
	// not fit, and Received what the session keeps, the offset to resume from.
	Undeclared bool
	Received   int64
}

func (e *SpaceError) Error() string {
	if e.Undeclared {
		return fmt.Sprintf("%s more of an upload of undeclared size refused: they take about %s in the artifact store's database, whose volume has %s free, "+
			"keeping a %s reserve (the global controller's --artifact-space-reserve) and %s for the open uploads; the upload keeps its first %d bytes: "+
			"send the rest from offset %d once there is room (delete artifacts that are no longer needed, or give the volume more space), or delete the upload session",
			humanize.IBytes(uint64(e.Size)), humanize.IBytes(uint64(e.OnDisk)), humanize.IBytes(uint64(max(e.Free, 0))),
			humanize.IBytes(uint64(e.Reserve)), humanize.IBytes(uint64(e.Open)), e.Received, e.Received)
	}
	return fmt.Sprintf("upload of %s refused: it takes about %s in the artifact store's database, whose volume has %s free, "+
		"keeping a %s reserve (the global controller's --artifact-space-reserve) and %s for the open uploads; "+
		"delete artifacts that are no longer needed (the janitor then compacts the database), give the volume more space, or wait for the open uploads to finish or expire",
		humanize.IBytes(uint64(e.Size)), humanize.IBytes(uint64(e.OnDisk)), humanize.IBytes(uint64(max(e.Free, 0))),
		humanize.IBytes(uint64(e.Reserve)), humanize.IBytes(uint64(e.Open)))
}

// DigestError is returned when the content does not have the stated sha256; nothing was stored.
type DigestError struct{ Expected, Actual string }

func (e *DigestError) Error() string {
	return fmt.Sprintf("content has sha256 %s, not the stated %s; nothing was stored", e.Actual, e.Expected)
}

// ReferencedError is returned when deleting an artifact that something still references.
type ReferencedError struct{ By []string }

func (e *ReferencedError) Error() string {
	return "artifact is still referenced by " + strings.Join(e.By, ", ")
}

// ReadError is returned by Append when its reader failed before its end (a client that went
// away, a body shorter than announced, a read timeout): the bytes that arrived are saved, and
// the upload resumes at Offset.
type ReadError struct {
	// Upload is the session's id.
	Upload string
	// Read is how many bytes were read before the failure.
	Read int64
	// Offset is the session's offset now: where the upload resumes.
	Offset int64
	// Err is the reader's error.
	Err error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read the body of upload %s: %v after %d bytes (saved up to offset %d)", e.Upload, e.Err, e.Read, e.Offset)
}

func (e *ReadError) Unwrap() error { return e.Err }
