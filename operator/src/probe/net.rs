//! The probe's requests: DNS, direct, and through an HTTP proxy (absolute-form for `http`,
//! a CONNECT tunnel for `https`). Written on hyper's connection API rather than a general
//! client: the probe must take the route the model chose, and see the proxy's own answer
//! to CONNECT (403 and 407 are different findings).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Empty;
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::Outcome;
use crate::noproxy::Target;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}
type Io = Box<dyn Stream>;

/// The roots the probe checks servers with.
#[derive(Debug, Clone)]
pub enum Trust {
    /// The system's, as the image has them.
    System,
    /// A policy's trust (`spec.trust`) under test: its CA sources (PEM), and with `keep` the
    /// shipped root set, as `ca-bundle.crt` is built.
    Bundle { pem: String, keep: bool },
}

/// Makes the probe's requests, each bounded by one timeout.
pub struct Requester {
    tls: tokio_rustls::TlsConnector,
    timeout: Duration,
}

impl Requester {
    /// Trusts `trust` (by default the system's CA certificates: `SSL_CERT_FILE`,
    /// `SSL_CERT_DIR`) and the PEM files given (the cluster's CA, for the Kubernetes Service).
    pub fn new(
        ca_files: &[PathBuf],
        ca_pem: Option<&str>,
        trust: &Trust,
        timeout: Duration,
    ) -> anyhow::Result<Requester> {
        let mut roots = rustls::RootCertStore::empty();
        match trust {
            Trust::System => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
            Trust::Bundle { pem, keep } => {
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(cert.map_err(|e| anyhow::anyhow!("--trust-pem: {e}"))?)?;
                }
                let shipped = crate::trust::RootSet::shipped();
                for c in shipped.certs.iter().filter(|_| *keep) {
                    let _ = roots.add(CertificateDer::from(c.der.clone()));
                }
            }
        }
        for path in ca_files {
            let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect())
                .map_err(|e| anyhow::anyhow!("--ca-file {}: {e}", path.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "--ca-file {}: no certificate",
                path.display()
            );
            for cert in certs {
                roots.add(cert)?;
            }
        }
        if let Some(pem) = ca_pem.filter(|p| !p.trim().is_empty()) {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert.map_err(|e| anyhow::anyhow!("--ca-pem: {e}"))?)?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Requester {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            timeout,
        })
    }

    /// The target's addresses as this Pod's resolver answers.
    pub async fn resolve(&self, target: &Target) -> Result<Vec<SocketAddr>, String> {
        if let Some(ip) = target.ip {
            return Ok(vec![SocketAddr::new(ip, target.port)]);
        }
        let host = (target.host.as_str(), target.port);
        match timeout(self.timeout, tokio::net::lookup_host(host)).await {
            Ok(Ok(addrs)) => Ok(addrs.collect()),
            Ok(Err(e)) => Err(format!("DNS lookup of {} failed: {e}", target.host)),
            Err(_) => Err(format!("DNS lookup of {} timed out", target.host)),
        }
    }

    /// A GET straight to the target's addresses.
    pub async fn direct(&self, target: &Target, path: &str, addrs: &[SocketAddr]) -> Outcome {
        let io = match self.connect_any(addrs).await {
            Ok(io) => io,
            Err(e) => return Outcome::Unreachable(e),
        };
        self.bounded(async {
            let io = self.secure(io, target).await?;
            let res = exchange(io, get(target, path)?).await?;
            Ok(Outcome::Response(res.status().as_u16()))
        })
        .await
    }

    /// A GET through `proxy` (a proxy URL, credentials in its userinfo).
    pub async fn via_proxy(&self, target: &Target, path: &str, proxy: &str) -> Outcome {
        let proxy = match Proxy::parse(proxy) {
            Ok(p) => p,
            Err(e) => return Outcome::Broken(e),
        };
        let io = match self.connect_proxy(&proxy).await {
            Ok(io) => io,
            Err(e) => return Outcome::Unreachable(e),
        };
        self.bounded(async {
            if target.scheme == "http" {
                let absolute = format!("http://{}{path}", host_header(target));
                let mut req = get(target, &absolute)?;
                proxy.authorize(&mut req);
                let res = exchange(io, req).await?;
                return Ok(Outcome::Response(res.status().as_u16()));
            }
            let mut connect = Request::connect(authority(target))
                .header(hyper::header::HOST, authority(target))
                .body(Empty::<Bytes>::new())
                .map_err(|e| e.to_string())?;
            proxy.authorize(&mut connect);
            let res = exchange(io, connect).await?;
            if !res.status().is_success() {
                return Ok(Outcome::TunnelRefused(res.status().as_u16()));
            }
            let tunnel = hyper::upgrade::on(res)
                .await
                .map_err(|e| format!("CONNECT tunnel: {e}"))?;
            let io = self.secure(Box::new(TokioIo::new(tunnel)), target).await?;
            let res = exchange(io, get(target, path)?).await?;
            Ok(Outcome::Tunneled(res.status().as_u16()))
        })
        .await
    }

    /// Runs an exchange within the timeout; its failures are [`Outcome::Broken`].
    async fn bounded(&self, f: impl Future<Output = Result<Outcome, String>>) -> Outcome {
        match timeout(self.timeout, f).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => Outcome::Broken(e),
            Err(_) => Outcome::Broken(format!("no answer within {:?}", self.timeout)),
        }
    }

    async fn connect_any(&self, addrs: &[SocketAddr]) -> Result<Io, String> {
        let mut last = "no address".to_owned();
        for addr in addrs {
            match timeout(self.timeout, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => return Ok(Box::new(s)),
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => last = format!("{addr}: connection timed out"),
            }
        }
        Err(last)
    }

    async fn connect_proxy(&self, proxy: &Proxy) -> Result<Io, String> {
        let target = (proxy.host.as_str(), proxy.port);
        let addrs: Vec<SocketAddr> =
            match timeout(self.timeout, tokio::net::lookup_host(target)).await {
                Ok(Ok(a)) => a.collect(),
                Ok(Err(e)) => {
                    return Err(format!(
                        "DNS lookup of the proxy {} failed: {e}",
                        proxy.host
                    ));
                }
                Err(_) => return Err(format!("DNS lookup of the proxy {} timed out", proxy.host)),
            };
        let io = self.connect_any(&addrs).await?;
        if proxy.tls {
            let name = server_name(&proxy.host)?;
            let s = timeout(self.timeout, self.tls.connect(name, io))
                .await
                .map_err(|_| "TLS to the proxy: no answer in time".to_owned())?
                .map_err(|e| format!("TLS to the proxy: {e}"))?;
            return Ok(Box::new(s));
        }
        Ok(io)
    }

    /// TLS for an `https` target (verifying its certificate for its host name).
    async fn secure(&self, io: Io, target: &Target) -> Result<Io, String> {
        if target.scheme != "https" {
            return Ok(io);
        }
        let name = server_name(&target.host)?;
        let s = self
            .tls
            .connect(name, io)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        Ok(Box::new(s))
    }
}

fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_owned()).map_err(|e| format!("TLS server name {host:?}: {e}"))
}

/// An HTTP proxy from a proxy variable: where it is and its Basic credentials.
struct Proxy {
    host: String,
    port: u16,
    tls: bool,
    basic: Option<String>,
}

impl Proxy {
    fn parse(value: &str) -> Result<Proxy, String> {
        let spelled = if value.contains("://") {
            value.to_owned()
        } else {
            format!("http://{value}")
        };
        let bad = || {
            format!(
                "proxy {}: not a usable http(s) proxy URL",
                crate::noproxy::redact_proxy(value)
            )
        };
        let url = url::Url::parse(&spelled).map_err(|_| bad())?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            s => return Err(format!("proxy scheme {s} is not supported by the probe")),
        };
        let host = url
            .host_str()
            .ok_or_else(bad)?
            .trim_matches(['[', ']'])
            .to_owned();
        let port = url.port_or_known_default().ok_or_else(bad)?;
        let basic = (!url.username().is_empty()).then(|| {
            let decode = |s: &str| percent_decode(s);
            let pair = format!(
                "{}:{}",
                decode(url.username()),
                decode(url.password().unwrap_or(""))
            );
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        Ok(Proxy {
            host,
            port,
            tls,
            basic,
        })
    }

    fn authorize(&self, req: &mut Request<Empty<Bytes>>) {
        if let Some(b) = &self.basic
            && let Ok(v) = hyper::header::HeaderValue::from_str(b)
        {
            req.headers_mut()
                .insert(hyper::header::PROXY_AUTHORIZATION, v);
        }
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// `host:port`, as CONNECT names a target.
fn authority(t: &Target) -> String {
    if t.ipv6 {
        format!("[{}]:{}", t.host, t.port)
    } else {
        format!("{}:{}", t.host, t.port)
    }
}

/// The Host header: the port only when it is not the scheme's default.
fn host_header(t: &Target) -> String {
    let host = if t.ipv6 {
        format!("[{}]", t.host)
    } else {
        t.host.clone()
    };
    match t.non_default_port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

/// A GET for `target` with the given request-target (origin or absolute form).
fn get(target: &Target, uri: &str) -> Result<Request<Empty<Bytes>>, String> {
    Request::get(uri)
        .header(hyper::header::HOST, host_header(target))
        .header(
            hyper::header::USER_AGENT,
            concat!("egress-proxy-operator-probe/", env!("CARGO_PKG_VERSION")),
        )
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))
}

/// Sends one request on a fresh HTTP/1.1 connection (upgrades allowed, for CONNECT).
async fn exchange(io: Io, req: Request<Empty<Bytes>>) -> Result<Response<Incoming>, String> {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    sender
        .send_request(req)
        .await
        .map_err(|e| format!("HTTP: {e}"))
}
