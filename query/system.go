//go:build duckdb_arrow

package query

import (
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// Catalog is the one catalog SQL sees, as Flight SQL names it.
const Catalog = "apron"

// SegmentPersisted is the state system.segments shows for a segment that
// is only in the object store (no longer in memory).
const SegmentPersisted = "persisted"

// SystemSchema is the DuckDB schema of the tables that describe the
// server. The catalog refuses it as a database name.
const SystemSchema = "system"

// A system table is read through apron_scan like any other table; its one
// chunk is built when the scan starts, from the state of the server then.
//
// Each shows the token running the query only what it may see: rows of
// the databases it can read; the segments (which span databases) only to
// a token that can read them all; its own queries; the tokens only to
// admins. Without authentication (who is nil) everything.
type systemTable struct {
	schema *arrow.Schema
	build  func(e *Engine, who *auth.Principal, b *array.RecordBuilder)
}

var tsType = &arrow.TimestampType{Unit: arrow.Nanosecond}

func fields(specs ...any) []arrow.Field {
	out := make([]arrow.Field, 0, len(specs)/2)
	for i := 0; i < len(specs); i += 2 {
		out = append(out, arrow.Field{Name: specs[i].(string), Type: specs[i+1].(arrow.DataType), Nullable: true})
	}
	return out
}

var (
	str = arrow.BinaryTypes.String
	i64 = arrow.PrimitiveTypes.Int64
	u64 = arrow.PrimitiveTypes.Uint64
	f64 = arrow.PrimitiveTypes.Float64
)

var systemTables = map[string]systemTable{
	"databases": {
		schema: arrow.NewSchema(fields("database_name", str, "database_id", u64, "tables", i64,
			"retention", str, "effective_retention", str), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			snap := e.wb.Catalog().Snapshot()
			for _, d := range snap.Databases() {
				if !who.CanRead(d.Name) {
					continue
				}
				b.Field(0).(*array.StringBuilder).Append(d.Name)
				b.Field(1).(*array.Uint64Builder).Append(d.ID)
				b.Field(2).(*array.Int64Builder).Append(int64(len(d.Tables)))
				b.Field(3).(*array.StringBuilder).Append(catalog.FormatRetention(d.Retention))
				b.Field(4).(*array.StringBuilder).Append(catalog.FormatRetention(e.wb.EffectiveRetention(snap, d.Name)))
			}
		},
	},
	"tables": {
		schema: arrow.NewSchema(fields("database_name", str, "table_name", str, "table_id", u64, "columns", i64), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			for _, d := range e.wb.Catalog().Databases() {
				if !who.CanRead(d.Name) {
					continue
				}
				for _, t := range d.TableList() {
					b.Field(0).(*array.StringBuilder).Append(d.Name)
					b.Field(1).(*array.StringBuilder).Append(t.Name)
					b.Field(2).(*array.Uint64Builder).Append(t.ID)
					b.Field(3).(*array.Int64Builder).Append(int64(len(t.Columns)))
				}
			}
		},
	},
	"columns": {
		schema: arrow.NewSchema(fields("database_name", str, "table_name", str, "column_name", str,
			"ordinal_position", i64, "data_type", str, "arrow_type", str), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			for _, d := range e.wb.Catalog().Databases() {
				if !who.CanRead(d.Name) {
					continue
				}
				for _, t := range d.TableList() {
					for i, c := range t.Columns {
						b.Field(0).(*array.StringBuilder).Append(d.Name)
						b.Field(1).(*array.StringBuilder).Append(t.Name)
						b.Field(2).(*array.StringBuilder).Append(c.Name)
						b.Field(3).(*array.Int64Builder).Append(int64(i + 1))
						name, _ := duckTypeName(c.Type)
						b.Field(4).(*array.StringBuilder).Append(name)
						b.Field(5).(*array.StringBuilder).Append(c.Type.String())
					}
				}
			}
		},
	},
	"segments": {
		// persist_error and persist_failing_since are set on the closed
		// segments waiting to persist while persisting fails.
		schema: arrow.NewSchema(fields("segment_id", u64, "state", str, "start_time", tsType, "closed_time", tsType,
			"rows", i64, "bytes", i64, "wal_file", str, "persist_error", str, "persist_failing_since", tsType), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			if !who.CanRead(catalog.AllDatabases) {
				return
			}
			health := e.wb.PersistHealth()
			// One View: each segment once, buffered or persisted.
			v := e.wb.View()
			defer v.Release()
			for _, s := range v.Buffered {
				info := s.Info()
				b.Field(0).(*array.Uint64Builder).Append(info.ID)
				b.Field(1).(*array.StringBuilder).Append(string(info.State))
				b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(info.Start.UnixNano()))
				if info.State == buffer.SegmentOpen {
					b.Field(3).AppendNull()
				} else {
					b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(info.Closed.UnixNano()))
				}
				b.Field(4).(*array.Int64Builder).Append(info.Rows)
				b.Field(5).(*array.Int64Builder).Append(info.Bytes)
				b.Field(6).(*array.StringBuilder).Append(info.WALFile)
				if info.State == buffer.SegmentOpen || health.LastErr == nil {
					b.Field(7).AppendNull()
					b.Field(8).AppendNull()
				} else {
					b.Field(7).(*array.StringBuilder).Append(health.LastErr.Error())
					b.Field(8).(*array.TimestampBuilder).Append(arrow.Timestamp(health.Since.UnixNano()))
				}
			}
			for _, ps := range v.Persisted {
				var size int64
				for _, f := range ps.Files {
					size += f.Size
				}
				b.Field(0).(*array.Uint64Builder).Append(ps.ID)
				b.Field(1).(*array.StringBuilder).Append(SegmentPersisted)
				b.Field(2).AppendNull()
				b.Field(3).AppendNull()
				b.Field(4).(*array.Int64Builder).Append(ps.Rows)
				b.Field(5).(*array.Int64Builder).Append(size)
				b.Field(6).AppendNull()
				b.Field(7).AppendNull()
				b.Field(8).AppendNull()
			}
		},
	},
	"parquet_files": {
		schema: arrow.NewSchema(fields("database_name", str, "table_name", str, "partition", str, "path", str, "uri", str,
			"size", i64, "rows", i64, "min_time", tsType, "max_time", tsType, "segment_id", u64,
			"generation", u64, "compacted", arrow.FixedWidthTypes.Boolean, "min_segment_id", u64), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			for _, ps := range e.wb.Persisted() {
				for _, f := range ps.Files {
					if !who.CanRead(f.Database) {
						continue
					}
					b.Field(0).(*array.StringBuilder).Append(f.Database)
					b.Field(1).(*array.StringBuilder).Append(f.Table)
					b.Field(2).(*array.StringBuilder).Append(f.Partition)
					b.Field(3).(*array.StringBuilder).Append(f.Path)
					b.Field(4).(*array.StringBuilder).Append(f.URI)
					b.Field(5).(*array.Int64Builder).Append(f.Size)
					b.Field(6).(*array.Int64Builder).Append(f.Rows)
					b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(f.MinTime))
					b.Field(8).(*array.TimestampBuilder).Append(arrow.Timestamp(f.MaxTime))
					b.Field(9).(*array.Uint64Builder).Append(ps.ID)
					// generation: 0 for a file a persist wrote, the
					// compaction's for a merged one (persist/compaction.go).
					gen, minSeg := uint64(0), ps.ID
					if ps.Compaction != nil {
						gen, minSeg = ps.Compaction.Generation, ps.Compaction.MinSegment
					}
					b.Field(10).(*array.Uint64Builder).Append(gen)
					b.Field(11).(*array.BooleanBuilder).Append(ps.Compaction != nil)
					b.Field(12).(*array.Uint64Builder).Append(minSeg)
				}
			}
		},
	},
	"queries": {
		schema: arrow.NewSchema(fields("query_id", i64, "database_name", str, "query", str,
			"start_time", tsType, "running_seconds", f64), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			now := time.Now()
			for _, q := range e.runningQueries() {
				if !who.Admin() && q.token != who.ID() {
					continue
				}
				b.Field(0).(*array.Int64Builder).Append(q.id)
				if q.database == "" {
					b.Field(1).AppendNull()
				} else {
					b.Field(1).(*array.StringBuilder).Append(q.database)
				}
				b.Field(2).(*array.StringBuilder).Append(q.sql)
				b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(q.start.UnixNano()))
				b.Field(4).(*array.Float64Builder).Append(now.Sub(q.start).Seconds())
			}
		},
	},
	"tokens": {
		schema: arrow.NewSchema(fields("token_id", str, "description", str, "permissions", str, "created", tsType,
			"expires", tsType, "last_used", tsType, "revoked", tsType, "created_by", str), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			if !who.Admin() {
				return
			}
			appendTime := func(i int, t time.Time) {
				if t.IsZero() {
					b.Field(i).AppendNull()
				} else {
					b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixNano()))
				}
			}
			for _, t := range e.wb.Catalog().Snapshot().Tokens() {
				b.Field(0).(*array.StringBuilder).Append(t.ID)
				b.Field(1).(*array.StringBuilder).Append(t.Description)
				b.Field(2).(*array.StringBuilder).Append(auth.PermissionString(t))
				appendTime(3, t.Created)
				appendTime(4, t.Expires)
				appendTime(5, who.LastUsed(t.ID))
				appendTime(6, t.Revoked)
				if t.CreatedBy == "" {
					b.Field(7).AppendNull()
				} else {
					b.Field(7).(*array.StringBuilder).Append(t.CreatedBy)
				}
			}
		},
	},
}

