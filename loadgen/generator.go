package loadgen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Schema is the table the writers fill: one CPU sample of a host a row.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: timeType},
	{Name: "host", Type: arrow.BinaryTypes.String},
	{Name: "region", Type: arrow.BinaryTypes.String},
	{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_system", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_iowait", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_idle", Type: arrow.PrimitiveTypes.Float64},
	{Name: "load1", Type: arrow.PrimitiveTypes.Float64},
	{Name: "requests", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// timeType is what Apron stores time as (README, "Writing data"): sending
// it so spares the server a conversion.
var timeType = &arrow.TimestampType{Unit: arrow.Nanosecond}

// Regions are the values of the region column; host i is in
// Regions[i%len(Regions)].
var Regions = []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}

// HostName is the host column's value for host i: the writers write hosts
// 0 … Hosts-1 and the queriers ask for the same names.
func HostName(i int) string { return "host-" + strconv.Itoa(i) }

// Template sizing: enough templates that small batches still cycle
// through every host, a few more for variety in the values, but never so
// many rows that the templates of big batches crowd the machine under
// test.
const (
	minTemplates    = 4
	maxTemplates    = 64
	maxTemplateRows = 1 << 18
)

// GenConfig says what one writer's generator produces.
type GenConfig struct {
	// Writer is this generator's index among Writers: its timestamps are
	// ≡ Writer (mod Writers), so those of different writers never collide.
	Writer, Writers int
	// BatchRows is the number of rows of every batch.
	BatchRows int
	// Hosts is the number of distinct hosts (series).
	Hosts int
	// Now is the clock the times follow, called once a batch; nil is
	// time.Now. The writers of a run may share one (backfillClock), so it
	// must be safe for concurrent use.
	Now func() time.Time
}

// Validate says what is wrong with c.
func (c GenConfig) Validate() error {
	var errs []error
	if c.Writers < 1 {
		errs = append(errs, fmt.Errorf("writers %d: want at least 1", c.Writers))
	}
	if c.Writer < 0 || c.Writer >= c.Writers {
		errs = append(errs, fmt.Errorf("writer %d: want 0 ≤ writer < writers (%d)", c.Writer, c.Writers))
	}
	if c.BatchRows < 1 {
		errs = append(errs, fmt.Errorf("batch rows %d: want at least 1", c.BatchRows))
	}
	if c.Hosts < 1 {
		errs = append(errs, fmt.Errorf("hosts %d: want at least 1", c.Hosts))
	}
	return errors.Join(errs...)
}

// Generator makes one writer's batches. It is not safe for concurrent use:
// each writer has its own.
type Generator struct {
	cfg       GenConfig
	mem       memory.Allocator
	templates [][]arrow.Array // the columns but time and requests, per template
	now       func() time.Time
	next      int   // template of the next batch
	lastTick  int64 // the k of the last row's time k*Writers+Writer
	requests  int64 // the counter's next value
}

// NewGenerator builds the templates of cfg from mem. Release the generator
// when done.
func NewGenerator(mem memory.Allocator, cfg GenConfig) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, mem: mem, now: cfg.Now, lastTick: -1}
	if g.now == nil {
		g.now = time.Now
	}
	n := templateCount(cfg.BatchRows, cfg.Hosts)
	for j := range n {
		g.templates = append(g.templates, g.template(j))
	}
	return g, nil
}

// templateCount is how many templates batches of rows rows over hosts
// hosts cycle through.
func templateCount(rows, hosts int) int {
	n := max((hosts+rows-1)/rows, minTemplates)
	n = min(n, maxTemplates, max(1, maxTemplateRows/rows))
	return n
}

