package lograte

import (
	"testing"
	"time"
)

func TestByKey(t *testing.T) {
	k := ByKey{Every: time.Hour}
	if _, ok := k.Allow("unavailable"); !ok {
		t.Fatal("the first event of a key was held back")
	}
	if _, ok := k.Allow("unavailable"); ok {
		t.Fatal("a second event of the same key within the interval got through")
	}
	if _, ok := k.Allow("timeout"); !ok {
		t.Fatal("the first event of another key was held back by the first key's")
	}
	k.m["unavailable"].last = time.Now().Add(-2 * time.Hour)
	if n, ok := k.Allow("unavailable"); !ok || n != 1 {
		t.Fatalf("after the interval: allowed %v with %d held back, want allowed with 1", ok, n)
	}
}
