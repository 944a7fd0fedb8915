package integration

import (
	"encoding/json"
	"hash/crc32"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

// Persistence tests: closed segments go to the object store as Parquet
// (persist/doc.go), leave memory, and are read back by SQL and plain Flight.

// persistBatchRows is the size of every batch the persistence tests write.
const persistBatchRows = 500

// persistTime is the time of row id: batch k = id/persistBatchRows lies at
// baseTime + k*6h, and rows within a batch are 1ns apart. Times are thus
// distinct only at nanosecond precision, grow with the id, and the batches
// from the fifth on fall on the next UTC day (another partition).
func persistTime(id int64) int64 {
	return baseTime + (id/persistBatchRows)*int64(6*time.Hour) + id%persistBatchRows
}

// persistRecord builds rows from..from+n-1 of idSchema with persistTime.
func persistRecord(mem memory.Allocator, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, idSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(persistTime(i)))
		b.Field(1).(*array.Int64Builder).Append(i)
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(3).(*array.StringBuilder).Append("tag" + strconv.FormatInt(i%7, 10))
	}
	return b.NewRecordBatch()
}

// writeBatches ingests batches [fromBatch, fromBatch+n) of persistRecord
// with ADBC (create_append), sleeping interval after each, and returns the
// rows acknowledged.
func writeBatches(t testing.TB, addr, db, table string, fromBatch, n int, interval time.Duration) int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, addr, mem)
	ctx := testCtx(t)
	var total int64
	for k := fromBatch; k < fromBatch+n; k++ {
		rec := persistRecord(mem, int64(k)*persistBatchRows, persistBatchRows)
		got, err := adbcIngest(ctx, cn, db, table, "adbc.ingest.mode.create_append", rec)
		rec.Release()
		if err != nil {
			t.Fatalf("ingest of batch %d: %v", k, err)
		}
		if got != persistBatchRows {
			t.Fatalf("ingest of batch %d: %d rows written, want %d", k, got, persistBatchRows)
		}
		total += got
		if interval > 0 && k < fromBatch+n-1 {
			time.Sleep(interval)
		}
	}
	return total
}

// queryOne runs sql through Flight SQL and returns its only row.
func queryOne(t testing.TB, addr, sql string) map[string]any {
	t.Helper()
	c := sqlClient(t, addr, nil)
	rows, err := sqlExecute(testCtx(t), t, c, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows, want 1: %v", sql, len(rows), rows)
	}
	return rows[0]
}

// persistedStats is what system.parquet_files says about one table.
type persistedStats struct {
	Files, Rows int64
}

func parquetFileStats(t testing.TB, addr, db, table string) persistedStats {
	t.Helper()
	r := queryOne(t, addr, `SELECT count(*) AS files, CAST(coalesce(sum("rows"), 0) AS BIGINT) AS n
		FROM system.parquet_files WHERE database_name = '`+db+`' AND table_name = '`+table+`'`)
	return persistedStats{Files: r["files"].(int64), Rows: r["n"].(int64)}
}

