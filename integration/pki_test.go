package integration

// A throwaway PKI for TLS tests (internal/testpki): a CA, a server
// certificate for 127.0.0.1, ::1 and localhost, and a client certificate,
// as PEM files with PKCS#8 keys.
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
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/apron-db/apron/internal/testpki"
)

// testPKI holds the paths of its PEM files.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string

	pki *testpki.PKI
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := testpki.New(t, t.TempDir(), "apron integration")
	return &testPKI{
		CA:         p.CAFile,
		ServerCert: p.ServerCertFile,
		ServerKey:  p.ServerKeyFile,
		ClientCert: p.ClientCertFile,
		ClientKey:  p.ClientKeyFile,
		pki:        p,
	}
}

// CAPool trusts the PKI's CA, for a Go client's tls.Config RootCAs.
func (p *testPKI) CAPool() *x509.CertPool { return p.pki.CAPool() }

// ClientCertificate is the client certificate for a Go client's
// tls.Config Certificates (mTLS).
func (p *testPKI) ClientCertificate() tls.Certificate { return p.pki.Client }

// ServerFlags are the apron serve flags of the PKI; with mTLS, clients
// must present the client certificate.
func (p *testPKI) ServerFlags(mTLS bool) []string {
	f := []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}
	if mTLS {
		f = append(f, "--tls-client-ca", p.CA)
	}
	return f
}
