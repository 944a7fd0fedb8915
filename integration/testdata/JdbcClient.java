import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Properties;

/**
 * Apron from the Arrow Flight SQL JDBC driver (what DBeaver, Tableau and
 * Superset use): connect (the driver reads GetSqlInfo), a query, a
 * prepared query with a parameter (the driver prepares every statement),
 * and metadata. Run by TestJDBC with the server's host:port; prints "ok"
 * or exits non-zero with the first wrong answer.
 */
public class JdbcClient {
    static void check(String what, Object got, Object want) {
        if (!String.valueOf(got).equals(String.valueOf(want))) {
            System.err.println(what + ": got " + got + ", want " + want);
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:arrow-flight-sql://" + args[0] + "/?useEncryption=false";
        try (Connection conn = DriverManager.getConnection(url, new Properties())) {
            DatabaseMetaData md = conn.getMetaData();
            check("product name", md.getDatabaseProductName(), "Apron");
            // DBeaver reads it at connect; an int32 SqlInfo value made the
            // driver throw ClassCastException (Integer to Long).
            check("default transaction isolation", md.getDefaultTransactionIsolation(), Connection.TRANSACTION_NONE);
            check("transaction isolation", conn.getTransactionIsolation(), Connection.TRANSACTION_NONE);
            check("supports transactions", md.supportsTransactions(), false);
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT count(*) AS n, count(DISTINCT time) AS t FROM jdbc.cpu")) {
                rs.next();
                check("count", rs.getLong("n"), 1000);
                check("distinct ns times", rs.getLong("t"), 1000);
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM jdbc.cpu WHERE host = ?")) {
                ps.setString(1, "h3");
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    check("prepared with a parameter", rs.getLong(1), 143);
                }
            }
            try (ResultSet rs = md.getTables(null, "jdbc", "%", null)) {
                rs.next();
                check("table", rs.getString("TABLE_NAME"), "cpu");
                check("schema", rs.getString("TABLE_SCHEM"), "jdbc");
            }
            try (ResultSet rs = md.getColumns(null, "jdbc", "cpu", null)) {
                StringBuilder cols = new StringBuilder();
                while (rs.next()) {
                    cols.append(rs.getString("COLUMN_NAME")).append(' ');
                }
                check("columns", cols.toString().trim(), "time host usage");
            }
        }
        System.out.println("ok");
    }
}
