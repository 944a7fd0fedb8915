package integration

// A throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1,
// ::1 and localhost, and a client certificate, as PEM files. Keys are
// unencrypted PKCS#8 ("BEGIN PRIVATE KEY"): Go reads every PEM key format,
// but the Java driver's Netty takes PKCS#8 only
// (https://netty.io/wiki/sslcontextbuilder-and-private-key.html). ECDSA
// P-256 keeps generation fast; Go, Java and gRPC C++ all take it.
//
// How each client is given these files, against a server started with
// --tls-cert, --tls-key and (for mTLS) --tls-client-ca:
//
// Flight SQL JDBC driver (arrow-java), as URL properties of
// jdbc:arrow-flight-sql://HOST:PORT/?...; they take file paths, so the PEM
// files serve as they are and no Java trust store is needed:
//   - useEncryption=true (the driver's default is true; plaintext needs
//     useEncryption=false)
//   - tlsRootCerts=<PEM CA file>: trusted roots, checked before
//     useSystemTrustStore and trustStore/trustStorePassword
//   - clientCertificate=<PEM file>, clientKey=<PEM PKCS#8 key file>: mTLS,
//     used only when both are set
//   - disableCertificateVerification=true: trust any server certificate
//
// Source: enum ArrowFlightConnectionProperty in
// flight-sql-jdbc-core/.../jdbc/utils/ArrowFlightConnectionConfigImpl.java
// and ArrowFlightSqlClientHandler.Builder#build (apache/arrow,
// java/flight/), which reads the three as paths
// (getTlsRootCertificatesPath, getClientCertificatePath, getClientKeyPath);
// https://arrow.apache.org/docs/java/flight_sql_jdbc_driver.html.
//
// pyarrow.flight: FlightClient("grpc+tls://HOST:PORT", tls_root_certs=...,
// cert_chain=..., private_key=..., override_hostname=None,
// disable_server_verification=False); tls_root_certs, cert_chain and
// private_key are the PEM bytes, not paths (open(path, "rb").read()).
// Source: https://arrow.apache.org/docs/python/generated/pyarrow.flight.FlightClient.html.
//
// ADBC Flight SQL driver, database options (the Python package
// adbc_driver_flightsql wraps the Go driver and takes the same keys); the
// values are PEM text, not paths, and the URI scheme is grpc+tls://:
//   - adbc.flight.sql.client_option.tls_root_certs: trusted roots
//   - adbc.flight.sql.client_option.mtls_cert_chain and
//     adbc.flight.sql.client_option.mtls_private_key: mTLS, both or neither
//   - adbc.flight.sql.client_option.tls_skip_verify: "true" or "false"
//   - adbc.flight.sql.client_option.tls_override_hostname
//
// Source: OptionSSLRootCerts, OptionMTLSCertChain, OptionMTLSPrivateKey,
// OptionSSLSkipVerify and OptionSSLOverrideHostname in
// github.com/apache/arrow-adbc/go/adbc@v1.12.0/driver/flightsql/flightsql_driver.go;
// databaseImpl.SetOptions in flightsql_database.go passes the values to
// tls.X509KeyPair and CertPool.AppendCertsFromPEM.

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

// testPKI holds the paths of its PEM files.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string

	caCert *x509.Certificate
	client tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newPKIKey(t)
	caTmpl := pkiTemplate(t, "apron integration CA")
	caTmpl.IsCA = true
	caTmpl.BasicConstraintsValid = true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{CA: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	if p.caCert, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatal(err)
	}

	issue := func(cn string, usage x509.ExtKeyUsage, certFile, keyFile string) (string, string) {
		key := newPKIKey(t)
		tmpl := pkiTemplate(t, cn)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		k, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, certFile, "CERTIFICATE", der), writePEM(t, dir, keyFile, "PRIVATE KEY", k)
	}
	p.ServerCert, p.ServerKey = issue("apron integration server", x509.ExtKeyUsageServerAuth, "server.pem", "server-key.pem")
	p.ClientCert, p.ClientKey = issue("apron integration client", x509.ExtKeyUsageClientAuth, "client.pem", "client-key.pem")
	if p.client, err = tls.LoadX509KeyPair(p.ClientCert, p.ClientKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// CAPool trusts the PKI's CA, for a Go client's tls.Config RootCAs.
func (p *testPKI) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

// ClientCertificate is the client certificate for a Go client's
// tls.Config Certificates (mTLS).
func (p *testPKI) ClientCertificate() tls.Certificate { return p.client }

// ServerFlags are the apron serve flags of the PKI; with mTLS, clients
// must present the client certificate.
func (p *testPKI) ServerFlags(mTLS bool) []string {
	f := []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}
	if mTLS {
		f = append(f, "--tls-client-ca", p.CA)
	}
	return f
}

func newPKIKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pkiTemplate(t *testing.T, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour), // tolerate clock skew
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
