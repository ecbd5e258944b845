package transit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/kms/pkg/service"

	"github.com/edgefleet/edgefleet/pkg/vaultauth"
)

// APIVersion is the KMS API version the service speaks.
const APIVersion = "v2"

// Service wraps and unwraps the API server's data encryption keys with one transit key.
type Service struct {
	vault   vaultauth.Logical
	mount   string
	key     string
	timeout time.Duration
}

var _ service.Service = (*Service)(nil)

// New returns a service over the transit key named key of the transit engine mounted at mount,
// each Vault call bounded by timeout (and by the caller's deadline, when that is sooner).
func New(vault vaultauth.Logical, mount, key string, timeout time.Duration) *Service {
	return &Service{vault: vault, mount: mount, key: key, timeout: timeout}
}

// keyID is the key ID of version of the service's transit key: "<mount>/<key>:v<version>".
func (s *Service) keyID(version int) string {
	return fmt.Sprintf("%s/%s:v%d", s.mount, s.key, version)
}

// Encrypt wraps plaintext with the transit key's latest version.
func (s *Service) Encrypt(ctx context.Context, uid string, plaintext []byte) (*service.EncryptResponse, error) {
	ciphertext, version, err := s.encrypt(ctx, plaintext)
	if err != nil {
		return nil, fmt.Errorf("encrypt (request %s) with Vault transit key %s/%s: %w", uid, s.mount, s.key, err)
	}
	return &service.EncryptResponse{Ciphertext: []byte(ciphertext), KeyID: s.keyID(version)}, nil
}

func (s *Service) encrypt(ctx context.Context, plaintext []byte) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.vault.WriteWithContext(ctx, s.path("encrypt"), map[string]any{
		"plaintext": base64.StdEncoding.EncodeToString(plaintext),
	})
	if err != nil {
		return "", 0, err
	}
	ciphertext, err := stringField(resp, "ciphertext")
	if err != nil {
		return "", 0, err
	}
	version, err := ciphertextVersion(ciphertext)
	return ciphertext, version, err
}

// Decrypt unwraps a ciphertext Encrypt made, with the key version the ciphertext names, which
// must be the one of the request's key ID.
func (s *Service) Decrypt(ctx context.Context, uid string, req *service.DecryptRequest) ([]byte, error) {
	plaintext, err := s.decrypt(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("decrypt (request %s, key ID %s) with Vault transit key %s/%s: %w", uid, req.KeyID, s.mount, s.key, err)
	}
	return plaintext, nil
}

func (s *Service) decrypt(ctx context.Context, req *service.DecryptRequest) ([]byte, error) {
	version, err := ciphertextVersion(string(req.Ciphertext))
	if err != nil {
		return nil, err
	}
	if want := s.keyID(version); req.KeyID != want {
		return nil, fmt.Errorf("the ciphertext is of key ID %s: was it encrypted with another transit key?", want)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.vault.WriteWithContext(ctx, s.path("decrypt"), map[string]any{"ciphertext": string(req.Ciphertext)})
	if err != nil {
		return nil, err
	}
	encoded, err := stringField(resp, "plaintext")
	if err != nil {
		return nil, err
	}
	plaintext, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("vault's plaintext is not base64")
	}
	return plaintext, nil
}

// Status reads the transit key: healthy when Vault answers and the key exists, with the key ID
// of its latest version.
func (s *Service) Status(ctx context.Context) (*service.StatusResponse, error) {
	version, err := s.latestVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("read Vault transit key %s/%s: %w", s.mount, s.key, err)
	}
	return &service.StatusResponse{Version: APIVersion, Healthz: "ok", KeyID: s.keyID(version)}, nil
}

func (s *Service) latestVersion(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.vault.ReadWithContext(ctx, s.path("keys"))
	if err != nil {
		return 0, err
	}
	if resp == nil {
		return 0, fmt.Errorf("no such key (create it: vault write -f %s)", s.path("keys"))
	}
	return intField(resp, "latest_version")
}

// path is the Vault path of one of the transit engine's operations on the service's key.
func (s *Service) path(op string) string { return s.mount + "/" + op + "/" + s.key }

// ciphertextVersion reads the key version out of a transit ciphertext, "vault:v<version>:<data>".
func ciphertextVersion(ciphertext string) (int, error) {
	rest, prefixed := strings.CutPrefix(ciphertext, "vault:v")
	digits, _, cut := strings.Cut(rest, ":")
	version, err := strconv.Atoi(digits)
	if !prefixed || !cut || err != nil || version < 1 {
		return 0, errors.New(`the ciphertext does not start with "vault:v<version>:"`)
	}
	return version, nil
}

func stringField(resp *vaultapi.Secret, name string) (string, error) {
	if resp == nil {
		return "", fmt.Errorf("vault answered without data (no %s)", name)
	}
	v, ok := resp.Data[name].(string)
	if !ok || v == "" {
		return "", fmt.Errorf("vault's answer has no %s", name)
	}
	return v, nil
}

func intField(resp *vaultapi.Secret, name string) (int, error) {
	n, ok := resp.Data[name].(json.Number)
	if !ok {
		return 0, fmt.Errorf("vault's answer has no %s", name)
	}
	v, err := strconv.Atoi(n.String())
	if err != nil || v < 1 {
		return 0, fmt.Errorf("vault's %s %q is not a positive integer", name, n)
	}
	return v, nil
}