// waitPersisted polls system.parquet_files until want rows of db.table are
// persisted, and returns the stats then.
func waitPersisted(t testing.TB, srv *server, db, table string, want int64) persistedStats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := parquetFileStats(t, srv.Addr, db, table)
		if st.Rows == want {
			return st
		}
		if st.Rows > want {
			t.Fatalf("%d rows of %s.%s persisted, more than the %d written", st.Rows, db, table, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d rows of %s.%s persisted after 30s (%d files); stderr:\n%s", st.Rows, want, db, table, st.Files, srv.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sqlTotals checks with SQL that db.table holds exactly the rows with ids
// 0..n-1 of persistRecord: count, distinct ids, their sum and range, and
// distinct times (nanosecond-distinct, so this catches a cast to µs).
func sqlTotals(t testing.TB, addr, db, table string, n int64) {
	t.Helper()
	r := queryOne(t, addr, `SELECT count(*) AS n, count(DISTINCT id) AS ids, CAST(sum(id) AS BIGINT) AS s,
		min(id) AS lo, max(id) AS hi, count(DISTINCT time) AS times FROM `+db+`.`+table)
	want := map[string]any{"n": n, "ids": n, "s": n * (n - 1) / 2, "lo": int64(0), "hi": n - 1, "times": n}
	if n == 0 {
		want["s"], want["lo"], want["hi"] = nil, nil, nil
	}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s.%s: %s = %v (%T), want %v; row %v", db, table, k, r[k], r[k], v, r)
		}
	}
	// Spot-check that every value survived: the sum of value (id/2) and
	// the times themselves.
	var wantTime int64
	for i := int64(0); i < n; i++ {
		wantTime += persistTime(i) - baseTime
	}
	r = queryOne(t, addr, `SELECT CAST(sum(epoch_ns(time) - `+strconv.FormatInt(baseTime, 10)+`) AS BIGINT) AS dt,
		sum(value) AS v, count(DISTINCT tag) AS tags FROM `+db+`.`+table)
	if n > 0 {
		if r["dt"] != wantTime {
			t.Errorf("%s.%s: sum of times - base = %v, want %d", db, table, r["dt"], wantTime)
		}
		if v, _ := r["v"].(float64); v != float64(n*(n-1)/2)/2 {
			t.Errorf("%s.%s: sum(value) = %v, want %v", db, table, r["v"], float64(n*(n-1)/2)/2)
		}
	}
}

// parquetRef is one Parquet endpoint of a FlightInfo with its reference.
type parquetRef struct {
	EP  *flight.FlightEndpoint
	Ref *apronpb.ParquetReference
}

// splitEndpoints sorts a FlightInfo's endpoints into buffered ones (no
// app_metadata) and Parquet ones (a ParquetReference), the latter ordered
// by min_time.
func splitEndpoints(t testing.TB, info *flight.FlightInfo) (buffered []*flight.FlightEndpoint, pq []parquetRef) {
	t.Helper()
	for i, ep := range info.Endpoint {
		if len(ep.AppMetadata) == 0 {
			buffered = append(buffered, ep)
			continue
		}
		var ref apronpb.ParquetReference
		if err := proto.Unmarshal(ep.AppMetadata, &ref); err != nil {
			t.Fatalf("endpoint %d: app_metadata %x is no ParquetReference: %v", i, ep.AppMetadata, err)
		}
		pq = append(pq, parquetRef{EP: ep, Ref: &ref})
	}
	sort.Slice(pq, func(i, j int) bool { return pq[i].Ref.MinTime < pq[j].Ref.MinTime })
	return buffered, pq
}