// template builds the shared columns of template j. Host of row i is
// (Writer + j*BatchRows + i) mod Hosts, so consecutive batches go on
// through the hosts and different writers start at different ones.
func (g *Generator) template(j int) []arrow.Array {
	rows := g.cfg.BatchRows
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Writer), uint64(j)))
	host := array.NewStringBuilder(g.mem)
	region := array.NewStringBuilder(g.mem)
	floats := make([]*array.Float64Builder, 5)
	for i := range floats {
		floats[i] = array.NewFloat64Builder(g.mem)
		floats[i].Reserve(rows)
	}
	host.Reserve(rows)
	region.Reserve(rows)
	for i := range rows {
		h := (g.cfg.Writer + j*rows + i) % g.cfg.Hosts
		host.Append(HostName(h))
		region.Append(Regions[h%len(Regions)])
		user := rng.Float64() * 60
		system := rng.Float64() * 20
		iowait := rng.Float64() * 5
		floats[0].Append(user)
		floats[1].Append(system)
		floats[2].Append(iowait)
		floats[3].Append(100 - user - system - iowait)
		floats[4].Append(rng.Float64() * 8)
	}
	cols := []arrow.Array{host.NewArray(), region.NewArray()}
	host.Release()
	region.Release()
	for _, b := range floats {
		cols = append(cols, b.NewArray())
		b.Release()
	}
	return cols
}

// Rows is the number of rows of every batch.
func (g *Generator) Rows() int { return g.cfg.BatchRows }

// Next returns the next batch; the caller releases it. Its times follow
// the clock but never repeat or go back, even when the clock does.
func (g *Generator) Next() arrow.RecordBatch {
	rows := g.cfg.BatchRows
	w, ws := int64(g.cfg.Writer), int64(g.cfg.Writers)
	tick := max(g.now().UnixNano()/ws, g.lastTick+1)
	g.lastTick = tick + int64(rows) - 1

	timeBuf := memory.NewResizableBuffer(g.mem)
	timeBuf.Resize(rows * arrow.TimestampSizeBytes)
	times := arrow.TimestampTraits.CastFromBytes(timeBuf.Bytes())
	reqBuf := memory.NewResizableBuffer(g.mem)
	reqBuf.Resize(rows * arrow.Int64SizeBytes)
	reqs := arrow.Int64Traits.CastFromBytes(reqBuf.Bytes())
	for i := range times {
		times[i] = arrow.Timestamp((tick+int64(i))*ws + w)
		reqs[i] = g.requests + int64(i)
	}
	g.requests += int64(rows)

	timeData := array.NewData(timeType, rows, []*memory.Buffer{nil, timeBuf}, nil, 0, 0)
	reqData := array.NewData(arrow.PrimitiveTypes.Int64, rows, []*memory.Buffer{nil, reqBuf}, nil, 0, 0)
	timeBuf.Release()
	reqBuf.Release()
	timeArr := array.MakeFromData(timeData)
	reqArr := array.MakeFromData(reqData)
	timeData.Release()
	reqData.Release()

	t := g.templates[g.next]
	g.next = (g.next + 1) % len(g.templates)
	cols := make([]arrow.Array, 0, len(Schema.Fields()))
	cols = append(cols, timeArr)
	cols = append(cols, t...)
	cols = append(cols, reqArr)
	rec := array.NewRecordBatch(Schema, cols, int64(rows))
	timeArr.Release()
	reqArr.Release()
	return rec
}

// Release frees the templates. Batches already returned stay valid.
func (g *Generator) Release() {
	for _, t := range g.templates {
		for _, c := range t {
			c.Release()
		}
	}
	g.templates = nil
}

// backfillClock is the clock of the generators of a run whose rows'
// times are spread evenly over the span before start (WriteConfig.Span).
// All the run's writers share it (done counts the rows of every batch
// begun), so the rows are spread evenly however many batches each writer
// gets to send: a batch's rows take the time of its place among all rows,
// its rows one tick apart (like samples of every host taken at once).
// Generator.Next calls it once a batch. It never runs ahead of the real
// clock, even past rows.
func backfillClock(start time.Time, span time.Duration, rows int64, batchRows int) func() time.Time {
	begin := start.Add(-span)
	step := float64(span) / float64(rows)
	var done atomic.Int64
	return func() time.Time {
		n := done.Add(int64(batchRows)) - int64(batchRows)
		t := begin.Add(time.Duration(float64(n) * step))
		if now := time.Now(); t.After(now) {
			return now
		}
		return t
	}
}
