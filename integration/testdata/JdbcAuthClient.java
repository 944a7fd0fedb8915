import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import java.util.Properties;

/**
 * Apron's authentication and TLS from the Arrow Flight SQL JDBC driver:
 * user/password (a Basic handshake, then the bearer token it answers) and
 * token= over plaintext, token= over TLS trusting the test CA
 * (tlsRootCerts) and over mTLS (clientCertificate, clientKey), each
 * counting a.t; and the refusals: a wrong password, no credentials, an
 * unknown token, TLS without the CA or without a token, mTLS without a
 * client certificate. Run by TestAuthJDBC
 * with: plainAddr readToken plainRows tlsAddr tlsToken tlsRows mtlsAddr
 * mtlsToken mtlsRows caFile clientCertFile clientKeyFile. Prints one line
 * per check and "ok" last, or exits non-zero at the first wrong answer.
 */
public class JdbcAuthClient {
    static void fail(String msg) {
        System.err.println(msg);
        System.exit(1);
    }

    static long count(String url) throws SQLException {
        try (Connection conn = DriverManager.getConnection(url, new Properties());
             Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*) FROM a.t")) {
            if (!rs.next()) {
                fail(url + ": no row");
            }
            return rs.getLong(1);
        }
    }

    static void counts(String what, String url, long want) throws SQLException {
        long got = count(url);
        if (got != want) {
            fail(what + ": count " + got + ", want " + want);
        }
        System.out.println(what + ": " + got);
    }

    /** The messages of e and its causes, lower case. */
    static String messages(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            b.append(c.getClass().getName()).append(": ").append(c.getMessage()).append(" | ");
        }
        return b.toString();
    }

    /**
     * Connecting to url and counting must fail with an SQLException whose
     * messages (with its causes') mention every one of all and, if any is
     * not empty, one of any.
     */
    static void fails(String what, String url, String[] all, String... any) {
        try {
            long n = count(url);
            fail(what + ": no error (count " + n + ")");
        } catch (SQLException e) {
            String m = messages(e);
            String lower = m.toLowerCase(Locale.ROOT);
            boolean ok = any.length == 0;
            for (String p : any) {
                ok |= lower.contains(p.toLowerCase(Locale.ROOT));
            }
            for (String p : all) {
                ok &= lower.contains(p.toLowerCase(Locale.ROOT));
            }
            if (!ok) {
                e.printStackTrace();
                fail(what + ": " + m + " does not mention all of [" + String.join(", ", all)
                        + "] and one of [" + String.join(", ", any) + "]");
            }
            System.out.println(what + ": " + m);
        }
    }

    static String[] all(String... parts) {
        return parts;
    }

    public static void main(String[] a) throws Exception {
        String plain = "jdbc:arrow-flight-sql://" + a[0] + "/?useEncryption=false";
        String token = a[1];
        long rows = Long.parseLong(a[2]);
        String tls = "jdbc:arrow-flight-sql://" + a[3] + "/?useEncryption=true";
        String tlsToken = a[4];
        long tlsRows = Long.parseLong(a[5]);
        String mtls = "jdbc:arrow-flight-sql://" + a[6] + "/?useEncryption=true";
        String mtlsToken = a[7];
        long mtlsRows = Long.parseLong(a[8]);
        String ca = a[9], clientCert = a[10], clientKey = a[11];

        counts("user/password", plain + "&user=x&password=" + token, rows);
        counts("token", plain + "&token=" + token, rows);
        fails("wrong password", plain + "&user=x&password=wrong", all("UNAUTHENTICATED", "not an Apron token"));
        fails("no credentials", plain, all("unauthenticated", "no credentials"));
        fails("unknown token", plain + "&token=apron_" + "0".repeat(16) + "ab".repeat(32), all("UNAUTHENTICATED", "unknown token"));

        counts("TLS token", tls + "&tlsRootCerts=" + ca + "&token=" + tlsToken, tlsRows);
        counts("TLS user/password", tls + "&tlsRootCerts=" + ca + "&user=x&password=" + tlsToken, tlsRows);
        fails("TLS without the CA", tls + "&token=" + tlsToken, all("UNAVAILABLE", "PKIX path building failed"));
        fails("TLS without a token", tls + "&tlsRootCerts=" + ca, all("no credentials"));

        String mtlsCA = mtls + "&tlsRootCerts=" + ca + "&token=" + mtlsToken;
        counts("mTLS token", mtlsCA + "&clientCertificate=" + clientCert + "&clientKey=" + clientKey, mtlsRows);
        // When the client learns of the refusal varies (TLS 1.3): the
        // alert, or a reset or closed connection.
        fails("mTLS without a client certificate", mtlsCA, all("UNAVAILABLE"), "CERTIFICATE_REQUIRED", "reset", "closed");
        System.out.println("ok");
    }
}