// tableRangeDescriptor is the CMD descriptor of a TableRange; nil bounds
// are unbounded.
func tableRangeDescriptor(t testing.TB, db, table string, lo, hi *int64) *flight.FlightDescriptor {
	t.Helper()
	b, err := proto.Marshal(&apronpb.TableRange{Database: db, Table: table, MinTime: lo, MaxTime: hi})
	if err != nil {
		t.Fatal(err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: append([]byte("apron:"), b...)}
}

// checkRefs checks the ParquetReferences of one table: sane fields, rows
// and times within what was written, URIs with the prefix, and returns
// the sum of their rows.
func checkRefs(t testing.TB, pq []parquetRef, db, table, uriPrefix string, written int64) int64 {
	t.Helper()
	var rows int64
	for i, p := range pq {
		r := p.Ref
		rows += r.Rows
		wantPath := "dbs/" + db + "/" + table + "/" + r.Partition + "/" + segmentName(r.SegmentId) + ".parquet"
		if !strings.HasPrefix(r.Uri, uriPrefix) || !strings.HasSuffix(r.Uri, wantPath) {
			t.Errorf("file %d: uri %q, want %s…%s", i, r.Uri, uriPrefix, wantPath)
		}
		if r.Rows <= 0 || r.Size <= 0 || r.SegmentId == 0 {
			t.Errorf("file %d: rows %d, size %d, segment %d; want all positive", i, r.Rows, r.Size, r.SegmentId)
		}
		if r.MinTime > r.MaxTime || r.MinTime < persistTime(0) || r.MaxTime > persistTime(written-1) {
			t.Errorf("file %d: times [%d, %d] outside the written [%d, %d]", i, r.MinTime, r.MaxTime, persistTime(0), persistTime(written-1))
		}
		if day := time.Unix(0, r.MinTime).UTC().Format("2006-01-02"); r.Partition != day || time.Unix(0, r.MaxTime).UTC().Format("2006-01-02") != day {
			t.Errorf("file %d: partition %q but times [%s, %s]", i, r.Partition, time.Unix(0, r.MinTime).UTC(), time.Unix(0, r.MaxTime).UTC())
		}
	}
	return rows
}

func segmentName(id uint64) string { return fmtID(id) }

func fmtID(id uint64) string {
	s := strconv.FormatUint(id, 10)
	return strings.Repeat("0", 20-len(s)) + s
}

// segmentFile is the part of a segments/<id>.json this test reads.
type segmentFile struct {
	FormatVersion  int    `json:"format_version"`
	SegmentID      uint64 `json:"segment_id"`
	CatalogVersion uint64 `json:"catalog_version"`
	FirstSequence  uint64 `json:"first_sequence"`
	LastSequence   uint64 `json:"last_sequence"`
	Rows           int64  `json:"rows"`
	Files          []struct {
		Path      string `json:"path"`
		Size      int64  `json:"size"`
		CRC32C    uint32 `json:"crc32c"`
		Rows      int64  `json:"rows"`
		MinTime   int64  `json:"min_time"`
		MaxTime   int64  `json:"max_time"`
		Database  string `json:"database"`
		Table     string `json:"table"`
		Partition string `json:"partition"`
	} `json:"files"`
}

func parseSegmentFile(t testing.TB, name string, b []byte) segmentFile {
	t.Helper()
	var sf segmentFile
	if err := json.Unmarshal(b, &sf); err != nil {
		t.Fatalf("segment file %s: %v\n%s", name, err, b)
	}
	if sf.FormatVersion != 1 || "segments/"+fmtID(sf.SegmentID)+".json" != name {
		t.Errorf("segment file %s: format_version %d, segment_id %d", name, sf.FormatVersion, sf.SegmentID)
	}
	var rows int64
	for _, f := range sf.Files {
		rows += f.Rows
		if f.Path != "dbs/"+f.Database+"/"+f.Table+"/"+f.Partition+"/"+fmtID(sf.SegmentID)+".parquet" {
			t.Errorf("segment file %s lists %q for %s.%s day %s", name, f.Path, f.Database, f.Table, f.Partition)
		}
	}
	if rows != sf.Rows || sf.LastSequence < sf.FirstSequence {
		t.Errorf("segment file %s: rows %d but its files hold %d; sequences [%d, %d]", name, sf.Rows, rows, sf.FirstSequence, sf.LastSequence)
	}
	return sf
}

// checkParquetFile checks the documented properties of a persisted file:
// time is TIMESTAMP(NANOS) not adjusted to UTC, zstd, statistics on every
// column, sorting columns declared (tag, then time), and rows sorted so.
func checkParquetFile(t testing.TB, path string, wantRows int64) {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer pf.Close()
	md := pf.MetaData()
	if md.NumRows != wantRows {
		t.Errorf("%s: %d rows, its segment file says %d", path, md.NumRows, wantRows)
	}
	sc := md.Schema
	cols := map[string]int{}
	for i := 0; i < sc.NumColumns(); i++ {
		cols[sc.Column(i).Name()] = i
	}
	for _, name := range []string{"time", "id", "value", "tag"} {
		if _, ok := cols[name]; !ok {
			t.Fatalf("%s: no column %q in %s", path, name, sc)
		}
	}
	ts, ok := sc.Column(cols["time"]).LogicalType().(schema.TimestampLogicalType)
	if !ok {
		t.Errorf("%s: time is %s, want TIMESTAMP", path, sc.Column(cols["time"]).LogicalType())
	} else if ts.IsAdjustedToUTC() || ts.TimeUnit() != schema.TimeUnitNanos {
		t.Errorf("%s: time is %s, want TIMESTAMP(isAdjustedToUTC=false, NANOS)", path, ts)
	}
	if _, ok := sc.Column(cols["tag"]).LogicalType().(schema.StringLogicalType); !ok {
		t.Errorf("%s: tag is %s, want STRING", path, sc.Column(cols["tag"]).LogicalType())
	}
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		for i := 0; i < rg.NumColumns(); i++ {
			cc, err := rg.ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Compression() != compress.Codecs.Zstd {
				t.Errorf("%s: row group %d column %d compressed with %v, want zstd", path, g, i, cc.Compression())
			}
			if set, err := cc.StatsSet(); !set || err != nil {
				t.Errorf("%s: row group %d column %d has no statistics (%v)", path, g, i, err)
			}
		}
		var sorting []string
		for _, s := range rg.SortingColumns() {
			sorting = append(sorting, sc.Column(int(s.GetColumnIdx())).Name())
			if s.GetDescending() || s.GetNullsFirst() {
				t.Errorf("%s: sorting column %d descending %v nulls first %v", path, s.GetColumnIdx(), s.GetDescending(), s.GetNullsFirst())
			}
		}
		if strings.Join(sorting, ",") != "tag,time" {
			t.Errorf("%s: row group %d sorting columns %v, want [tag time]", path, g, sorting)
		}
	}
}

