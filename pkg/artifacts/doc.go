// Package artifacts is the artifact store of the global controller: OS images, binary
// packages, Helm charts and container image archives in MongoDB. Bytes live in a GridFS-layout
// bucket ("blobs"), content-addressed by sha256 and stored once however many artifacts share them;
// metadata lives in the "artifacts" collection, unique by (kind, name, version, architecture).
//
// Every upload goes through a resumable session: chunks are appended at an offset, the sha256
// state is saved with the offset so a session survives a restart of the controller, and finishing
// verifies the digest before anything becomes visible. Nothing needs transactions, change streams
// or TTL indexes (FerretDB has none): steps are ordered so a crash at any point leaves either
// nothing visible or a state the next call completes, and a janitor expires abandoned sessions.
package artifacts
