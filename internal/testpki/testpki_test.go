package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

func TestPKI(t *testing.T) {
	p := New(t, t.TempDir(), "testpki")
	pool := p.CAPool()
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := p.Server.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := p.Client.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := p.Client.Leaf.Verify(x509.VerifyOptions{Roots: NewCA(t, "other").Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("another CA verifies the client certificate")
	}
	for _, f := range []string{p.ServerKeyFile, p.ClientKeyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if blk, _ := pem.Decode(b); blk == nil || blk.Type != "PRIVATE KEY" {
			t.Errorf("%s: not a PKCS#8 PEM key", f)
		} else if _, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile); err != nil {
		t.Errorf("client files: %v", err)
	}

	old := p.Server.Leaf.SerialNumber
	cert := p.RotateServer(t, "testpki server 2")
	pair, err := tls.LoadX509KeyPair(p.ServerCertFile, p.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "testpki server 2" || cert.SerialNumber.Cmp(old) == 0 || pair.Leaf.SerialNumber.Cmp(cert.SerialNumber) != 0 {
		t.Errorf("rotated: %s serial %x, file serial %x, old %x", cert.Subject, cert.SerialNumber, pair.Leaf.SerialNumber, old)
	}
}
