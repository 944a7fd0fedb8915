package flightsvc

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// rpcMetrics are the metrics of every gRPC call and of queries. A nil
// *rpcMetrics (no Registerer) counts nothing.
type rpcMetrics struct {
	reg      prometheus.Registerer
	requests *prometheus.CounterVec   // method, code
	duration *prometheus.HistogramVec // method
	active   *prometheus.GaugeVec     // method

	queries       *prometheus.CounterVec   // kind, result
	queryDuration *prometheus.HistogramVec // kind
	rowsSent      *prometheus.CounterVec   // kind
	bytesSent     *prometheus.CounterVec   // kind

	prepared prometheus.Collector // apron_prepared_statements, over this server's store
}

func newRPCMetrics(reg prometheus.Registerer, prepared *preparedStore) (*rpcMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &rpcMetrics{reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_grpc_requests_total",
			Help: "gRPC calls finished, by method (DoAction:<type> for the known action types) and status code (ok, invalid_argument, …).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apron_grpc_request_duration_seconds",
			Help:    "Duration of gRPC calls, streams to their end, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. 16s
		}, []string{"method"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apron_active_streams",
			Help: "Streaming gRPC calls open now, by method.",
		}, []string{"method"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_queries_total",
			Help: "Queries (SQL statements, prepared statement executions, plain Flight reads), each counted once: at the call that runs it, or at the GetFlightInfo or CreatePreparedStatement that failed to plan it; by kind (statement, prepared, update, plain) and result (ok or the status code).",
		}, []string{"kind", "result"}),
		queryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apron_query_duration_seconds",
			Help:    "Duration of the calls that run queries (DoGet to its last batch, DoPut of an update), by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18), // 1ms .. 131s
		}, []string{"kind"}),
		rowsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_query_rows_sent_total",
			Help: "Result rows sent by queries, by kind.",
		}, []string{"kind"}),
		bytesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_query_bytes_sent_total",
			Help: "Arrow IPC bytes (message headers and bodies) of the result batches sent by queries, by kind.",
		}, []string{"kind"}),
	}
	m.prepared = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "apron_prepared_statements",
		Help: "Prepared statement handles held open (until closed, or idle for an hour).",
	}, func() float64 { return float64(prepared.open()) })
	err := errors.Join(register(reg, &m.requests), register(reg, &m.duration), register(reg, &m.active),
		register(reg, &m.queries), register(reg, &m.queryDuration), register(reg, &m.rowsSent), register(reg, &m.bytesSent))
	if err != nil {
		return nil, err
	}
	// The gauge reads this server's store: one of an earlier server on the
	// same registry (tests) is replaced.
	if err := reg.Register(m.prepared); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		reg.Unregister(are.ExistingCollector)
		if err := reg.Register(m.prepared); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers *c; if an equal collector is registered already (an
// earlier server on the same registry), *c becomes that one.
func register[T prometheus.Collector](reg prometheus.Registerer, c *T) error {
	err := reg.Register(*c)
	if err == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
			return nil
		}
	}
	return err
}

// unregister drops the prepared statement gauge, which reads a store that
// is closing.
func (m *rpcMetrics) unregister() {
	if m != nil {
		m.reg.Unregister(m.prepared)
	}
}

func (m *rpcMetrics) streamStarted(method string) {
	if m != nil {
		m.active.WithLabelValues(method).Inc()
	}
}

func (m *rpcMetrics) streamEnded(method string) {
	if m != nil {
		m.active.WithLabelValues(method).Dec()
	}
}

// observe counts a finished call.
func (m *rpcMetrics) observe(c *call, f callFields, code codes.Code, d time.Duration) {
	if m == nil {
		return
	}
	method := metricMethod(c.method, f.action)
	m.requests.WithLabelValues(method, codeLabel(code)).Inc()
	m.duration.WithLabelValues(method).Observe(d.Seconds())
	kind := f.kind
	if kind == kindMetadata || kind == kindIngest || kind == "" {
		return
	}
	switch {
	case f.role == roleRun:
		m.queries.WithLabelValues(kind, codeLabel(code)).Inc()
		m.queryDuration.WithLabelValues(kind).Observe(d.Seconds())
		if n := c.rowsSent.Load(); n > 0 {
			m.rowsSent.WithLabelValues(kind).Add(float64(n))
		}
		if n := c.bytesSent.Load(); n > 0 {
			m.bytesSent.WithLabelValues(kind).Add(float64(n))
		}
	case f.role == rolePlan && code != codes.OK:
		m.queries.WithLabelValues(kind, codeLabel(code)).Inc()
	}
}

// knownActions are the action types that get a method label of their
// own; a client may send any type, and labels must stay few.
var knownActions = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range flightSQLActions {
		m[t] = true
	}
	for _, t := range apronActions {
		m[t.Type] = true
	}
	return m
}()

// metricMethod is the method label: DoAction:<type> for the known types,
// DoAction:other for the rest.
func metricMethod(method, action string) string {
	if method != "DoAction" || action == "" {
		return method
	}
	if knownActions[action] {
		return "DoAction:" + action
	}
	return "DoAction:other"
}

// codeNames are the canonical names of the gRPC codes (what the README
// and the clients call them: INVALID_ARGUMENT), codeLabels their lower
// case, the metric label values.
var (
	codeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	codeLabels = func() []string {
		l := slices.Clone(codeNames[:])
		for i := range l {
			l[i] = strings.ToLower(l[i])
		}
		return l
	}()
)

func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return c.String()
}

func codeLabel(c codes.Code) string {
	if int(c) < len(codeLabels) {
		return codeLabels[c]
	}
	return "unknown"
}
