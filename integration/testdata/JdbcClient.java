import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.Statement;
import java.util.Objects;
import java.util.Properties;

/**
 * Apron from the Arrow Flight SQL JDBC driver (what DBeaver, Tableau and
 * Superset use): connect (the driver reads GetSqlInfo), what DBeaver reads
 * at connect and when browsing (DatabaseMetaData), queries with
 * nanosecond times, prepared queries with every setter (the driver
 * prepares every statement), prepared INSERT with addBatch, and the
 * ResultSetMetaData of results. Run by TestJDBC with the
 * server's host:port; prints the driver's version, then "ok", or exits
 * non-zero with the first wrong answer.
 */
public class JdbcClient {
    static void check(String what, Object got, Object want) {
        if (!String.valueOf(got).equals(String.valueOf(want))) {
            System.err.println(what + ": got " + got + ", want " + want);
            System.exit(1);
        }
    }

    /**
     * The ResultSetMetaData of SELECT time, host AS h, usage * 2 AS u2
     * FROM jdbc.cpu: the two table columns name their table, database
     * (the JDBC schema) and catalog, which DBeaver navigates by; the
     * computed one names none.
     */
    static void checkOrigins(String what, ResultSetMetaData rm) throws Exception {
        check(what + ": columns", rm.getColumnCount(), 3);
        StringBuilder got = new StringBuilder();
        for (int i = 1; i <= 3; i++) {
            got.append(Objects.toString(rm.getCatalogName(i), "")).append('.')
                .append(Objects.toString(rm.getSchemaName(i), "")).append('.')
                .append(Objects.toString(rm.getTableName(i), "")).append(' ');
        }
        check(what + ": catalog.schema.table of each column", got.toString().trim(), "apron.jdbc.cpu apron.jdbc.cpu ..");
        // Driver 18.3.0 reads no nullability from the Arrow schema: every
        // column is columnNoNulls (0) whatever the server says. Either
        // answer is taken; the line says which this driver gave.
        String nulls = rm.isNullable(1) + " " + rm.isNullable(2) + " " + rm.isNullable(3);
        String right = ResultSetMetaData.columnNoNulls + " " + ResultSetMetaData.columnNullable + " " + ResultSetMetaData.columnNullable;
        String ignored = ResultSetMetaData.columnNoNulls + " " + ResultSetMetaData.columnNoNulls + " " + ResultSetMetaData.columnNoNulls;
        if (!nulls.equals(right) && !nulls.equals(ignored)) {
            check(what + ": isNullable", nulls, right);
        }
        System.out.println(what + ": isNullable " + nulls + (nulls.equals(right) ? "" : " (the driver ignores Arrow's nullability)"));
    }

