package flightsvc

import (
	"context"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"

	"github.com/apron-db/apron/query"
)

// sqlInfo is what GetSqlInfo answers: every field the Flight SQL JDBC
// driver reads when it connects or is asked for DatabaseMetaData, and
// what ADBC's GetInfo maps. Ordinals and bitmasks are int32, lengths and
// counts int64, as FlightSql.proto says.
func (s *SQLServer) sqlInfo() map[flightsql.SqlInfo]any {
	fn := s.duckdbFunctions()
	info := map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        "Apron",
		flightsql.SqlInfoFlightSqlServerVersion:                     Version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                arrow.PkgVersion,
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         true,
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(flightsql.SqlTransactionNone),
		flightsql.SqlInfoFlightSqlServerCancel:                      true,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
		flightsql.SqlInfoFlightSqlServerStatementTimeout:            int32(0),
		flightsql.SqlInfoFlightSqlServerTransactionTimeout:          int32(0),

		flightsql.SqlInfoDDLCatalog:              false,
		flightsql.SqlInfoDDLSchema:               false,
		flightsql.SqlInfoDDLTable:                false,
		flightsql.SqlInfoIdentifierCase:          int32(flightsql.SqlCaseSensitivityCaseInsensitive),
		flightsql.SqlInfoIdentifierQuoteChar:     `"`,
		flightsql.SqlInfoQuotedIdentifierCase:    int32(flightsql.SqlCaseSensitivityCaseInsensitive),
		flightsql.SqlInfoAllTablesAreASelectable: true,
		// DuckDB sorts NULLs last in ascending and descending order.
		flightsql.SqlInfoNullOrdering:       int32(flightsql.SqlNullOrderingSortAtEnd),
		flightsql.SqlInfoKeywords:           fn.keywords,
		flightsql.SqlInfoNumericFunctions:   fn.numeric,
		flightsql.SqlInfoStringFunctions:    fn.str,
		flightsql.SqlInfoSystemFunctions:    fn.system,
		flightsql.SqlInfoDateTimeFunctions:  fn.datetime,
		flightsql.SqlInfoSearchStringEscape: `\`,
		flightsql.SqlInfoExtraNameChars:     "",

		flightsql.SqlInfoSupportsColumnAliasing:                 true,
		flightsql.SqlInfoNullPlusNullIsNull:                     true,
		flightsql.SqlInfoSupportsConvert:                        supportsConvert(),
		flightsql.SqlInfoSupportsTableCorrelationNames:          true,
		flightsql.SqlInfoSupportsDifferentTableCorrelationNames: false,
		flightsql.SqlInfoSupportsExpressionsInOrderBy:           true,
		flightsql.SqlInfoSupportsOrderByUnrelated:               true,
		// GROUP BY unrelated (bit 0) and beyond select (bit 1).
		flightsql.SqlInfoSupportedGroupBy:                     int32(0b11),
		flightsql.SqlInfoSupportsLikeEscapeClause:             true,
		flightsql.SqlInfoSupportsNonNullableColumns:           true,
		flightsql.SqlInfoSupportedGrammar:                     int32(0b11), // minimum and core
		flightsql.SqlInfoANSI92SupportedLevel:                 int32(0b11), // entry and intermediate
		flightsql.SqlInfoSupportsIntegrityEnhancementFacility: false,
		flightsql.SqlInfoOuterJoinsSupportLevel:               int32(flightpb.SqlOuterJoinsSupportLevel_SQL_FULL_OUTER_JOINS),
		flightsql.SqlInfoSchemaTerm:                           "schema",
		flightsql.SqlInfoProcedureTerm:                        "procedure",
		flightsql.SqlInfoCatalogTerm:                          "catalog",
		flightsql.SqlInfoCatalogAtStart:                       true,
		flightsql.SqlInfoSchemasSupportedActions:              int32(0b111), // manipulation, procedure calls, index definitions: names may be schema-qualified
		flightsql.SqlInfoCatalogsSupportedActions:             int32(0),
		flightsql.SqlInfoSupportedPositionedCommands:          int32(0),
		flightsql.SqlInfoSelectForUpdateSupported:             false,
		flightsql.SqlInfoStoredProceduresSupported:            false,
		// comparisons, EXISTS, IN, quantified comparisons.
		flightsql.SqlInfoSupportedSubqueries:           int32(0b1111),
		flightsql.SqlInfoCorrelatedSubqueriesSupported: true,
		// UNION and UNION ALL.
		flightsql.SqlInfoSupportedUnions: int32(0b11),

		flightsql.SqlInfoMaxBinaryLiteralLen:     int64(0),
		flightsql.SqlInfoMaxCharLiteralLen:       int64(0),
		flightsql.SqlInfoMaxColumnNameLen:        int64(255),
		flightsql.SqlInfoMaxColumnsInGroupBy:     int64(0),
		flightsql.SqlInfoMaxColumnsInIndex:       int64(0),
		flightsql.SqlInfoMaxColumnsInOrderBy:     int64(0),
		flightsql.SqlInfoMaxColumnsInSelect:      int64(0),
		flightsql.SqlInfoMaxColumnsInTable:       int64(0),
		flightsql.SqlInfoMaxConnections:          int64(0),
		flightsql.SqlInfoMaxCursorNameLen:        int64(0),
		flightsql.SqlInfoMaxIndexLen:             int64(0),
		flightsql.SqlInfoDBSchemaNameLen:         int64(255),
		flightsql.SqlInfoMaxProcedureNameLen:     int64(0),
		flightsql.SqlInfoMaxCatalogNameLen:       int64(255),
		flightsql.SqlInfoMaxRowSize:              int64(0),
		flightsql.SqlInfoMaxRowSizeIncludesBlobs: false,
		flightsql.SqlInfoMaxStatementLen:         int64(0),
		flightsql.SqlInfoMaxStatements:           int64(0),
		flightsql.SqlInfoMaxTableNameLen:         int64(255),
		flightsql.SqlInfoMaxTablesInSelect:       int64(0),
		flightsql.SqlInfoMaxUsernameLen:          int64(0),

		// int64: the Flight SQL JDBC driver reads it as a Long; an int32 throws
		// ClassCastException in getDefaultTransactionIsolation (DBeaver calls it
		// at connect).
		flightsql.SqlInfoDefaultTransactionIsolation:           int64(0), // none
		flightsql.SqlInfoTransactionsSupported:                 false,
		flightsql.SqlInfoSupportedTransactionsIsolationlevels:  int32(0),
		flightsql.SqlInfoDataDefinitionCausesTransactionCommit: false,
		flightsql.SqlInfoDataDefinitionsInTransactionsIgnored:  false,
		// forward only (bit 1).
		flightsql.SqlInfoSupportedResultSetTypes:                             int32(0b10),
		flightsql.SqlInfoSupportedConcurrenciesForResultSetUnspecified:       int32(0),
		flightsql.SqlInfoSupportedConcurrenciesForResultSetForwardOnly:       int32(0b10), // read only
		flightsql.SqlInfoSupportedConcurrenciesForResultSetScrollSensitive:   int32(0),
		flightsql.SqlInfoSupportedConcurrenciesForResultSetScrollInsensitive: int32(0),
		flightsql.SqlInfoBatchUpdatesSupported:                               false,
		flightsql.SqlInfoSavePointsSupported:                                 false,
		flightsql.SqlInfoNamedParametersSupported:                            false,
		flightsql.SqlInfoLocatorsUpdateCopy:                                  false,
		flightsql.SqlInfoStoredFunctionsUsingCallSyntaxSupported:             false,
	}
	return info
}

// supportsConvert says which SQL types CAST converts between: all of
// Apron's types to each other.
func supportsConvert() map[int32][]int32 {
	types := []int32{
		int32(flightsql.SqlConvertBigInt), int32(flightsql.SqlConvertBinary), int32(flightsql.SqlConvertBit),
		int32(flightsql.SqlConvertChar), int32(flightsql.SqlConvertDate), int32(flightsql.SqlConvertDecimal),
		int32(flightsql.SqlConvertFloat), int32(flightsql.SqlConvertInteger), int32(flightsql.SqlConvertNumeric),
		int32(flightsql.SqlConvertReal), int32(flightsql.SqlConvertSmallInt), int32(flightsql.SqlConvertTimestamp),
		int32(flightsql.SqlConvertTinyInt), int32(flightsql.SqlConvertVarchar), int32(flightsql.SqlConvertLongVarchar),
	}
	out := make(map[int32][]int32, len(types))
	for _, t := range types {
		out[t] = types
	}
	return out
}

// functionLists are DuckDB's keywords and scalar functions, roughly
// classified as JDBC's DatabaseMetaData wants them.
type functionLists struct {
	keywords, numeric, str, system, datetime []string
}

// staticFunctions is the fallback when DuckDB cannot be asked.
var staticFunctions = functionLists{
	keywords: []string{"ASOF", "ATTACH", "DESCRIBE", "EXCLUDE", "ILIKE", "PIVOT", "QUALIFY", "REPLACE", "SAMPLE", "SUMMARIZE", "UNPIVOT"},
	numeric:  []string{"abs", "ceil", "floor", "round", "sqrt", "pow", "ln", "log10", "exp", "sin", "cos", "tan", "pi", "random", "sign"},
	str:      []string{"concat", "length", "lower", "upper", "trim", "ltrim", "rtrim", "substring", "replace", "strpos", "regexp_matches"},
	system:   []string{"current_database", "current_schema", "version"},
	datetime: []string{"date_trunc", "date_part", "time_bucket", "epoch_ns", "make_timestamp", "now", "strftime", "strptime"},
}

// duckdbFunctions asks DuckDB for its keywords and functions.
func (s *SQLServer) duckdbFunctions() functionLists {
	if s.eng == nil {
		return staticFunctions
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	words, err := s.eng.Vocabulary(ctx)
	if err != nil {
		s.log.Warn("listing DuckDB functions for GetSqlInfo failed; answering a short static list", "err", err)
		return staticFunctions
	}
	var out functionLists
	for _, w := range words {
		switch w.Kind {
		case query.WordKeyword:
			out.keywords = append(out.keywords, w.Name)
		case query.WordNumeric:
			out.numeric = append(out.numeric, w.Name)
		case query.WordString:
			out.str = append(out.str, w.Name)
		case query.WordSystem:
			out.system = append(out.system, w.Name)
		case query.WordDatetime:
			out.datetime = append(out.datetime, w.Name)
		}
	}
	if len(out.keywords) == 0 {
		s.log.Warn("listing DuckDB functions for GetSqlInfo found no keywords; answering a short static list")
		return staticFunctions
	}
	for _, l := range []*[]string{&out.keywords, &out.numeric, &out.str, &out.system, &out.datetime} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return out
}

// xdbcType is one row of GetXdbcTypeInfo: a type Apron stores.
type xdbcType struct {
	name     string
	dataType int32 // java.sql.Types
	size     int32 // precision, or -1 for none
	quoted   bool  // literals are written between quotes
	unsigned bool
	sub      int32 // datetime subcode, 0 for none
}

// xdbcTypes are the types Apron stores, ordered by data type then name,
// as GetXdbcTypeInfo requires. Names are DuckDB's.
var xdbcTypes = []xdbcType{
	{name: "BLOB", dataType: -3, size: -1, quoted: true},
	{name: "BIGINT", dataType: -5, size: 19},
	{name: "UBIGINT", dataType: -5, size: 20, unsigned: true},
	{name: "TINYINT", dataType: -6, size: 3},
	{name: "UTINYINT", dataType: -6, size: 3, unsigned: true},
	{name: "INTEGER", dataType: 4, size: 10},
	{name: "UINTEGER", dataType: 4, size: 10, unsigned: true},
	{name: "SMALLINT", dataType: 5, size: 5},
	{name: "USMALLINT", dataType: 5, size: 5, unsigned: true},
	{name: "FLOAT", dataType: 7, size: 24},
	{name: "DOUBLE", dataType: 8, size: 53},
	{name: "VARCHAR", dataType: 12, size: -1, quoted: true},
	{name: "BOOLEAN", dataType: 16, size: 1},
	{name: "DATE", dataType: 91, size: 10, quoted: true, sub: 1},
	{name: "TIMESTAMP", dataType: 93, size: 26, quoted: true, sub: 3},
	{name: "TIMESTAMP_MS", dataType: 93, size: 23, quoted: true, sub: 3},
	{name: "TIMESTAMP_NS", dataType: 93, size: 29, quoted: true, sub: 3},
	{name: "TIMESTAMP_S", dataType: 93, size: 19, quoted: true, sub: 3},
}

func init() {
	slices.SortStableFunc(xdbcTypes, func(a, b xdbcType) int {
		if a.dataType != b.dataType {
			return int(a.dataType - b.dataType)
		}
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
}

func (s *SQLServer) GetFlightInfoXdbcTypeInfo(_ context.Context, _ flightsql.GetXdbcTypeInfo, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.XdbcTypeInfo), nil
}

func (s *SQLServer) DoGetXdbcTypeInfo(_ context.Context, cmd flightsql.GetXdbcTypeInfo) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, schema_ref.XdbcTypeInfo)
	defer b.Release()
	str := func(i int, v string, ok bool) {
		if ok {
			b.Field(i).(*array.StringBuilder).Append(v)
		} else {
			b.Field(i).AppendNull()
		}
	}
	i32 := func(i int, v int32, ok bool) {
		if ok {
			b.Field(i).(*array.Int32Builder).Append(v)
		} else {
			b.Field(i).AppendNull()
		}
	}
	boolean := func(i int, v bool) { b.Field(i).(*array.BooleanBuilder).Append(v) }
	const (
		typeSearchable = 3 // searchable with any comparison
		nullable       = 1
		sqlDatetime    = 9 // ODBC SQL_DATETIME
	)
	for _, t := range xdbcTypes {
		if dt := cmd.GetDataType(); dt != nil && *dt != t.dataType {
			continue
		}
		str(0, t.name, true)
		i32(1, t.dataType, true)
		i32(2, t.size, t.size >= 0)
		str(3, "'", t.quoted)
		str(4, "'", t.quoted)
		b.Field(5).(*array.ListBuilder).Append(true) // no create params
		i32(6, nullable, true)
		boolean(7, t.quoted && t.sub == 0) // strings and blobs compare case-sensitively
		i32(8, typeSearchable, true)
		boolean(9, t.unsigned)
		boolean(10, false)
		boolean(11, false)
		str(12, t.name, true)
		i32(13, 0, t.dataType == 7 || t.dataType == 8)
		i32(14, 0, t.dataType == 7 || t.dataType == 8)
		if t.sub != 0 {
			i32(15, sqlDatetime, true)
			i32(16, t.sub, true)
		} else {
			i32(15, t.dataType, true)
			i32(16, 0, false)
		}
		i32(17, 10, t.size >= 0 && !t.quoted && t.dataType != 16)
		i32(18, 0, false)
	}
	return schema_ref.XdbcTypeInfo, oneBatch(b.NewRecordBatch()), nil
}

// Apron has no primary or foreign keys: the key commands answer no rows,
// in the schemas Flight SQL defines.

func (s *SQLServer) emptyResult(sc *arrow.Schema) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, sc)
	defer b.Release()
	return sc, oneBatch(b.NewRecordBatch()), nil
}

func (s *SQLServer) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.PrimaryKeys), nil
}

func (s *SQLServer) DoGetPrimaryKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyResult(schema_ref.PrimaryKeys)
}

func (s *SQLServer) GetFlightInfoExportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.ExportedKeys), nil
}

func (s *SQLServer) DoGetExportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyResult(schema_ref.ExportedKeys)
}

func (s *SQLServer) GetFlightInfoImportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.ImportedKeys), nil
}

func (s *SQLServer) DoGetImportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyResult(schema_ref.ImportedKeys)
}

func (s *SQLServer) GetFlightInfoCrossReference(_ context.Context, _ flightsql.CrossTableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.CrossReference), nil
}

func (s *SQLServer) DoGetCrossReference(context.Context, flightsql.CrossTableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyResult(schema_ref.CrossReference)
}
