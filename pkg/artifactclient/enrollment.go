package artifactclient

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// tokensPath is the collection of a site's enrollment tokens.
func tokensPath(namespace, site string) string {
	return "/api/v1/namespaces/" + url.PathEscape(namespace) + "/sites/" + url.PathEscape(site) + "/enrollment-tokens"
}

// CreateEnrollmentToken issues a token of a site, valid for ttl (a Go duration; "" for the
// controller's default). The answer is the only place the token appears.
func (c *Client) CreateEnrollmentToken(ctx context.Context, namespace, site, ttl string) (restv1.EnrollmentToken, error) {
	body, err := json.Marshal(restv1.CreateEnrollmentToken{TTL: ttl})
	if err != nil {
		return restv1.EnrollmentToken{}, err
	}
	var t restv1.EnrollmentToken
	_, err = c.do(ctx, http.MethodPost, tokensPath(namespace, site), bytes.NewReader(body), jsonHeader(), &t, http.StatusCreated)
	return t, err
}

// ListEnrollmentTokens lists a site's tokens (never the tokens themselves).
func (c *Client) ListEnrollmentTokens(ctx context.Context, namespace, site string) (restv1.EnrollmentTokenList, error) {
	var l restv1.EnrollmentTokenList
	_, err := c.do(ctx, http.MethodGet, tokensPath(namespace, site), nil, nil, &l, http.StatusOK)
	return l, err
}

// RevokeEnrollmentToken revokes a site's token by its id.
func (c *Client) RevokeEnrollmentToken(ctx context.Context, namespace, site, id string) (restv1.EnrollmentToken, error) {
	var t restv1.EnrollmentToken
	_, err := c.do(ctx, http.MethodDelete, tokensPath(namespace, site)+"/"+url.PathEscape(id), nil, nil, &t, http.StatusOK)
	return t, err
}
