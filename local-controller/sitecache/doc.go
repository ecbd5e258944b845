// Package sitecache is a site's local artifact cache: a content-addressed directory of
// artifacts fetched from the global controller, published only after their sha256 matched,
// served over HTTP (Range, ETag) to Ironic and the BPA, re-verified when a file changed, and
// garbage-collected when no ArtifactSet lists a digest any more.
package sitecache
