// Command artifacts is the Artifacts benchmark of DESIGN.md ("Performance targets"): it uploads
// and downloads the same generated content through the artifact REST API of the real global
// controller (bin/global-controller, with its embedded FerretDB) and through raw GridFS
// (mongo-driver's bucket, 128 KiB chunks like the store) on the same FerretDB, in the same run,
// and prints the throughput of each path, the ratio REST/raw per direction and the controller's
// peak RSS per phase. `make bench` runs it; results go to docs/benchmarks.md.
//
// The content is pseudo-random (ChaCha8 from -seed), generated while it is sent and hashed while
// it is received: nothing holds a whole file in memory or on disk besides the database itself.
// Both paths do the same client-side work — generate, sha256 while sending, sha256 while
// receiving — so the ratio measures the server sides. The REST path speaks the resumable
// protocol the CLI uses (create session with sha256 and size, one PATCH, finish; then
// GET /api/v1/blobs/sha256:...), with a bearer token checked by TokenReview and RBAC.
//
// Peak RSS is the controller process's VmHWM, which covers the embedded FerretDB as well. The
// harness resets it before each phase (writing 5 to /proc/PID/clear_refs), so every phase shows
// its own peak, whatever ran before; the raw phases show what FerretDB alone needs for the same
// transfer. Sizes run smallest first in one controller, and each content is deleted after its
// run.
//
// Then, for each of -concurrent-sizes (100 MiB) and -concurrency (1, 10, 50), it uploads the
// same content that many times at once through the REST API (each upload its own artifact),
// downloads it that many times at once, and prints the controller's peak RSS and the throughput
// of all transfers together per phase: memory must stay bounded in the number of concurrent
// transfers (the controller's --api-transfer-memory budget; -controller-flags passes others).
// -ratio=false skips the REST API vs raw GridFS runs.
//
// A transfer still running after -timeout is stopped and recorded as the average throughput up
// to there (marked ≤ in the table); a download whose upload was stopped is skipped (—). Progress
// is logged to stderr every 30 s, the result table (Markdown) goes to stdout.
package main