// systemChunk builds the one chunk of a system table as who sees it,
// retained.
func (e *Engine) systemChunk(name string, who *auth.Principal) []buffer.Chunk {
	st := systemTables[name]
	b := array.NewRecordBuilder(memory.DefaultAllocator, st.schema)
	defer b.Release()
	st.build(e, who, b)
	return []buffer.Chunk{{Rec: b.NewRecordBatch(), MinTime: math.MinInt64, MaxTime: math.MaxInt64}}
}

// runningQuery is a query in system.queries.
type runningQuery struct {
	id       int64
	database string
	sql      string
	start    time.Time
	token    string // id of the token running it
}

var queryIDs atomic.Int64

// track records the query of c as running until the returned func is
// called.
func (e *Engine) track(c *conn) func() {
	q := &runningQuery{id: queryIDs.Add(1), database: c.schema, sql: c.sql, start: time.Now()}
	if qs, ok := e.qstate.Load(c.id); ok {
		q.token = qs.(*queryState).who.ID()
	}
	e.running.Store(q.id, q)
	return func() { e.running.Delete(q.id) }
}

func (e *Engine) runningQueries() []*runningQuery {
	var out []*runningQuery
	e.running.Range(func(_, v any) bool {
		out = append(out, v.(*runningQuery))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
