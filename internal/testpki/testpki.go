// Package testpki makes a throwaway PKI, for tests only: a CA, a server
// certificate for 127.0.0.1, ::1 and localhost, and a client certificate,
// written as PEM files to a directory, with helpers returning the
// *x509.CertPool and tls.Certificate a Go client or server takes.
//
// Keys are unencrypted PKCS#8 ("BEGIN PRIVATE KEY"): Go reads every PEM
// key format, but the Java driver's Netty takes PKCS#8 only
// (https://netty.io/wiki/sslcontextbuilder-and-private-key.html). ECDSA
// P-256 keeps generation fast; Go, Java and gRPC C++ all take it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // Cert, PEM-encoded
}

// NewCA makes a self-signed CA with common name cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, cn)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: encode("CERTIFICATE", der)}
}

// Pool trusts ca alone, for a tls.Config's RootCAs or ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is a certificate ca signed and its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte // PKCS#8
}

// Server signs a server certificate for cn, valid for 127.0.0.1, ::1 and
// localhost.
func (ca *CA) Server(t testing.TB, cn string) *Leaf {
	t.Helper()
	return ca.issue(t, cn, true)
}

// Client signs a client certificate for cn.
func (ca *CA) Client(t testing.TB, cn string) *Leaf {
	t.Helper()
	return ca.issue(t, cn, false)
}

func (ca *CA) issue(t testing.TB, cn string, server bool) *Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Leaf{Cert: cert, CertPEM: encode("CERTIFICATE", der), KeyPEM: encode("PRIVATE KEY", k)}
}

// TLS is l as a tls.Config's Certificates take it.
func (l *Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// PKI is a CA with a server and a client certificate, as PEM files in Dir:
// ca.pem, server.pem, server-key.pem, client.pem and client-key.pem.
type PKI struct {
	CA  *CA
	Dir string
	// The paths of the files.
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string
	// Server and Client are the certificates for a Go server's or
	// client's tls.Config Certificates.
	Server, Client tls.Certificate
}

// New makes a PKI in dir, its common names name+" CA", name+" server"
// and name+" client".
func New(t testing.TB, dir, name string) *PKI {
	t.Helper()
	p := &PKI{CA: NewCA(t, name+" CA"), Dir: dir}
	p.CAFile = WriteFile(t, dir, "ca.pem", p.CA.PEM)
	p.RotateServer(t, name+" server")
	client := p.CA.Client(t, name+" client")
	p.ClientCertFile = WriteFile(t, dir, "client.pem", client.CertPEM)
	p.ClientKeyFile = WriteFile(t, dir, "client-key.pem", client.KeyPEM)
	p.Client = client.TLS(t)
	return p
}

// RotateServer signs a new server certificate for cn (a new serial),
// writes it and its key over server.pem and server-key.pem, and returns
// it.
func (p *PKI) RotateServer(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	s := p.CA.Server(t, cn)
	p.ServerCertFile = WriteFile(t, p.Dir, "server.pem", s.CertPEM)
	p.ServerKeyFile = WriteFile(t, p.Dir, "server-key.pem", s.KeyPEM)
	p.Server = s.TLS(t)
	return s.Cert
}

// CAPool trusts the PKI's CA, for a tls.Config's RootCAs or ClientCAs.
func (p *PKI) CAPool() *x509.CertPool { return p.CA.Pool() }

// WriteFile writes data to dir/name, readable by the owner only, and
// returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// template is a certificate for cn with a random serial, valid from an
// hour ago (clock skew) for a day.
func template(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
