package webhook

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Keys of the TLS Secret (type kubernetes.io/tls, with cert-manager's ca.crt beside).
const (
	SecretCACert = "ca.crt" // the current CA first, then earlier CAs until they expire
	SecretCAKey  = "ca.key"
	SecretCert   = "tls.crt"
	SecretKey    = "tls.key"
)

// Bundle is the PEM content of the TLS Secret.
type Bundle struct {
	CACerts, CAKey, Cert, Key []byte
}

func (b Bundle) data() map[string][]byte {
	return map[string][]byte{SecretCACert: b.CACerts, SecretCAKey: b.CAKey, SecretCert: b.Cert, SecretKey: b.Key}
}

func bundleOf(data map[string][]byte) Bundle {
	return Bundle{CACerts: data[SecretCACert], CAKey: data[SecretCAKey], Cert: data[SecretCert], Key: data[SecretKey]}
}

func (b Bundle) equal(o Bundle) bool {
	return bytes.Equal(b.CACerts, o.CACerts) && bytes.Equal(b.CAKey, o.CAKey) &&
		bytes.Equal(b.Cert, o.Cert) && bytes.Equal(b.Key, o.Key)
}

// certPolicy says what the serving certificate must cover and how long certificates live.
type certPolicy struct {
	dnsNames        []string
	ips             []net.IP
	caValidity      time.Duration
	servingValidity time.Duration
}

// renew returns the bundle to serve at now: b where it is still good, else with a new CA
// and/or serving certificate. A certificate is renewed when a third of its lifetime is
// left (as cert-manager does by default); a renewed CA keeps its predecessor in the bundle
// until that expires, so certificates it signed stay trusted while replicas switch.
func (p certPolicy) renew(b Bundle, now time.Time) (Bundle, error) {
	out := b
	ca, caKey, err := parseCA(b)
	if err != nil || dueForRenewal(ca, now) {
		caPEM, keyPEM, err := newCA(now, p.caValidity)
		if err != nil {
			return Bundle{}, err
		}
		out.CACerts = append(caPEM, validCerts(b.CACerts, now)...)
		out.CAKey = keyPEM
		if ca, caKey, err = parseCA(out); err != nil {
			return Bundle{}, err
		}
		out.Cert, out.Key = nil, nil
	} else {
		// Keep the current CA; drop earlier ones that have expired.
		_, rest := pem.Decode(b.CACerts)
		out.CACerts = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), validCerts(rest, now)...)
	}
	if !p.servingGood(out, ca, now) {
		if out.Cert, out.Key, err = p.issue(ca, caKey, now); err != nil {
			return Bundle{}, err
		}
	}
	return out, nil
}

// servingGood reports whether b's serving certificate parses, matches its key, is signed
// by ca, covers the policy's names and is not due for renewal.
func (p certPolicy) servingGood(b Bundle, ca *x509.Certificate, now time.Time) bool {
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil || dueForRenewal(leaf, now) {
		return false
	}
	for _, n := range p.dnsNames {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	for _, ip := range p.ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// dueForRenewal: less than a third of the certificate's lifetime is left, or it is not
// valid yet (a clock step back).
func dueForRenewal(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.Before(c.NotBefore) || c.NotAfter.Sub(now) < life/3
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding a key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// newCA returns a self-signed CA certificate and its key, valid from a minute ago (clock
// skew between replicas and the API server).
func newCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("cupti-exporter webhook CA %d", now.Unix())},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// issue signs a serving certificate for the policy's names with ca.
func (p certPolicy) issue(ca *x509.Certificate, caKey crypto.Signer, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	cn := "cupti-exporter-webhook"
	if len(p.dnsNames) > 0 {
		cn = p.dnsNames[0]
	}
	notAfter := now.Add(p.servingValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     p.dnsNames,
		IPAddresses:  p.ips,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// parseCA returns the current CA (the first certificate of the bundle) and its key.
func parseCA(b Bundle) (*x509.Certificate, crypto.Signer, error) {
	block, _ := pem.Decode(b.CACerts)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CA certificate")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(block), b.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !ca.IsCA {
		return nil, nil, errors.New("CA certificate cannot sign")
	}
	return ca, signer, nil
}

// validCerts returns the certificates of the PEM bundle b that are still valid at now.
func validCerts(b []byte, now time.Time) []byte {
	var out []byte
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			return out
		}
		b = rest
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && now.Before(c.NotAfter) {
			out = append(out, pem.EncodeToMemory(block)...)
		}
	}
}