// TestPersistLocalRestart: with the default local store, closed segments
// are persisted under <data-dir>/objects as documented, their WAL files
// are deleted, and after SIGKILL a restart gives back every acknowledged
// row exactly once: persisted ones from Parquet, the rest from the WAL.
func TestPersistLocalRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	const db, table = "pdb", "metrics"

	// 6 batches over ~2.5s: several segments, two days.
	written := writeBatches(t, srv.Addr, db, table, 0, 6, 500*time.Millisecond)
	st := waitPersisted(t, srv, db, table, written)
	if st.Files < 2 {
		t.Errorf("%d Parquet files for rows written over 2.5s on two days, want several", st.Files)
	}
	sqlTotals(t, srv.Addr, db, table, written)

	// The object layout.
	objects := filepath.Join(dir, "objects")
	segs, err := filepath.Glob(filepath.Join(objects, "segments", "*.json"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment files in %s (%v)", objects, err)
	}
	persisted := map[uint64]bool{}
	var segRows int64
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sf := parseSegmentFile(t, "segments/"+filepath.Base(p), b)
		persisted[sf.SegmentID] = true
		segRows += sf.Rows
		if _, err := os.Stat(filepath.Join(objects, "catalogs", fmtID(sf.CatalogVersion)+".json")); err != nil {
			t.Errorf("segment %d names catalog version %d: %v", sf.SegmentID, sf.CatalogVersion, err)
		}
		for _, f := range sf.Files {
			p := filepath.Join(objects, filepath.FromSlash(f.Path))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("segment %d lists %s: %v", sf.SegmentID, f.Path, err)
				continue
			}
			if int64(len(b)) != f.Size || crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) != f.CRC32C {
				t.Errorf("%s: %d bytes crc32c %d, segment file says %d bytes crc32c %d", f.Path, len(b),
					crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), f.Size, f.CRC32C)
			}
			checkParquetFile(t, p, f.Rows)
		}
	}
	if segRows != written {
		t.Errorf("segment files hold %d rows, %d written and reported persisted", segRows, written)
	}
	days, _ := filepath.Glob(filepath.Join(objects, "dbs", db, table, "*"))
	if len(days) != 2 {
		t.Errorf("partitions %v, want 2 days", days)
	}
	// WAL files of persisted segments are gone.
	wals, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wals {
		id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(w), ".wal"), 10, 64)
		if err != nil {
			t.Errorf("unexpected WAL file name %s", w)
			continue
		}
		if persisted[id] {
			t.Errorf("WAL file %s of persisted segment %d is still there", w, id)
		}
	}
	if leftovers, _ := os.ReadDir(filepath.Join(dir, "persist")); len(leftovers) > 0 {
		t.Errorf("%d leftovers in <data-dir>/persist after persisting", len(leftovers))
	}

	// More rows that stay in the WAL (no time to roll over), then a crash.
	written += writeBatches(t, srv.Addr, db, table, 6, 2, 0)
	srv.Kill(t)

	srv = startServer(t, dir, "--segment-duration", "1s")
	sqlTotals(t, srv.Addr, db, table, written)
	wantIDRange(t, readTable(t, srv.Addr, db, table), 0, written)
	// The replayed rows get persisted too, once, by the new server.
	waitPersisted(t, srv, db, table, written)
	sqlTotals(t, srv.Addr, db, table, written)
}

