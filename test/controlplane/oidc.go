package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
)

// oidcKeyID names the issuer's one signing key in its JWKS and in the tokens' headers.
const oidcKeyID = "test-key"

// OIDCIssuer is an OpenID Connect issuer for tests: its discovery document and its JWKS served
// over TLS on loopback, and an RSA key made when it starts, with which it signs ID tokens. An
// API server trusts it through Options.JWTAuthenticators (JWTAuthenticator). Close it when done.
type OIDCIssuer struct {
	// URL is the issuer ("iss"): https://127.0.0.1:PORT.
	URL string
	// CA is the PEM certificate the issuer's TLS server presents (self-signed).
	CA string

	srv    *httptest.Server
	signer jose.Signer
}

// StartOIDCIssuer makes an RSA key and serves /.well-known/openid-configuration and /jwks.
func StartOIDCIssuer() (*OIDCIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("OIDC issuer key: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", oidcKeyID))
	if err != nil {
		return nil, fmt.Errorf("OIDC issuer signer: %w", err)
	}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: oidcKeyID, Algorithm: string(jose.RS256), Use: "sig"}}}
	iss := &OIDCIssuer{signer: signer}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": iss.URL, "jwks_uri": iss.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{string(jose.RS256)},
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, jwks) })
	iss.srv = httptest.NewTLSServer(mux)
	iss.URL = iss.srv.URL
	iss.CA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: iss.srv.Certificate().Raw}))
	return iss, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Close stops the issuer's server.
func (i *OIDCIssuer) Close() { i.srv.Close() }

// IDToken signs an ID token for subject ("sub") and groups ("groups"), for audience ("aud"),
// valid for ttl from now.
func (i *OIDCIssuer) IDToken(subject string, groups []string, audience string, ttl time.Duration) (string, error) {
	now := time.Now()
	claims := jwt.Claims{Issuer: i.URL, Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(ttl))}
	token, err := jwt.Signed(i.signer).Claims(claims).Claims(map[string]any{"groups": groups}).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign an ID token for %s: %w", subject, err)
	}
	return token, nil
}

// JWTAuthenticator is how an API server trusts the issuer for audience: users are named by
// "sub", groups by "groups", both with prefix (e.g. "oidc:").
func (i *OIDCIssuer) JWTAuthenticator(audience, prefix string) apiserverv1.JWTAuthenticator {
	return apiserverv1.JWTAuthenticator{
		Issuer: apiserverv1.Issuer{URL: i.URL, CertificateAuthority: i.CA, Audiences: []string{audience}},
		ClaimMappings: apiserverv1.ClaimMappings{
			Username: apiserverv1.PrefixedClaimOrExpression{Claim: "sub", Prefix: &prefix},
			Groups:   apiserverv1.PrefixedClaimOrExpression{Claim: "groups", Prefix: &prefix},
		},
	}
}