    static int count(ResultSet rs) throws Exception {
        int n = 0;
        try (rs) {
            while (rs.next()) {
                n++;
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:arrow-flight-sql://" + args[0] + "/?useEncryption=false";
        // Each run (one per JVM time zone) inserts rows of its own host.
        String host = "inserted-" + java.util.TimeZone.getDefault().getID().replace('/', '-');
        try (Connection conn = DriverManager.getConnection(url, new Properties())) {
            DatabaseMetaData md = conn.getMetaData();
            System.out.println("driver: " + md.getDriverName() + " " + md.getDriverVersion());
            check("product name", md.getDatabaseProductName(), "Apron");
            // DBeaver reads it at connect; an int32 SqlInfo value made the
            // driver throw ClassCastException (Integer to Long).
            check("default transaction isolation", md.getDefaultTransactionIsolation(), Connection.TRANSACTION_NONE);
            check("transaction isolation", conn.getTransactionIsolation(), Connection.TRANSACTION_NONE);
            check("supports transactions", md.supportsTransactions(), false);
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT count(*) AS n, count(DISTINCT time) AS t FROM jdbc.cpu WHERE host NOT LIKE 'inserted-%'")) {
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
            // A prepared INSERT with parameters: their types come from the
            // target columns (null-typed, the driver could not set them).
            // Times are bound with a UTC Calendar: without one the driver
            // binds the wall-clock time of the JVM's zone (JDBC's rule for
            // a TIMESTAMP column), hours off outside UTC.
            try (PreparedStatement ps = conn.prepareStatement("INSERT INTO jdbc.cpu (time, host, usage) VALUES (?, ?, ?)")) {
                ps.setTimestamp(1, java.sql.Timestamp.from(java.time.Instant.parse("2026-01-05T12:00:00.123Z")), java.util.Calendar.getInstance(java.util.TimeZone.getTimeZone("UTC")));
                ps.setString(2, host);
                ps.setDouble(3, 2.5);
                check("prepared INSERT", ps.executeUpdate(), 1);
                ps.setTimestamp(1, java.sql.Timestamp.from(java.time.Instant.parse("2026-01-05T12:00:01.456Z")), java.util.Calendar.getInstance(java.util.TimeZone.getTimeZone("UTC")));
                ps.setString(2, host);
                ps.setDouble(3, 3.5);
                ps.addBatch();
                ps.setTimestamp(1, java.sql.Timestamp.from(java.time.Instant.parse("2026-01-05T12:00:02.789Z")), java.util.Calendar.getInstance(java.util.TimeZone.getTimeZone("UTC")));
                ps.setString(2, host);
                ps.setNull(3, java.sql.Types.DOUBLE);
                ps.addBatch();
                // The driver answers [1, 1] or [2] (one update of both rows):
                // the rows read back below are what counts.
                check("prepared INSERT batch", java.util.Arrays.stream(ps.executeBatch()).sum(), 2);
            }
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT string_agg(epoch_ms(time)::VARCHAR || '/' || coalesce(usage::VARCHAR, 'null'), ' ' ORDER BY time) FROM jdbc.cpu WHERE host = '" + host + "'")) {
                rs.next();
                check("inserted rows (ms since the epoch / usage)", rs.getString(1), "1767614400123/2.5 1767614401456/3.5 1767614402789/null");
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM jdbc.cpu WHERE host = '" + host + "' AND time >= ?")) {
                ps.setTimestamp(1, java.sql.Timestamp.from(java.time.Instant.parse("2026-01-05T12:00:01Z")), java.util.Calendar.getInstance(java.util.TimeZone.getTimeZone("UTC")));
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    check("time >= a timestamp parameter", rs.getLong(1), 2);
                }
            }
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT time, host AS h, usage * 2 AS u2 FROM jdbc.cpu LIMIT 1")) {
                checkOrigins("executeQuery", rs.getMetaData());
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT time, host AS h, usage * 2 AS u2 FROM jdbc.cpu WHERE host = ?")) {
                checkOrigins("prepareStatement", ps.getMetaData());
                ps.setString(1, "h1");
                try (ResultSet rs = ps.executeQuery()) {
                    checkOrigins("prepared executeQuery", rs.getMetaData());
                }
            }
            // The rest of what DBeaver reads at connect and when browsing.
            try (ResultSet rs = md.getCatalogs()) {
                rs.next();
                check("catalog", rs.getString("TABLE_CAT"), "apron");
            }
            try (ResultSet rs = md.getSchemas(null, "jdb%")) {
                rs.next();
                check("schema", rs.getString("TABLE_CATALOG") + "." + rs.getString("TABLE_SCHEM"), "apron.jdbc");
            }
            try (ResultSet rs = md.getTableTypes()) {
                rs.next();
                check("table type", rs.getString("TABLE_TYPE"), "TABLE");
            }
            check("primary keys", count(md.getPrimaryKeys(null, "jdbc", "cpu")), 0);
            check("imported keys", count(md.getImportedKeys(null, "jdbc", "cpu")), 0);
            check("exported keys", count(md.getExportedKeys(null, "jdbc", "cpu")), 0);
            check("cross reference", count(md.getCrossReference(null, "jdbc", "cpu", null, "jdbc", "cpu")), 0);
            // Driver 18.3.0 answers getTypeInfo itself, empty (it does not
            // ask the server's GetXdbcTypeInfo).
            System.out.println("getTypeInfo: " + count(md.getTypeInfo()) + " rows");
            check("identifier quote", md.getIdentifierQuoteString(), "\"");
            check("keywords", md.getSQLKeywords().contains("QUALIFY"), true);
            check("numeric functions", md.getNumericFunctions().contains("abs"), true);
            check("string functions", md.getStringFunctions().contains("lower"), true);
            check("time and date functions", md.getTimeDateFunctions().contains("date_trunc"), true);
            check("system functions", md.getSystemFunctions().contains("version"), true);

            // Nanosecond times read back exact, as UTC wall-clock times
            // (the column is a TIMESTAMP, JDBC's wall-clock type). Outside
            // a UTC JVM driver 18.3.0 shifts getTimestamp(i) by the JVM's
            // offset (twice, for toInstant); getObject(i, LocalDateTime)
            // and getTimestamp(i, a UTC Calendar).toLocalDateTime() are
            // right in any zone.
            java.util.Calendar utc = java.util.Calendar.getInstance(java.util.TimeZone.getTimeZone("UTC"));
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT time FROM jdbc.cpu WHERE host = 'h3' ORDER BY time LIMIT 1")) {
                rs.next();
                java.time.LocalDateTime want = java.time.LocalDateTime.parse("2026-11-29T00:00:00.000000003");
                check("nanosecond time (LocalDateTime)", rs.getObject(1, java.time.LocalDateTime.class), want);
                check("nanosecond time (Timestamp, UTC Calendar)", rs.getTimestamp(1, utc).toLocalDateTime(), want);
                check("nanosecond time (string)", rs.getString(1), "2026-11-29 00:00:00.000000003");
            }
            // Every setter DBeaver's SQL editor binds: long, double,
            // boolean, string, date, time, null (timestamps above).
            try (PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM jdbc.cpu WHERE host NOT LIKE 'inserted-%' AND usage >= ? AND (usage <= ?) = ? AND host <> ? AND CAST(time AS DATE) = ? AND CAST(time AS TIME) < ? AND ? IS NULL")) {
                ps.setLong(1, 100L);
                ps.setDouble(2, 500.5);
                ps.setBoolean(3, true);
                ps.setString(4, "h3");
                ps.setDate(5, java.sql.Date.valueOf("2026-11-29"));
                // time32[ms], as announced: into time64[us] the driver
                // wrote milliseconds unscaled (12:30:00 arrived as 00:00:45).
                ps.setTime(6, java.sql.Time.valueOf("00:00:01"));
                ps.setNull(7, java.sql.Types.VARCHAR);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    // usage 100..500, less the 58 of host h3.
                    check("every setter", rs.getLong(1), 343);
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
        // The current database from the URL (the driver sends it as a
        // "database" header): unqualified names resolve there.
        try (Connection conn = DriverManager.getConnection(url + "&database=jdbc", new Properties());
             Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*) FROM cpu WHERE host = 'h3'")) {
            rs.next();
            check("current database from the URL", rs.getLong(1), 143);
        }
        // DDL and DELETE through executeUpdate, as JDBC tools issue them;
        // a table of each run's own.
        String t = "jdbc.\"ddl_" + host + "\"";
        try (Connection conn = DriverManager.getConnection(url, new Properties());
             Statement st = conn.createStatement()) {
            check("CREATE TABLE", st.executeUpdate("CREATE TABLE " + t + " (time TIMESTAMP NOT NULL, host VARCHAR(64), n INTEGER)"), 0);
            check("INSERT", st.executeUpdate("INSERT INTO " + t + " VALUES (TIMESTAMP '2026-01-05 12:00:00', 'a', 1), (TIMESTAMP '2026-01-05 12:00:01', 'b', 2), (TIMESTAMP '2026-01-05 12:00:02', 'a', 3)"), 3);
            check("DELETE", st.executeUpdate("DELETE FROM " + t + " WHERE host = 'a'"), 2);
            try (ResultSet rs = st.executeQuery("SELECT count(*), min(n) FROM " + t)) {
                rs.next();
                check("rows after DELETE", rs.getLong(1), 1);
                check("the row left", rs.getInt(2), 2);
            }
            check("DROP TABLE", st.executeUpdate("DROP TABLE " + t), 0);
            try (ResultSet rs = conn.getMetaData().getTables(null, "jdbc", "ddl_" + host, null)) {
                check("dropped table listed", rs.next(), false);
            }
            try {
                st.executeUpdate("DROP TABLE " + t);
                throw new AssertionError("a second DROP TABLE did not fail");
            } catch (java.sql.SQLException e) {
                check("second DROP TABLE names the table", e.getMessage().contains("ddl_" + host), true);
            }
        }
        System.out.println("ok");
    }
}