// TestParquetEndpoints: plain Flight GetFlightInfo lists a Parquet endpoint
// per persisted file with a correct ParquetReference; DoGet streams each in
// the table's current schema; a TableRange command prunes endpoints by
// time.
func TestParquetEndpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	const db, table = "edb", "ticks"
	written := writeBatches(t, srv.Addr, db, table, 0, 6, 500*time.Millisecond)
	waitPersisted(t, srv, db, table, written)

	// A new column after persistence, in a row persisted on its own: the
	// older files lack the column, and DoGet must still answer them in the
	// current schema (extra null).
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	extSchema := arrow.NewSchema(append(idSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)
	lateID, lateTime := int64(1_000_000), persistTime(written-1)+int64(time.Hour)
	rec := jsonRecord(t, mem, extSchema, `[{"time":`+strconv.FormatInt(lateTime, 10)+`,"id":`+strconv.FormatInt(lateID, 10)+`,"extra":7}]`)
	cn := adbcConn(t, srv.Addr, mem)
	if _, err := adbcIngest(testCtx(t), cn, db, table, "adbc.ingest.mode.append", rec); err != nil {
		t.Fatalf("ingest with a new column: %v", err)
	}
	rec.Release()
	waitPersisted(t, srv, db, table, written+1)

	c := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{db, table}})
	if err != nil {
		t.Fatal(err)
	}
	buffered, pq := splitEndpoints(t, info)
	if len(buffered) != 0 {
		t.Errorf("%d buffered endpoints, want none: every row is persisted", len(buffered))
	}
	if len(pq) < 3 {
		t.Fatalf("%d Parquet endpoints, want several (6 batches over 2.5s, 1s segments, and the late row)", len(pq))
	}
	uriPrefix := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "objects", "dbs") + "/"}).String()
	if got := checkRefs(t, pq[:len(pq)-1], db, table, uriPrefix, written); got != written {
		t.Errorf("ParquetReferences of the batches hold %d rows, %d persisted", got, written)
	}
	if last := pq[len(pq)-1].Ref; last.Rows != 1 || last.MinTime != lateTime || last.MaxTime != lateTime {
		t.Errorf("newest file %+v, want the late row alone", last)
	}
	for i, p := range pq {
		u, err := url.Parse(p.Ref.Uri)
		if err != nil {
			t.Fatalf("file %d: uri %q: %v", i, p.Ref.Uri, err)
		}
		b, err := os.ReadFile(u.Path)
		if err != nil {
			t.Errorf("file %d: %v", i, err)
			continue
		}
		if int64(len(b)) != p.Ref.Size || crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) != p.Ref.Crc32C {
			t.Errorf("file %d (%s): %d bytes, reference says %d bytes crc32c %d", i, u.Path, len(b), p.Ref.Size, p.Ref.Crc32C)
		}
	}

	// The whole table through every endpoint, in the current schema.
	all := readTable(t, srv.Addr, db, table)
	if schemaString(all.Schema) != schemaString(extSchema) {
		t.Errorf("table schema %s, want %s", schemaString(all.Schema), schemaString(extSchema))
	}
	ids := all.ids(t, "id")
	if int64(len(ids)) != written+1 || len(ids) < 2 || ids[len(ids)-1] != lateID || ids[len(ids)-2] != written-1 {
		t.Errorf("read %d rows, want %d + the late one", len(ids), written)
	}
	// Each Parquet endpoint alone: its rows, within its times, extra null.
	sc, err := flight.DeserializeSchema(info.GetSchema(), mem)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i, p := range pq {
		d := &tableData{Schema: sc}
		if err := readEndpoint(ctx, c, p.EP, mem, d); err != nil {
			t.Fatalf("DoGet of Parquet endpoint %d: %v", i, err)
		}
		if int64(d.NumRows()) != p.Ref.Rows {
			t.Errorf("Parquet endpoint %d: %d rows, reference says %d", i, d.NumRows(), p.Ref.Rows)
		}
		for _, r := range d.Rows {
			id, tm := r["id"].(int64), r["time"].(int64)
			if seen[id] {
				t.Errorf("id %d in two endpoints", id)
			}
			seen[id] = true
			if id == lateID {
				if r["extra"] != int64(7) || tm != lateTime {
					t.Errorf("late row %v", r)
				}
				continue
			}
			if tm != persistTime(id) || tm < p.Ref.MinTime || tm > p.Ref.MaxTime {
				t.Errorf("Parquet endpoint %d: id %d time %d, want %d within [%d, %d]", i, id, tm, persistTime(id), p.Ref.MinTime, p.Ref.MaxTime)
			}
			if r["extra"] != nil || r["tag"] != "tag"+strconv.FormatInt(id%7, 10) || r["value"] != float64(id)/2 {
				t.Errorf("Parquet endpoint %d: row %v", i, r)
			}
		}
	}
	if int64(len(seen)) != written+1 {
		t.Errorf("Parquet endpoints gave %d distinct rows, %d persisted", len(seen), written+1)
	}

	// A range from the first time of the newest batch file on: older files
	// are left out, and (writes being in time order) what remains is only
	// rows in range, the late row's file included.
	lo := pq[len(pq)-2].Ref.MinTime
	rinfo, err := c.GetFlightInfo(ctx, tableRangeDescriptor(t, db, table, &lo, nil))
	if err != nil {
		t.Fatalf("GetFlightInfo TableRange: %v", err)
	}
	_, rpq := splitEndpoints(t, rinfo)
	if len(rpq) != 2 {
		t.Errorf("TableRange from %d: %d Parquet endpoints of %d, want the newest 2", lo, len(rpq), len(pq))
	}
	for i, p := range rpq {
		if p.Ref.MaxTime < lo {
			t.Errorf("TableRange endpoint %d: [%d, %d] does not overlap [%d, ∞)", i, p.Ref.MinTime, p.Ref.MaxTime, lo)
		}
	}
	rd := &tableData{Schema: sc}
	for i, ep := range rinfo.Endpoint {
		if err := readEndpoint(ctx, c, ep, mem, rd); err != nil {
			t.Fatalf("DoGet of TableRange endpoint %d: %v", i, err)
		}
	}
	var inRange int
	for id := int64(0); id < written; id++ {
		if persistTime(id) >= lo {
			inRange++
		}
	}
	got := rd.ids(t, "id")
	if len(got) != inRange+1 {
		t.Errorf("TableRange read %d rows, want the %d persisted in range + the late one", len(got), inRange)
	}
	for _, r := range rd.Rows {
		if tm := r["time"].(int64); tm < lo {
			t.Errorf("TableRange read id %v at %d, before %d", r["id"], tm, lo)
		}
	}

	// A range before everything: no endpoint.
	before := persistTime(0) - 1
	einfo, err := c.GetFlightInfo(ctx, tableRangeDescriptor(t, db, table, nil, &before))
	if err != nil {
		t.Fatalf("GetFlightInfo TableRange before all rows: %v", err)
	}
	if len(einfo.Endpoint) != 0 {
		t.Errorf("TableRange before all rows: %d endpoints, want none", len(einfo.Endpoint))
	}
	// Unbounded: the same endpoints as PATH.
	uinfo, err := c.GetFlightInfo(ctx, tableRangeDescriptor(t, db, table, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(uinfo.Endpoint) != len(info.Endpoint) {
		t.Errorf("unbounded TableRange: %d endpoints, PATH gave %d", len(uinfo.Endpoint), len(info.Endpoint))
	}
	// An empty range is refused.
	hi, lo2 := int64(5), int64(6)
	_, err = c.GetFlightInfo(ctx, tableRangeDescriptor(t, db, table, &lo2, &hi))
	wantCode(t, err, codes.InvalidArgument, "empty")
	// So is an unknown table, and a malformed command.
	_, err = c.GetFlightInfo(ctx, tableRangeDescriptor(t, db, "nope", nil, nil))
	wantCode(t, err, codes.NotFound)
	_, err = c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("apron:\xff\xff\xff")})
	wantCode(t, err, codes.InvalidArgument)
}
