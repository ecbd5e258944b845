package enrollment

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Where and how token records are kept: a Secret per token in the Site's namespace (Secrets,
// because they are encrypted at rest like every other credential edgefleet keeps, and readable
// only by who may read Secrets there; the secret part is not in them, only its hash).
const (
	// SecretType is the type of a token record's Secret.
	SecretType corev1.SecretType = "edgefleet.io/enrollment-token"
	// SiteLabel names the site a token record belongs to, for listing.
	SiteLabel = "edgefleet.io/enrollment-site"
	// secretPrefix + id is the name of a token record's Secret.
	secretPrefix = "enrollment-token-"

	keySite      = "site"
	keyHash      = "sha256"
	keyCreatedBy = "createdBy"
	keyCreated   = "created"
	keyExpires   = "expires"
	keyRevoked   = "revoked"
	keyUsedBy    = "usedBy"
	keyMachine   = "machine"
	keyUsed      = "used"
	keyFailures  = "failedAttempts"
)

// SecretName is the name of the Secret that records token id.
func SecretName(id string) string { return secretPrefix + id }

// toSecret writes r into s (a new Secret or the one read), keeping s's metadata.
func (r Record) toSecret(s *corev1.Secret) {
	s.Namespace, s.Name, s.Type = r.Namespace, SecretName(r.ID), SecretType
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[SiteLabel] = r.Site
	s.Data = map[string][]byte{
		keySite:      []byte(r.Site),
		keyHash:      []byte(r.Hash),
		keyCreatedBy: []byte(r.CreatedBy),
		keyCreated:   []byte(r.Created.UTC().Format(time.RFC3339)),
		keyExpires:   []byte(r.Expires.UTC().Format(time.RFC3339)),
		keyRevoked:   []byte(strconv.FormatBool(r.Revoked)),
	}
	if r.Failures > 0 {
		s.Data[keyFailures] = []byte(strconv.Itoa(r.Failures))
	}
	if r.UsedBy != "" {
		s.Data[keyUsedBy] = []byte(r.UsedBy)
		s.Data[keyMachine] = []byte(r.Machine)
		s.Data[keyUsed] = []byte(r.Used.UTC().Format(time.RFC3339))
	}
}

// recordOf reads a token record's Secret.
func recordOf(s *corev1.Secret) (Record, error) {
	if s.Type != SecretType || len(s.Name) <= len(secretPrefix) || s.Name[:len(secretPrefix)] != secretPrefix {
		return Record{}, fmt.Errorf("secret %s/%s is not an enrollment token record", s.Namespace, s.Name)
	}
	r := Record{
		ID: s.Name[len(secretPrefix):], Namespace: s.Namespace,
		Site: string(s.Data[keySite]), Hash: string(s.Data[keyHash]), CreatedBy: string(s.Data[keyCreatedBy]),
		Revoked: string(s.Data[keyRevoked]) == "true",
		UsedBy:  string(s.Data[keyUsedBy]), Machine: string(s.Data[keyMachine]),
	}
	for key, t := range map[string]*time.Time{keyCreated: &r.Created, keyExpires: &r.Expires, keyUsed: &r.Used} {
		if len(s.Data[key]) == 0 && key != keyExpires {
			continue
		}
		v, err := time.Parse(time.RFC3339, string(s.Data[key]))
		if err != nil {
			return Record{}, fmt.Errorf("enrollment token record %s/%s: %s: %w", s.Namespace, s.Name, key, err)
		}
		*t = v
	}
	if v := s.Data[keyFailures]; len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 {
			return Record{}, fmt.Errorf("enrollment token record %s/%s: %s is not a count: %q", s.Namespace, s.Name, keyFailures, v)
		}
		r.Failures = n
	}
	if r.Site == "" || r.Hash == "" {
		return Record{}, fmt.Errorf("enrollment token record %s/%s lacks its site or hash", s.Namespace, s.Name)
	}
	return r, nil
}

// newSecret is the Secret of a new record.
func (r Record) newSecret() *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{}}
	r.toSecret(s)
	return s
}

// wire is what the REST API says of r at now (never the token).
func (r Record) wire(now time.Time) restv1.EnrollmentToken {
	t := restv1.EnrollmentToken{
		ID: r.ID, Namespace: r.Namespace, Site: r.Site, CreatedBy: r.CreatedBy,
		Created: r.Created, Expires: r.Expires, State: r.State(now), UsedBy: r.UsedBy, Machine: r.Machine,
	}
	if r.UsedBy != "" {
		used := r.Used
		t.Used = &used
	}
	return t
}

// Prunable reports whether a record may go: retention after its token expired (a used or
// revoked token too: its record says who enrolled, for that long).
func (r Record) Prunable(now time.Time, retention time.Duration) bool {
	return !now.Before(r.Expires.Add(retention))
}

// Prune deletes the records of every namespace whose tokens expired retention ago or more, page
// by page, and returns how many it deleted. Records it cannot read are left alone.
func Prune(ctx context.Context, reader client.Reader, writer client.Writer, now time.Time, retention time.Duration) (int, error) {
	deleted := 0
	opts := []client.ListOption{client.MatchingFields{"type": string(SecretType)}, client.Limit(500)}
	for cont := ""; ; {
		var list corev1.SecretList
		if err := reader.List(ctx, &list, append(opts, client.Continue(cont))...); err != nil {
			return deleted, fmt.Errorf("list enrollment token records: %w", err)
		}
		for i := range list.Items {
			rec, err := recordOf(&list.Items[i])
			if err != nil || !rec.Prunable(now, retention) {
				continue
			}
			err = writer.Delete(ctx, &list.Items[i], client.Preconditions{ResourceVersion: &list.Items[i].ResourceVersion})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return deleted, fmt.Errorf("delete enrollment token record %s/%s: %w", list.Items[i].Namespace, list.Items[i].Name, err)
			}
			if err == nil {
				deleted++
			}
		}
		if cont = list.Continue; cont == "" {
			return deleted, nil
		}
	}
}
