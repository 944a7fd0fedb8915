package catalog

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// withCPU creates metrics.cpu with time, host (string), usage (float64).
func withCPU(t testing.TB, c *Catalog) { write(t, c, "metrics", "cpu", cpu()) }

// change is the expected outcome of a successful PlanWrite; nil means no
// change.
type change struct {
	newDB, newTable bool
	cols            string // colSummary of NewColumns
}

type planCase struct {
	name    string
	limits  Limits
	setup   func(testing.TB, *Catalog)
	db      string // default "metrics"
	table   string // default "cpu"
	empty   string // "db" or "table": use "" for that name instead of the default
	schema  *arrow.Schema
	opts    WriteOptions
	wantErr error
	wantMsg []string
	want    *change
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.limits)
			if tc.setup != nil {
				tc.setup(t, c)
			}
			db, table := tc.db, tc.table
			if db == "" && tc.empty != "db" {
				db = "metrics"
			}
			if table == "" && tc.empty != "table" {
				table = "cpu"
			}
			before, version := c.Snapshot(), c.Version()
			ch, err := c.PlanWrite(db, table, tc.schema, tc.opts)

			// PlanWrite is pure, whatever its outcome.
			if c.Snapshot() != before || c.Version() != version {
				t.Fatalf("PlanWrite changed the catalog")
			}
			checkErr(t, err, tc.wantErr, tc.wantMsg...)
			if tc.wantErr != nil {
				if ch != nil {
					t.Fatalf("got change %+v with error", ch)
				}
				return
			}
			switch {
			case tc.want == nil && ch != nil:
				t.Fatalf("got change %+v, want none", ch)
			case tc.want != nil && ch == nil:
				t.Fatalf("got no change, want %+v", tc.want)
			case tc.want == nil:
				return
			}
			if ch.Database != db || ch.Table != table || ch.NewDatabase != tc.want.newDB || ch.NewTable != tc.want.newTable {
				t.Errorf("change = %+v, want db %q table %q %+v", ch, db, table, *tc.want)
			}
			if got := colSummary(ch.NewColumns); got != tc.want.cols {
				t.Errorf("new columns = %s, want %s", got, tc.want.cols)
			}
			// Every planned change must apply cleanly.
			if err := c.Apply(ch); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if c.Version() != version+1 {
				t.Errorf("version after Apply = %d, want %d", c.Version(), version+1)
			}
		})
	}
}

func TestPlanWriteNames(t *testing.T) {
	long := strings.Repeat("a", 256)
	max := strings.Repeat("a", 255)
	ok := func(newDB bool, cols string) *change { return &change{newDB: newDB, newTable: true, cols: cols} }
	runPlanCases(t, []planCase{
		{name: "db_empty", empty: "db", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`catalog: invalid database name "": must not be empty`}},
		{name: "db_nonprintable", db: "a\x00", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`invalid database name "a\x00"`, "non-printable"}},
		{name: "db_reserved_system", db: "System", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`invalid database name "System"`, "reserved"}},
		{name: "db_reserved_information_schema", db: "information_schema", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{"reserved"}},
		{name: "db_space", db: "a b", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`catalog: invalid database name "a b": only letters, digits, '_' and '-' are allowed`}},
		{name: "db_non_ascii", db: "métrics", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{"only letters, digits"}},
		{name: "db_dot", db: "a.b", schema: cpu(), wantErr: ErrInvalidName, wantMsg: []string{"only letters"}},
		{name: "db_too_long", db: long, schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{"256 bytes", "at most 255"}},
		{name: "db_invalid_utf8", db: "a\xffb", schema: cpu(), wantErr: ErrInvalidName, wantMsg: []string{"not valid UTF-8"}},
		{name: "db_max_length_ok", db: max, schema: cpu(), want: ok(true, "time:timestamp[ns],host:utf8,usage:float64")},
		{name: "db_letters_digits_underscore_dash_ok", db: "My_db-2", schema: cpu(), want: ok(true, "time:timestamp[ns],host:utf8,usage:float64")},

		{name: "table_empty", empty: "table", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`catalog: db "metrics": invalid table name "": must not be empty`}},
		{name: "table_empty_existing_db", empty: "table", setup: withCPU, schema: cpu(), wantErr: ErrInvalidName},
		{name: "table_nonprintable", table: "cpu\n", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`invalid table name "cpu\n"`, "U+000A"}},
		{name: "table_invalid_utf8", table: "\xc3", schema: cpu(), wantErr: ErrInvalidName, wantMsg: []string{"not valid UTF-8"}},
		{name: "table_too_long", table: long, schema: cpu(), wantErr: ErrInvalidName, wantMsg: []string{"at most 255"}},
		{name: "table_unicode_and_space_ok", table: "température cpu", schema: cpu(), want: ok(true, "time:timestamp[ns],host:utf8,usage:float64")},
		{name: "table_max_length_ok", table: max, schema: cpu(), want: ok(true, "time:timestamp[ns],host:utf8,usage:float64")},

		{name: "column_empty", schema: sch(fld("time", tsNs), fld("", i64)), wantErr: ErrInvalidName,
			wantMsg: []string{`table "cpu": invalid column name "": must not be empty`}},
		{name: "column_nonprintable", schema: sch(fld("time", tsNs), fld("a\tb", i64)), wantErr: ErrInvalidName,
			wantMsg: []string{"U+0009"}},
		{name: "column_invalid_utf8", schema: sch(fld("time", tsNs), fld("\xff", i64)), wantErr: ErrInvalidName,
			wantMsg: []string{"not valid UTF-8"}},
		{name: "column_too_long", schema: sch(fld("time", tsNs), fld(long, i64)), wantErr: ErrInvalidName,
			wantMsg: []string{"256 bytes"}},
		{name: "column_invalid_on_append", setup: withCPU, schema: sch(fld("time", tsNs), fld("bad\x7f", i64)),
			wantErr: ErrInvalidName, wantMsg: []string{`db "metrics" table "cpu": invalid column name`}},
		{name: "column_unicode_ok", schema: sch(fld("time", tsNs), fld("température °C", f64)),
			want: ok(true, "time:timestamp[ns],température °C:float64")},
	})
}

