// JDK client probe for the NO_PROXY conformance harness. One JVM per case: the JDK reads
// no proxy variable, only system properties, and the environment reaches those through
// JAVA_TOOL_OPTIONS, which HotSpot reads once, at JVM start.
//
//   java -cp DIR Probe URL [--httpclient] [--verify]   one real request (and a second one, see 2.)
//   java -cp DIR Probe -version             {"version": ...}
//
// 1. `new URL(url).openConnection()` (HttpURLConnection / HttpsURLConnection with the
//    default ProxySelector, sun.net.spi.DefaultProxySelector) and a GET. Prints one JSON
//    line {"ok","status","error","using_proxy"}.
// 2. With --httpclient it then waits for a line on stdin (the harness takes the connections
//    of step 1 in between) and makes the same GET with java.net.http.HttpClient from the
//    DEFAULT builder (no .proxy(...): HttpClientImpl then uses ProxySelector.getDefault()).
//    Prints a second JSON line {"ok","status","error"}. The client and the request are built
//    on a second thread while step 1 runs (building opens no connection; it only saves the
//    class loading time). Stdin closed instead of a line: step 2 is skipped.
//
// TLS: the probe trusts any certificate (as curl -k does); the harness's direct listener
// closes a TLS connection after the ClientHello anyway, so only the route matters.
// With --verify (the trust checks) both clients keep the JDK's defaults: the default
// SSLContext (javax.net.ssl.trustStore* properties, else cacerts) and hostname verification.
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;

public class Probe {
    static String json(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String err(Throwable e) {
        String s = e.getClass().getName() + ": " + e.getMessage();
        if (e.getCause() != null && e.getCause() != e) s += " (cause: " + e.getCause() + ")";
        return s.length() > 500 ? s.substring(0, 500) : s;
    }

    static SSLContext trustAll() throws Exception {
        TrustManager[] tm = {new X509TrustManager() {
            public void checkClientTrusted(X509Certificate[] c, String a) {}
            public void checkServerTrusted(X509Certificate[] c, String a) {}
            public X509Certificate[] getAcceptedIssuers() { return new X509Certificate[0]; }
        }};
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tm, new SecureRandom());
        return ctx;
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("-version")) {
            System.out.println("{\"version\": " + json(System.getProperty("java.vm.name") + " "
                + System.getProperty("java.runtime.version")) + "}");
            return;
        }
        String url = args[0];
        java.util.List<String> flags = java.util.Arrays.asList(args).subList(1, args.length);
        boolean withHttpClient = flags.contains("--httpclient");
        SSLContext ctx0 = null;
        try {
            if (!flags.contains("--verify")) ctx0 = trustAll();
        } catch (Exception e) {
            // the route is still observed; only a TLS handshake would differ
        }
        final SSLContext ctx = ctx0;
        // step 2's client and request, built meanwhile (no connection is opened by building)
        CompletableFuture<Object[]> prepared = !withHttpClient ? null : CompletableFuture.supplyAsync(() -> {
            try {
                HttpClient.Builder b = HttpClient.newBuilder()
                    .connectTimeout(Duration.ofSeconds(3))
                    .followRedirects(HttpClient.Redirect.NEVER);
                if (ctx != null) b.sslContext(ctx);
                HttpRequest req = HttpRequest.newBuilder(new URI(url)).timeout(Duration.ofSeconds(3)).GET().build();
                return new Object[] {b.build(), req};
            } catch (Throwable e) {
                return new Object[] {e};
            }
        });

        // ---- 1. HttpURLConnection, default ProxySelector
        boolean ok = false;
        Integer status = null;
        String error = null;
        Boolean usingProxy = null;
        HttpURLConnection c = null;
        try {
            c = (HttpURLConnection) new URL(url).openConnection();
            if (c instanceof HttpsURLConnection && ctx != null) {
                HttpsURLConnection h = (HttpsURLConnection) c;
                h.setSSLSocketFactory(ctx.getSocketFactory());
                h.setHostnameVerifier((n, s) -> true);
            }
            c.setConnectTimeout(3000);
            c.setReadTimeout(3000);
            c.setInstanceFollowRedirects(false);
            c.setUseCaches(false);
            status = c.getResponseCode();
            usingProxy = c.usingProxy();
            try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
                if (in != null) in.readAllBytes();
            }
            ok = true;
        } catch (Throwable e) {
            error = err(e);
            if (c != null) {
                try { usingProxy = c.usingProxy(); } catch (Throwable ignored) { }
            }
        } finally {
            if (c != null) c.disconnect();
        }
        System.out.println("{\"ok\": " + ok + ", \"status\": " + status + ", \"error\": " + json(error)
            + ", \"using_proxy\": " + usingProxy + "}");
        System.out.flush();

        // ---- 2. java.net.http.HttpClient, default builder, after the harness says go
        if (prepared == null) return;
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String go = stdin.readLine();
        if (go == null) return;
        ok = false;
        status = null;
        error = null;
        try {
            Object[] p = prepared.get();
            if (p[0] instanceof Throwable) throw (Throwable) p[0];
            HttpResponse<byte[]> r = ((HttpClient) p[0]).send((HttpRequest) p[1], HttpResponse.BodyHandlers.ofByteArray());
            status = r.statusCode();
            ok = true;
        } catch (Throwable e) {
            error = err(e);
        }
        System.out.println("{\"ok\": " + ok + ", \"status\": " + status + ", \"error\": " + json(error) + "}");
        System.out.flush();
    }
}
