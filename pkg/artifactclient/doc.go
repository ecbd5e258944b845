// Package artifactclient is the Go client of the artifact REST API (/api/v1), used by the
// edgefleet CLI and by the sites' artifact caches: resumable uploads that continue where the
// server stopped after a broken connection, downloads that resume with Range and are verified
// against the sha256, listing and deletion. Errors carry the server's message.
package artifactclient
