package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// QueryConfig is the queriers of a run.
type QueryConfig struct {
	// Concurrency is the number of queriers, each with one query at a
	// time.
	Concurrency int
	// Queries is the mix, run in turn by every querier.
	Queries []Query
	// Hosts is the number of hosts {host} is drawn from.
	Hosts int
	// Timeout bounds each query (0: only the run's end does).
	Timeout time.Duration
	// Ticket runs each query as a query ticket, in one DoGet (the JSON
	// ticket InfluxDB 3's clients send), instead of Flight SQL's
	// GetFlightInfo and then DoGet.
	Ticket bool
}

// DefaultQueryConfig is what apron bench query runs without flags: every
// built-in query.
func DefaultQueryConfig() QueryConfig {
	return QueryConfig{Concurrency: 4, Queries: append([]Query(nil), builtinQueries...), Hosts: 1000}
}

// Validate says what is wrong with c.
func (c QueryConfig) Validate() error {
	var errs []error
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: want at least 1", c.Concurrency))
	}
	if len(c.Queries) == 0 {
		errs = append(errs, errors.New("no queries"))
	}
	if c.Hosts < 1 {
		errs = append(errs, fmt.Errorf("hosts (tags) %d: want at least 1", c.Hosts))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s: want 0 (none) or more", c.Timeout))
	}
	for _, q := range c.Queries {
		if q.Kind == KindWrite {
			errs = append(errs, fmt.Errorf("query kind %q is the writers'", q.Kind))
		}
	}
	return errors.Join(errs...)
}

// querier is one querier of a run.
type querier struct {
	id      int
	cfg     QueryConfig
	db      string
	table   string
	cl      *flightsql.Client
	stats   []*kindStats // of cfg.Queries[i]
	rng     *rand.Rand
	backoff backoff
}

// run runs the mix, starting at query id, until stop is closed; ready is
// closed once there is a table to query (the first write acknowledged,
// in a mixed run). ctx is cancelled when stop is closed.
func (q *querier) run(ctx context.Context, stop, ready <-chan struct{}) {
	select {
	case <-ready:
	case <-stop:
		return
	}
	for i := q.id; !closed(stop); i++ {
		n := i % len(q.cfg.Queries)
		sql := q.cfg.Queries[n].render(q.db, q.table, q.cfg.Hosts, q.rng)
		start := time.Now()
		rows, bytes, err := q.execute(ctx, sql)
		lat := time.Since(start)
		if closed(stop) || ctx.Err() != nil {
			return // cut short by the run's end, or done after it: not counted
		}
		if err != nil {
			q.stats[n].fail(err, 1)
			q.backoff.wait(stop)
			continue
		}
		q.backoff.reset()
		q.stats[n].ok(lat, rows, bytes)
	}
}

// execute runs sql (a query ticket, or GetFlightInfo) and reads every
// batch of every endpoint. It returns
// the rows and the Arrow bytes of the result.
func (q *querier) execute(ctx context.Context, sql string) (rows, bytes int64, err error) {
	if q.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.cfg.Timeout)
		defer cancel()
	}
	var tickets []*flight.Ticket
	if q.cfg.Ticket {
		b, err := json.Marshal(map[string]string{"database": q.db, "sql_query": sql})
		if err != nil {
			return 0, 0, err
		}
		tickets = []*flight.Ticket{{Ticket: b}}
	} else {
		info, err := q.cl.Execute(ctx, sql)
		if err != nil {
			return 0, 0, err
		}
		for _, ep := range info.Endpoint {
			tickets = append(tickets, ep.Ticket)
		}
	}
	for _, tkt := range tickets {
		rdr, err := q.cl.DoGet(ctx, tkt)
		if err != nil {
			return rows, bytes, err
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rows += rec.NumRows()
			bytes += util.TotalRecordSize(rec)
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return rows, bytes, err
		}
	}
	return rows, bytes, nil
}
