// Package v1 holds the wire types of the artifact REST API served by the global controller under
// /api/v1: artifact metadata, upload sessions, lists and error bodies. The API itself is
// described in global-controller/artifactapi/openapi.yaml, served at /api/v1/openapi.yaml.
package v1