func TestPlanWriteTypes(t *testing.T) {
	newTable := func(cols string) *change {
		return &change{newDB: true, newTable: true, cols: "time:timestamp[ns]," + cols}
	}
	dict := func(idx, val arrow.DataType) arrow.DataType {
		return &arrow.DictionaryType{IndexType: idx, ValueType: val}
	}
	utcMs := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	unsupported := func(name string, dt arrow.DataType, typeText string) planCase {
		return planCase{name: "unsupported_" + name, schema: sch(fld("time", tsNs), fld("tags", dt)), wantErr: ErrUnsupportedType,
			wantMsg: []string{`catalog: db "metrics" table "cpu" column "tags": unsupported type ` + typeText,
				"; supported: integers, floats, bool, utf8, large_utf8, dictionary<utf8>, binary, timestamp, date"}}
	}
	runPlanCases(t, []planCase{
		{name: "integers_floats_bool", schema: sch(fld("time", tsNs),
			fld("a", arrow.PrimitiveTypes.Int8), fld("b", arrow.PrimitiveTypes.Int16), fld("c", arrow.PrimitiveTypes.Int32), fld("d", i64),
			fld("e", arrow.PrimitiveTypes.Uint8), fld("f", arrow.PrimitiveTypes.Uint16), fld("g", arrow.PrimitiveTypes.Uint32), fld("h", arrow.PrimitiveTypes.Uint64),
			fld("i", arrow.PrimitiveTypes.Float32), fld("j", f64), fld("k", arrow.FixedWidthTypes.Boolean)),
			want: newTable("a:int8,b:int16,c:int32,d:int64,e:uint8,f:uint16,g:uint32,h:uint64,i:float32,j:float64,k:bool")},
		{name: "strings_normalize_to_utf8", schema: sch(fld("time", tsNs),
			fld("a", str), fld("b", arrow.BinaryTypes.LargeString),
			fld("c", dict(arrow.PrimitiveTypes.Int32, str)), fld("d", dict(arrow.PrimitiveTypes.Uint8, arrow.BinaryTypes.LargeString))),
			want: newTable("a:utf8,b:utf8,c:utf8,d:utf8")},
		{name: "binaries_normalize_to_binary", schema: sch(fld("time", tsNs), fld("a", arrow.BinaryTypes.Binary), fld("b", arrow.BinaryTypes.LargeBinary)),
			want: newTable("a:binary,b:binary")},
		{name: "timestamps_keep_unit_and_zone", schema: sch(fld("time", tsNs), fld("a", utcMs), fld("b", arrow.FixedWidthTypes.Timestamp_s)),
			want: newTable("a:timestamp[ms, tz=UTC],b:timestamp[s, tz=UTC]")},
		{name: "dates", schema: sch(fld("time", tsNs), fld("a", arrow.FixedWidthTypes.Date32), fld("b", arrow.FixedWidthTypes.Date64)),
			want: newTable("a:date32,b:date64")},
		{name: "time_not_first_in_batch_becomes_column_0", schema: sch(fld("host", str), fld("time", tsNs), fld("v", i64)),
			want: newTable("host:utf8,v:int64")},

		unsupported("list", arrow.ListOf(str), "list<item: utf8"),
		unsupported("float16", arrow.FixedWidthTypes.Float16, "float16"),
		unsupported("decimal", &arrow.Decimal128Type{Precision: 10, Scale: 2}, "decimal(10, 2)"),
		unsupported("struct", arrow.StructOf(fld("x", i64)), "struct<"),
		unsupported("map", arrow.MapOf(str, i64), "map<"),
		unsupported("interval", arrow.FixedWidthTypes.MonthInterval, "month_interval"),
		unsupported("duration", arrow.FixedWidthTypes.Duration_ms, "duration"),
		unsupported("time32", arrow.FixedWidthTypes.Time32ms, "time32"),
		unsupported("time64", arrow.FixedWidthTypes.Time64ns, "time64"),
		unsupported("fixed_size_binary", &arrow.FixedSizeBinaryType{ByteWidth: 4}, "fixed_size_binary"),
		unsupported("null", arrow.Null, "null"),
		unsupported("dictionary_of_int", dict(arrow.PrimitiveTypes.Int32, i64), "dictionary<"),
		unsupported("dictionary_of_binary", dict(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.Binary), "dictionary<"),
		{name: "unsupported_on_existing_column", setup: withCPU, schema: sch(fld("time", tsNs), fld("host", arrow.ListOf(str))),
			wantErr: ErrUnsupportedType, wantMsg: []string{`column "host": unsupported type list`}},
	})
}

