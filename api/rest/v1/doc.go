// Package v1 will hold the wire types of the artifact REST API (/api/v1): artifact metadata,
// upload sessions and error bodies. It is filled by the artifact-store work.
package v1
