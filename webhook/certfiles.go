package webhook

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// CertFiles serves a certificate and key from files another tool keeps (cert-manager
// through a mounted Secret) and reloads them when they change.
type CertFiles struct {
	cert, key string
	logger    *slog.Logger
	modified  time.Time
	*certState
}

// NewCertFiles loads the files once; Run reloads them.
func NewCertFiles(certFile, keyFile string, logger *slog.Logger) (*CertFiles, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &CertFiles{cert: certFile, key: keyFile, logger: logger, certState: newCertState()}
	if _, err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// reload reads the files when either changed since the last load.
func (f *CertFiles) reload() (bool, error) {
	var latest time.Time
	for _, name := range []string{f.cert, f.key} {
		st, err := os.Stat(name)
		if err != nil {
			return false, err
		}
		if st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	if !latest.After(f.modified) && f.Ready() {
		return false, nil
	}
	certPEM, err := os.ReadFile(f.cert)
	if err != nil {
		return false, err
	}
	keyPEM, err := os.ReadFile(f.key)
	if err != nil {
		return false, err
	}
	if err := f.load(certPEM, keyPEM); err != nil {
		return false, err
	}
	f.modified = latest
	return true, nil
}

// Run checks the files every interval until ctx ends. A Secret volume is updated by the
// kubelet in place (a symlink swap), which changes the files' modification time.
func (f *CertFiles) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := f.reload()
		switch {
		case err != nil:
			f.errors.Add(1)
			f.logger.Warn("reloading the webhook certificate; serving the previous one", "err", err)
		case changed:
			f.rotations.Add(1)
			f.logger.Info("webhook certificate reloaded", "file", f.cert)
		}
	}
}
