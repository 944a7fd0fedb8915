package integration

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestKillMidPersistAfterDrop: SIGKILL while a segment persists, after the
// file of one of its tables (a_small) is in the object store and before
// the segment file, with that table dropped just before. The restart
// replays the segment and persists it again without the dropped table:
// the file the killed run uploaded is listed by nothing, and is found
// through the data dir's journal of unlisted objects (startup lists no
// object under dbs/) and deleted. The other table's rows are all there.
// The kill has to land while z_big is still being encoded (seconds); a
// run where the segment file came first is tried again, three times.
func TestKillMidPersistAfterDrop(t *testing.T) {
	for attempt := range 3 {
		if killMidPersistAfterDrop(t) {
			return
		}
		t.Logf("attempt %d: the persist finished before the kill; again", attempt)
	}
	t.Fatal("the kill never landed between the upload of a_small's file and the segment file")
}

func killMidPersistAfterDrop(t *testing.T) (landed bool) {
	ctx := testCtx(t)
	dir := t.TempDir()
	srv := startServer(t, dir, "--buffer-mem-limit", "4GiB")
	c := sqlClient(t, srv.Addr, nil)
	mem := memory.DefaultAllocator
	const big = 3_000_000
	now := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(now), 1))
	sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "u", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "w", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	batch := func(from, n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for i := from; i < from+n; i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(now - int64(big-i)*int64(time.Millisecond)))
			b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(i%100))
			b.Field(2).(*array.Float64Builder).Append(rng.Float64())
			b.Field(3).(*array.Float64Builder).Append(rng.Float64())
			b.Field(4).(*array.Float64Builder).Append(rng.Float64())
		}
		return b.NewRecordBatch()
	}
	small := batch(0, 1000)
	if _, err := sqlIngest(ctx, c, "db", "a_small", small); err != nil {
		t.Fatal(err)
	}
	small.Release()
	for off := 0; off < big; off += 500_000 {
		rec := batch(off, 500_000)
		_, err := sqlIngest(ctx, c, "db", "z_big", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A DROP TABLE rolls the open segment over: its persist begins.
	update := func(sql string) {
		t.Helper()
		if _, err := c.ExecuteUpdate(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	update("CREATE TABLE db.roll (time TIMESTAMP_NS, x DOUBLE)")
	update("DROP TABLE db.roll")
	objects := filepath.Join(dir, "objects")
	smallFiles := func() []string {
		fs, _ := filepath.Glob(filepath.Join(objects, "dbs", "db", "a_small", "*", "*.parquet"))
		return fs
	}
	segFiles := func() int {
		es, _ := os.ReadDir(filepath.Join(objects, "segments"))
		return len(es)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(smallFiles()) == 0 && segFiles() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no file of a_small and no segment file after 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if segFiles() > 0 {
		srv.Kill(t)
		return false
	}
	update("DROP TABLE db.a_small")
	srv.Kill(t)
	if segFiles() > 0 || len(smallFiles()) == 0 {
		return false // the persist committed first: nothing to test
	}
	t.Logf("killed with %v uploaded and no segment file", smallFiles())

	srv = startServer(t, dir, "--buffer-mem-limit", "4GiB")
	defer srv.Stop(t)
	c = sqlClient(t, srv.Addr, nil)
	deadline = time.Now().Add(3 * time.Minute)
	for segFiles() == 0 || len(smallFiles()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %d segment files, files of the dropped table left: %v", segFiles(), smallFiles())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := queryOne(t, srv.Addr, "SELECT count(*) AS n FROM db.z_big")["n"]; n != int64(big) {
		t.Fatalf("z_big has %v rows after the restart, want %d", n, big)
	}
	if _, err := c.Execute(ctx, "SELECT count(*) FROM db.a_small"); err == nil {
		t.Fatal("the dropped table is back")
	}
	return true
}
