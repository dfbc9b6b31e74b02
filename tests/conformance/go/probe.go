// Go client probe for the NO_PROXY conformance harness: one real request through
// net/http with the default Transport's Proxy (http.ProxyFromEnvironment, which
// reads the environment once per process; the harness runs one process per case).
// Prints one JSON line: {"ok","status","error"}; with -version prints the Go version.
// With -verify URL (the trust checks) certificates are verified as by default (the Go
// roots: SSL_CERT_FILE / SSL_CERT_DIR or the system files); otherwise they are not checked.
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
	url, verify := os.Args[1], false
	if url == "-verify" && len(os.Args) > 2 {
		url, verify = os.Args[2], true
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if !verify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		out["error"] = err.Error()
	} else {
		resp.Body.Close()
		out["ok"] = true
		out["status"] = resp.StatusCode
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
