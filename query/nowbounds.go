//go:build duckdb_arrow

package query

import (
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Bounds relative to now, evaluated in Go.
//
// A bound that calls a function (now() - INTERVAL 10 MINUTE) cannot be
// kept from one query to the next, and DuckDB's evaluation of it
// (evalTimes) ran a statement of its own for every query: 0.4-0.6 ms, a
// quarter of a selective query's time on the server. The forms alerts
// and dashboards write — Apron's now() (a UTC TIMESTAMP, views.go) plus
// or minus intervals of fixed length — are evaluated here instead, from
// the Go clock. Such a bound is widened by clockSlack (60 s) like every
// bound with a function, so the few microseconds between this clock
// reading and the query's transaction start, and any rounding here, do
// not matter: pruning stays a superset of the rows the query matches.
// Anything else (months, other functions, casts of strings) goes to
// DuckDB as before.

// nowBound evaluates e, a bound expression parsed by json_serialize_sql,
// at now: its value in ns since the epoch and its DuckDB type, as
// evalTimes' statement would give them. false: not a form known here.
func nowBound(e any, now time.Time) (ns int64, typ string, ok bool) {
	m, _ := e.(map[string]any)
	if m == nil || m["class"] != "FUNCTION" || !plainCall(m) {
		return 0, "", false
	}
	name, _ := m["function_name"].(string)
	children, _ := m["children"].([]any)
	switch {
	case name == "now" && m["is_operator"] == false && len(children) == 0:
		// CAST(get_current_timestamp() AS TIMESTAMP): microseconds.
		return now.UnixMicro() * 1e3, "TIMESTAMP", true
	case (name == "-" || name == "+") && m["is_operator"] == true && len(children) == 2:
		ts, typ, ok := nowBound(children[0], now)
		if !ok {
			return 0, "", false
		}
		d, ok := fixedInterval(children[1])
		if !ok {
			return 0, "", false
		}
		if name == "-" {
			d = -d
		}
		return ts + d, typ, true
	}
	return 0, "", false
}

// plainCall says whether a FUNCTION node is a call of the function by
// its bare name, with nothing but its arguments (no schema, FILTER,
// DISTINCT, ORDER BY).
func plainCall(m map[string]any) bool {
	if m["schema"] != "" || m["catalog"] != "" || m["filter"] != nil || m["distinct"] != false || m["export_state"] != false {
		return false
	}
	ob, _ := m["order_bys"].(map[string]any)
	return ob == nil || empty(ob["orders"])
}

// intervalUnits are the interval constructors INTERVAL n unit parses to,
// and their lengths: units of fixed length only (a day is 24 hours on a
// plain TIMESTAMP).
var intervalUnits = map[string]float64{
	"to_microseconds": 1e3, "to_milliseconds": 1e6, "to_seconds": 1e9, "to_minutes": 60e9,
	"to_hours": 3600e9, "to_days": 86400e9, "to_weeks": 7 * 86400e9,
}

// fixedInterval is the length in ns of an interval expression of the
// form to_<unit>(number).
func fixedInterval(e any) (int64, bool) {
	m, _ := e.(map[string]any)
	if m == nil || m["class"] != "FUNCTION" || m["is_operator"] != false || !plainCall(m) {
		return 0, false
	}
	name, _ := m["function_name"].(string)
	unit, ok := intervalUnits[name]
	children, _ := m["children"].([]any)
	if !ok || len(children) != 1 {
		return 0, false
	}
	n, ok := number(children[0])
	if !ok {
		return 0, false
	}
	d := n * unit
	if math.IsNaN(d) || math.Abs(d) > 1e18 {
		return 0, false
	}
	return int64(d), true
}

// number evaluates a numeric constant as INTERVAL n unit parses it: the
// constant, casts between numeric types, trunc. A cast to an integer type
// of a value with a fraction is not known here (DuckDB rounds it).
func number(e any) (float64, bool) {
	m, _ := e.(map[string]any)
	if m == nil {
		return 0, false
	}
	switch m["class"] {
	case "CONSTANT":
		v, _ := m["value"].(map[string]any)
		t, _ := v["type"].(map[string]any)
		switch t["id"] {
		case "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT":
		default:
			return 0, false
		}
		if v["is_null"] != false {
			return 0, false
		}
		switch x := v["value"].(type) {
		case json.Number:
			f, err := x.Float64()
			return f, err == nil
		case float64:
			return x, true
		}
		return 0, false
	case "CAST":
		if m["try_cast"] != false {
			return 0, false
		}
		n, ok := number(m["child"])
		if !ok {
			return 0, false
		}
		t, _ := m["cast_type"].(map[string]any)
		switch t["id"] {
		case "DOUBLE", "FLOAT":
			return n, true
		case "BIGINT", "INTEGER":
			return n, n == math.Trunc(n)
		}
		return 0, false
	case "FUNCTION":
		children, _ := m["children"].([]any)
		if name, _ := m["function_name"].(string); !strings.EqualFold(name, "trunc") || m["is_operator"] != false || !plainCall(m) || len(children) != 1 {
			return 0, false
		}
		n, ok := number(children[0])
		return math.Trunc(n), ok
	}
	return 0, false
}
