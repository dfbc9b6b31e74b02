// Go client probe for the NO_PROXY conformance harness: one real request through
// net/http with the default Transport's Proxy (http.ProxyFromEnvironment, which
// reads the environment once per process; the harness runs one process per case).
// Prints one JSON line: {"ok","status","error"}; with -version prints the Go version.
package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-version" {
		json.NewEncoder(os.Stdout).Encode(map[string]string{"version": runtime.Version()})
		return
	}
	out := map[string]interface{}{"ok": false, "status": nil, "error": nil}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	c := &http.Client{Timeout: 3 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(os.Args[1])
	if err != nil {
		out["error"] = err.Error()
	} else {
		resp.Body.Close()
		out["ok"] = true
		out["status"] = resp.StatusCode
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
