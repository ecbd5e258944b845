// Package artifactapi is the artifact REST API of the global controller (gin, under /api/v1):
// resumable and single-request uploads, streamed downloads with Range and ETag, listing,
// metadata and deletion, over the artifact store of pkg/artifacts. Callers authenticate with a
// Kubernetes bearer token (TokenReview) and are authorized by RBAC on the virtual resource
// "artifacts" of group fleet.edgefleet.io (SubjectAccessReview): verbs get, list, create, delete.
// The API is described in openapi.yaml, served at /api/v1/openapi.yaml.
package artifactapi
