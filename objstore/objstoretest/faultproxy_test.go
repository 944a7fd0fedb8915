package objstoretest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

// TestFaultProxy: the GCS client (objstore.GCS) through a FaultProxy in
// front of the in-process emulator sees each fault as it would from GCS:
// a 503, 500 or 429 and a reset are retried by the client (each attempt
// reported, classified), a delay only slows, a lost success ends in
// ErrExists with the object there, whole.
func TestFaultProxy(t *testing.T) {
	emu, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	emu.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "b"})
	proxy, err := objstoretest.NewFaultProxy(emu.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var mu sync.Mutex
	var classes []string
	g, err := objstore.NewGCS(context.Background(), objstore.GCSConfig{Bucket: "b", Endpoint: proxy.URL() + "/storage/v1/",
		OnAttemptError: func(_ string, err error) {
			mu.Lock()
			defer mu.Unlock()
			classes = append(classes, objstore.ErrorClass(err))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	data := bytes.Repeat([]byte("apron"), 100_000) // 500 kB: a reset cuts it mid-body
	put := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return g.Put(ctx, name, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{MustNotExist: true})
	}
	cases := []struct {
		name   string
		fault  objstoretest.Fault
		class  string
		exists bool // the Put ends in ErrExists (its first attempt landed)
	}{
		{"503", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: http.StatusServiceUnavailable}, "unavailable", false},
		{"500", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: http.StatusInternalServerError}, "unavailable", false},
		{"429", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: http.StatusTooManyRequests}, "rate_limited", false},
		{"reset", objstoretest.Fault{Kind: objstoretest.FaultReset}, "connection", false},
		{"delay", objstoretest.Fault{Kind: objstoretest.FaultDelay, Delay: 200 * time.Millisecond}, "", false},
		{"lost success", objstoretest.Fault{Kind: objstoretest.FaultLostSuccess}, "unavailable", true},
	}
	for _, c := range cases {
		mu.Lock()
		classes = nil
		mu.Unlock()
		name := "obj-" + c.name
		proxy.Inject(objstoretest.MatchUploadOf(name), c.fault, 1)
		start := time.Now()
		err := put(name)
		took := time.Since(start)
		switch {
		case c.exists && !errors.Is(err, objstore.ErrExists):
			t.Errorf("%s: Put: %v, want ErrExists (the first attempt landed)", c.name, err)
		case !c.exists && err != nil:
			t.Errorf("%s: Put: %v, want the client's retry to succeed", c.name, err)
		}
		if p := proxy.Pending(); p != 0 {
			t.Errorf("%s: %d faults not injected", c.name, p)
		}
		mu.Lock()
		got := append([]string(nil), classes...)
		mu.Unlock()
		if c.class == "" && len(got) != 0 || c.class != "" && (len(got) != 1 || got[0] != c.class) {
			t.Errorf("%s: attempt errors %q, want [%s]", c.name, got, c.class)
		}
		if c.fault.Kind == objstoretest.FaultDelay && took < c.fault.Delay {
			t.Errorf("delay: Put took %s, want at least %s", took, c.fault.Delay)
		}
		obj, err := emu.GetObject("b", name)
		if err != nil || !bytes.Equal(obj.Content, data) {
			t.Errorf("%s: the object in the emulator: %v (%d bytes), want it whole", c.name, err, len(obj.Content))
		}
	}
	// A fault for another object's upload leaves this one alone.
	proxy.Inject(objstoretest.MatchUploadOf("other"), objstoretest.Fault{Kind: objstoretest.FaultStatus}, 1)
	if err := put("mine"); err != nil || proxy.Pending() != 1 {
		t.Errorf("an upload not matched: %v, %d pending, want it untouched", err, proxy.Pending())
	}
	proxy.Clear()
	if proxy.Pending() != 0 {
		t.Error("faults pending after Clear")
	}
	t.Logf("faults injected:\n%v", proxy.Log())
}