func TestPlanWriteTimeColumn(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "missing_new_table", schema: sch(fld("v", i64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`db "metrics" table "cpu": batch has no "time" column`}},
		{name: "missing_append", setup: withCPU, schema: sch(fld("usage", f64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`no "time" column`}},
		{name: "wrong_unit", schema: sch(fld("time", arrow.FixedWidthTypes.Timestamp_ms)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "time" must be timestamp[ns] without time zone, got timestamp[ms, tz=UTC]`}},
		{name: "with_zone", schema: sch(fld("time", arrow.FixedWidthTypes.Timestamp_ns)), wantErr: ErrInvalidSchema,
			wantMsg: []string{"got timestamp[ns, tz=UTC]"}},
		{name: "not_a_timestamp", schema: sch(fld("time", i64)), wantErr: ErrInvalidSchema, wantMsg: []string{"got int64"}},
		{name: "wrong_type_append", setup: withCPU, schema: sch(fld("time", i64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{"got int64"}},
		{name: "only_time", schema: sch(fld("time", tsNs)), want: &change{newDB: true, newTable: true, cols: "time:timestamp[ns]"}},
	})
}

func TestPlanWriteDuplicateColumns(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "new_table", schema: sch(fld("time", tsNs), fld("v", i64), fld("v", i64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`duplicate column "v"`}},
		{name: "new_table_time", schema: sch(fld("time", tsNs), fld("time", tsNs)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`duplicate column "time"`}},
		{name: "append_existing_column", setup: withCPU, schema: sch(fld("time", tsNs), fld("host", str), fld("host", str)),
			wantErr: ErrInvalidSchema, wantMsg: []string{`duplicate column "host"`}},
		{name: "append_new_column", setup: withCPU, schema: sch(fld("time", tsNs), fld("x", i64), fld("x", i64)),
			wantErr: ErrInvalidSchema, wantMsg: []string{`duplicate column "x"`}},
		{name: "append_time", setup: withCPU, schema: sch(fld("time", tsNs), fld("time", tsNs)),
			wantErr: ErrInvalidSchema, wantMsg: []string{`duplicate column "time"`}},
	})
}

// TestPlanWriteCaseCollisions refuses names SQL could not tell apart:
// equal but for case to another column, table or database. A replayed
// write (accepted before the rule) is still taken.
func TestPlanWriteCaseCollisions(t *testing.T) {
	withOther := func(t testing.TB, c *Catalog) { write(t, c, "metrics", "mem", cpu()) }
	runPlanCases(t, []planCase{
		{name: "new_table", schema: sch(fld("time", tsNs), fld("a", i64), fld("A", i64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "A" differs from the column "a" sent in the same batch only in case`}},
		{name: "new_table_TIME", schema: sch(fld("time", tsNs), fld("TIME", tsNs)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "TIME" differs from the column "time"`}},
		{name: "append_stored", setup: withCPU, schema: sch(fld("time", tsNs), fld("HOST", str)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "HOST" differs from the column "host" of the table only in case`}},
		{name: "append_Time", setup: withCPU, schema: sch(fld("time", tsNs), fld("Time", tsNs)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "Time" differs from the column "time" of the table`}},
		{name: "append_two_new", setup: withCPU, schema: sch(fld("time", tsNs), fld("x", i64), fld("X", i64)), wantErr: ErrInvalidSchema,
			wantMsg: []string{`column "X" differs from the column "x" sent in the same batch`}},
		{name: "table", setup: withOther, table: "MEM", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`table "MEM" differs from the existing table "mem" only in case`}},
		{name: "database", setup: withOther, db: "Metrics", schema: cpu(), wantErr: ErrInvalidName,
			wantMsg: []string{`database "Metrics" differs from the existing database "metrics" only in case`}},
		{name: "replay_column", setup: withCPU, schema: sch(fld("time", tsNs), fld("HOST", str)), opts: WriteOptions{Replay: true},
			want: &change{cols: "HOST:utf8"}},
		{name: "replay_table", setup: withOther, table: "MEM", schema: cpu(), opts: WriteOptions{Replay: true},
			want: &change{newTable: true, cols: "time:timestamp[ns],host:utf8,usage:float64"}},
	})
}

func TestPlanWriteModes(t *testing.T) {
	all := "time:timestamp[ns],host:utf8,usage:float64"
	create := WriteOptions{IfNotExists: CreateTable, IfExists: FailIfExists}
	appendOnly := WriteOptions{IfNotExists: FailIfNotExists, IfExists: AppendIfExists}
	createAppend := WriteOptions{IfNotExists: CreateTable, IfExists: AppendIfExists}
	withOtherTable := func(t testing.TB, c *Catalog) { write(t, c, "metrics", "mem", cpu()) }
	runPlanCases(t, []planCase{
		{name: "create/new_database", opts: create, schema: cpu(), want: &change{newDB: true, newTable: true, cols: all}},
		{name: "create/new_table", opts: create, setup: withOtherTable, schema: cpu(), want: &change{newTable: true, cols: all}},
		{name: "create/exists", opts: create, setup: withCPU, schema: cpu(), wantErr: ErrTableExists,
			wantMsg: []string{`catalog: table "cpu" already exists in database "metrics"`}},

		{name: "append/exists_same_schema", opts: appendOnly, setup: withCPU, schema: cpu()},
		{name: "append/database_missing", opts: appendOnly, schema: cpu(), wantErr: ErrTableNotFound,
			wantMsg: []string{`table "cpu" not found`, `database "metrics" does not exist`}},
		{name: "append/table_missing", opts: appendOnly, setup: withOtherTable, schema: cpu(), wantErr: ErrTableNotFound,
			wantMsg: []string{`catalog: table "cpu" not found in database "metrics"`}},
		{name: "append/new_columns", opts: appendOnly, setup: withCPU,
			schema: sch(fld("region", str), fld("time", tsNs), fld("usage", f64), fld("cores", i64)),
			want:   &change{cols: "region:utf8,cores:int64"}},

		{name: "create_append/new_database", opts: createAppend, schema: cpu(), want: &change{newDB: true, newTable: true, cols: all}},
		{name: "create_append/new_table", opts: createAppend, setup: withOtherTable, schema: cpu(), want: &change{newTable: true, cols: all}},
		{name: "create_append/exists_no_change", opts: createAppend, setup: withCPU, schema: cpu()},
		{name: "create_append/new_column", opts: createAppend, setup: withCPU,
			schema: sch(fld("time", tsNs), fld("host", str), fld("temp", f64)), want: &change{cols: "temp:float64"}},
		{name: "create_append/omitted_columns", opts: createAppend, setup: withCPU, schema: sch(fld("time", tsNs))},
		{name: "create_append/reordered_columns", opts: createAppend, setup: withCPU,
			schema: sch(fld("usage", f64), fld("host", str), fld("time", tsNs))},

		{name: "fail_both/exists", opts: WriteOptions{IfNotExists: FailIfNotExists, IfExists: FailIfExists}, setup: withCPU,
			schema: cpu(), wantErr: ErrTableExists},
		{name: "fail_both/missing", opts: WriteOptions{IfNotExists: FailIfNotExists, IfExists: FailIfExists},
			schema: cpu(), wantErr: ErrTableNotFound},
		{name: "nil_schema", schema: nil, wantErr: ErrInvalidSchema, wantMsg: []string{"no schema"}},
	})
}

func TestPlanWriteTypeMismatch(t *testing.T) {
	withTS := func(t testing.TB, c *Catalog) {
		write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld("at", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"})))
	}
	runPlanCases(t, []planCase{
		{name: "float_vs_int", setup: withCPU, schema: sch(fld("time", tsNs), fld("usage", i64)), wantErr: ErrTypeMismatch,
			wantMsg: []string{`catalog: db "metrics" table "cpu" column "usage": stored type float64, sent type int64`}},
		{name: "string_vs_binary", setup: withCPU, schema: sch(fld("time", tsNs), fld("host", arrow.BinaryTypes.Binary)),
			wantErr: ErrTypeMismatch, wantMsg: []string{`column "host": stored type utf8, sent type binary`}},
		{name: "int_widths_differ", setup: withCPU, schema: sch(fld("time", tsNs), fld("usage", arrow.PrimitiveTypes.Float32)),
			wantErr: ErrTypeMismatch, wantMsg: []string{"stored type float64, sent type float32"}},
		{name: "timestamp_zone_differs", setup: withTS,
			schema:  sch(fld("time", tsNs), fld("at", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"})),
			wantErr: ErrTypeMismatch, wantMsg: []string{"stored type timestamp[ms, tz=UTC], sent type timestamp[ms, tz=Europe/Paris]"}},
		{name: "timestamp_unit_differs", setup: withTS,
			schema:  sch(fld("time", tsNs), fld("at", &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"})),
			wantErr: ErrTypeMismatch, wantMsg: []string{"sent type timestamp[s, tz=UTC]"}},
		{name: "timestamp_same_ok", setup: withTS,
			schema: sch(fld("time", tsNs), fld("at", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}))},
		{name: "large_utf8_into_utf8_ok", setup: withCPU, schema: sch(fld("time", tsNs), fld("host", arrow.BinaryTypes.LargeString))},
		{name: "dictionary_into_utf8_ok", setup: withCPU,
			schema: sch(fld("time", tsNs), fld("host", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: str}))},
		{name: "replay_still_checks_types", setup: withCPU, opts: WriteOptions{Replay: true},
			schema: sch(fld("time", tsNs), fld("usage", i64)), wantErr: ErrTypeMismatch},
	})
}

func TestPlanWriteLimits(t *testing.T) {
	wide := func(n int) *arrow.Schema {
		fields := []arrow.Field{fld("time", tsNs)}
		for i := 1; i < n; i++ {
			fields = append(fields, fld("c"+string(rune('a'+i)), i64))
		}
		return sch(fields...)
	}
	oneDB := func(t testing.TB, c *Catalog) { write(t, c, "other", "cpu", cpu()) }
	twoTables := func(t testing.TB, c *Catalog) {
		write(t, c, "a", "t", cpu())
		write(t, c, "b", "t", cpu())
	}
	threeCols := func(t testing.TB, c *Catalog) { withCPU(t, c) }
	replay := WriteOptions{Replay: true, IfNotExists: FailIfNotExists, IfExists: FailIfExists}
	runPlanCases(t, []planCase{
		{name: "databases", limits: Limits{MaxDatabases: 1}, setup: oneDB, schema: cpu(), wantErr: ErrLimitExceeded,
			wantMsg: []string{`catalog: limit of 1 databases reached (--max-databases); database "metrics" not created`}},
		{name: "databases_existing_db_ok", limits: Limits{MaxDatabases: 1}, setup: oneDB, db: "other", table: "mem", schema: cpu(),
			want: &change{newTable: true, cols: "time:timestamp[ns],host:utf8,usage:float64"}},
		{name: "tables_across_databases", limits: Limits{MaxTables: 2}, setup: twoTables, db: "a", table: "u", schema: cpu(),
			wantErr: ErrLimitExceeded, wantMsg: []string{"limit of 2 tables reached (--max-tables)", `table "u" not created in database "a"`}},
		{name: "columns_new_table", limits: Limits{MaxColumnsPerTable: 3}, schema: wide(4), wantErr: ErrLimitExceeded,
			wantMsg: []string{"limit of 3 columns per table exceeded (--max-columns-per-table)", "would have 4 columns"}},
		{name: "columns_new_table_at_limit_ok", limits: Limits{MaxColumnsPerTable: 3}, schema: wide(3),
			want: &change{newDB: true, newTable: true, cols: "time:timestamp[ns],cb:int64,cc:int64"}},
		{name: "columns_append", limits: Limits{MaxColumnsPerTable: 3}, setup: threeCols,
			schema: sch(fld("time", tsNs), fld("extra", i64)), wantErr: ErrLimitExceeded,
			wantMsg: []string{"(--max-columns-per-table)", `table "cpu" in database "metrics" would have 4 columns`}},

		{name: "replay_bypasses_databases", limits: Limits{MaxDatabases: 1}, setup: oneDB, schema: cpu(),
			opts: replay, want: &change{newDB: true, newTable: true, cols: "time:timestamp[ns],host:utf8,usage:float64"}},
		{name: "replay_bypasses_tables", limits: Limits{MaxTables: 2}, setup: twoTables, db: "a", table: "u", schema: cpu(),
			opts: replay, want: &change{newTable: true, cols: "time:timestamp[ns],host:utf8,usage:float64"}},
		{name: "replay_bypasses_columns", limits: Limits{MaxColumnsPerTable: 3}, setup: threeCols,
			schema: sch(fld("time", tsNs), fld("extra", i64)), opts: replay, want: &change{cols: "extra:int64"}},
		{name: "replay_bypasses_fail_if_exists", setup: withCPU, schema: cpu(), opts: replay},
	})
}

// TestPlanWriteChangesNothing checks purity directly, including for the
// cases that return a change, and that planning twice gives the same plan.
func TestPlanWriteChangesNothing(t *testing.T) {
	c := New(Limits{MaxDatabases: 1})
	withCPU(t, c)
	snap, v := c.Snapshot(), c.Version()
	tbl, _ := c.Table("metrics", "cpu")
	for _, s := range []*arrow.Schema{cpu(), sch(fld("time", tsNs), fld("new", i64)), sch(fld("usage", i64)), nil} {
		for _, db := range []string{"metrics", "other", "bad name"} {
			for i := 0; i < 2; i++ {
				_, _ = c.PlanWrite(db, "cpu", s, WriteOptions{})
				_, _ = c.PlanWrite(db, "new", s, WriteOptions{IfExists: FailIfExists})
			}
		}
	}
	if c.Snapshot() != snap || c.Version() != v {
		t.Fatal("PlanWrite changed the catalog")
	}
	if got, _ := c.Table("metrics", "cpu"); got != tbl || len(got.Columns) != 3 {
		t.Fatalf("table changed: %v", colSummary(got.Columns))
	}
	if dbs := c.Databases(); len(dbs) != 1 {
		t.Fatalf("databases = %d, want 1", len(dbs))
	}
}

// TestPlanWriteNoChangeDoesNotAllocate guards the hot path: the same
// schema pointer, and an equal schema in a new pointer.
func TestPlanWriteNoChangeDoesNotAllocate(t *testing.T) {
	c := New(Limits{})
	withCPU(t, c)
	a, b := cpu(), sch(fld("host", arrow.BinaryTypes.LargeString), fld("time", tsNs))
	for name, schemas := range map[string][]*arrow.Schema{"same_pointer": {a, a}, "alternating": {a, b}} {
		i := 0
		allocs := testing.AllocsPerRun(100, func() {
			i++
			ch, err := c.PlanWrite("metrics", "cpu", schemas[i%2], WriteOptions{})
			if ch != nil || err != nil {
				t.Fatalf("PlanWrite = %v, %v", ch, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per PlanWrite, want 0", name, allocs)
		}
	}
}
