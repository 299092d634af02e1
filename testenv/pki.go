package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority plus the files kube-apiserver reads.
type pki struct {
	caCert, caKey, servingCert, servingKey, saKey, saPub string

	ca       *x509.Certificate
	caSigner crypto.Signer
	caPEM    []byte
}

// ensurePKI creates DIR/pki on first use and loads it afterwards, so a restarted API
// server keeps its identity and every kubeconfig written earlier stays valid.
func ensurePKI(dir string) (pki, error) {
	pd := filepath.Join(dir, "pki")
	p := pki{
		caCert:      filepath.Join(pd, "ca.crt"),
		caKey:       filepath.Join(pd, "ca.key"),
		servingCert: filepath.Join(pd, "serving.crt"),
		servingKey:  filepath.Join(pd, "serving.key"),
		saKey:       filepath.Join(pd, "service-account.key"),
		saPub:       filepath.Join(pd, "service-account.pub"),
	}
	if _, err := os.Stat(p.saKey); errors.Is(err, os.ErrNotExist) {
		if err := createPKI(pd, p); err != nil {
			return p, err
		}
	}
	var err error
	if p.caPEM, err = os.ReadFile(p.caCert); err != nil {
		return p, err
	}
	block, _ := pem.Decode(p.caPEM)
	if block == nil {
		return p, fmt.Errorf("%s: no PEM block", p.caCert)
	}
	if p.ca, err = x509.ParseCertificate(block.Bytes); err != nil {
		return p, err
	}
	keyPEM, err := os.ReadFile(p.caKey)
	if err != nil {
		return p, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return p, fmt.Errorf("%s: no PEM block", p.caKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return p, err
	}
	p.caSigner = key.(crypto.Signer)
	return p, nil
}

func createPKI(pd string, p pki) error {
	if err := os.MkdirAll(pd, 0o700); err != nil {
		return err
	}
	caKey, err := newKey()
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "testenv-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)

	servKey, err := newKey()
	if err != nil {
		return err
	}
	servTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
	}
	servDER, err := x509.CreateCertificate(rand.Reader, servTmpl, ca, servKey.Public(), caKey)
	if err != nil {
		return err
	}
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	for path, data := range map[string][]byte{
		// The API server reads verification keys only as public keys (or SEC1/PKCS#1
		// private keys), so the service-account public key gets its own file.
		p.saPub:       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		p.caCert:      certPEM(caDER),
		p.caKey:       keyPEM(caKey),
		p.servingCert: certPEM(servDER),
		p.servingKey:  keyPEM(servKey),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	// Written last: its presence marks the PKI as complete (see ensurePKI).
	return os.WriteFile(p.saKey, keyPEM(saKey), 0o600)
}

// issueClientCert signs a client certificate: the API server maps CN to the user name
// and each O to a group.
func (p pki) issueClientCert(user string, groups []string) (certPEMBytes, keyPEMBytes []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caSigner)
	if err != nil {
		return nil, nil, err
	}
	return certPEM(der), keyPEM(key), nil
}

// kubeletClientCert returns the certificate and key files the API server presents to
// kubelets (logs, exec, port-forward), creating them on first use: a client certificate
// in system:masters, which the kubelet's webhook authorizer lets through.
func (p pki) kubeletClientCert() (certFile, keyFile string, err error) {
	dir := filepath.Dir(p.caCert)
	certFile = filepath.Join(dir, "kubelet-client.crt")
	keyFile = filepath.Join(dir, "kubelet-client.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	cert, key, err := p.issueClientCert("kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return "", "", err
	}
	// Written last: its presence marks the pair as complete.
	return certFile, keyFile, os.WriteFile(certFile, cert, 0o600)
}

// writeKubeconfig writes a self-contained kubeconfig (all data embedded) for user.
func writeKubeconfig(path, server string, p pki, user string, groups []string) error {
	cert, key, err := p.issueClientCert(user, groups)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: testenv
  context:
    cluster: testenv
    user: %s
current-context: testenv
`, server, b64(p.caPEM), user, b64(cert), b64(key), user)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// keyPEM writes PKCS#8: the one private-key format every consumer here (kube-apiserver,
// Go's tls, rustls with ring) reads for EC keys.
func keyPEM(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
