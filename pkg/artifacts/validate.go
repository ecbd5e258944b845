package artifacts

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`)
	versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
	archPattern    = regexp.MustCompile(`^[a-z0-9_]+$`)
	sha256Pattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidateSpec checks an artifact's metadata and returns a *ValidationError naming the field.
func ValidateSpec(s restv1.ArtifactSpec) error {
	kinds := restv1.Kinds()
	switch {
	case !slices.Contains(kinds, s.Kind):
		return &ValidationError{"kind", fmt.Sprintf("must be one of %v, got %q", kinds, s.Kind)}
	case len(s.Name) == 0 || len(s.Name) > 253 || !namePattern.MatchString(s.Name):
		return &ValidationError{"name", fmt.Sprintf("must be 1-253 lower-case letters, digits, '-', '.', '_', starting and ending with a letter or digit, got %q", s.Name)}
	case len(s.Version) == 0 || len(s.Version) > 128 || !versionPattern.MatchString(s.Version):
		return &ValidationError{"version", fmt.Sprintf("must be 1-128 letters, digits, '.', '_', '+', '~', '-', starting with a letter or digit, got %q", s.Version)}
	case len(s.Architecture) == 0 || len(s.Architecture) > 32 || !archPattern.MatchString(s.Architecture):
		return &ValidationError{"architecture", fmt.Sprintf("must be 1-32 lower-case letters, digits or '_' (amd64, arm64, noarch …), got %q", s.Architecture)}
	case len(s.Description) > 4096:
		return &ValidationError{"description", fmt.Sprintf("must be at most 4096 bytes, got %d", len(s.Description))}
	}
	for k, v := range s.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return &ValidationError{"labels", fmt.Sprintf("key %q: %s", k, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return &ValidationError{"labels", fmt.Sprintf("value %q of key %q: %s", v, k, strings.Join(errs, "; "))}
		}
	}
	return nil
}

// ValidateSHA256 checks a digest given by a client; field names where it came from.
func ValidateSHA256(field, digest string) error {
	if !sha256Pattern.MatchString(digest) {
		return &ValidationError{field, fmt.Sprintf("must be 64 lower-case hex digits (a sha256), got %q", digest)}
	}
	return nil
}
