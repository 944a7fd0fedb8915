package objstore_test

import (
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		stopEmulator()
		if err := goleak.Find(
			// Idle keep-alive connections of the HTTP client and server.
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{
		"a", "a/b", "dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet", "a..b/c.d", "x-y_z/ü",
	} {
		if err := objstore.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range objstoretest.InvalidNames {
		if err := objstore.ValidateName(name); !errors.Is(err, objstore.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestCRC32C(t *testing.T) {
	// The check value of CRC-32C (Castagnoli).
	if got := objstore.CRC32C([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC32C(123456789) = %08x, want e3069283", got)
	}
}
