package setup

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/kms/pkg/service"
)

// logged records a KMS service's failures and the changes of its key ID in the plugin's log
// (the errors also go back to the API server, another process with a log of its own). What it
// logs carries no plaintext: the service's errors carry none.
type logged struct {
	next service.Service
	log  *slog.Logger

	mu    sync.Mutex
	keyID string
}

func newLogged(next service.Service, log *slog.Logger) *logged {
	return &logged{next: next, log: log}
}

func (l *logged) Encrypt(ctx context.Context, uid string, plaintext []byte) (*service.EncryptResponse, error) {
	resp, err := l.next.Encrypt(ctx, uid, plaintext)
	if err != nil {
		l.log.Error("encrypt failed", "err", err)
		return nil, err
	}
	l.sawKeyID(resp.KeyID)
	return resp, nil
}

func (l *logged) Decrypt(ctx context.Context, uid string, req *service.DecryptRequest) ([]byte, error) {
	plaintext, err := l.next.Decrypt(ctx, uid, req)
	if err != nil {
		l.log.Error("decrypt failed", "err", err)
	}
	return plaintext, err
}

func (l *logged) Status(ctx context.Context) (*service.StatusResponse, error) {
	resp, err := l.next.Status(ctx)
	if err != nil {
		l.log.Error("status failed", "err", err)
		return nil, err
	}
	l.sawKeyID(resp.KeyID)
	return resp, nil
}

// sawKeyID logs the key ID when it is not the last one seen: at the first call, and when the
// transit key was rotated.
func (l *logged) sawKeyID(keyID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if keyID != l.keyID {
		l.log.Info("transit key in use", "keyID", keyID, "previous", l.keyID)
		l.keyID = keyID
	}
}
