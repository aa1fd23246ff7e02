//! A minimal HTTP/1 server on 127.0.0.1 for the fakes: each request read whole and answered by one function.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A request, read whole.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// The query's pairs, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Headers, names in lowercase.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Bytes,
}

impl Request {
    /// A request for `target` (a path with its query, or an absolute URL whose path and query are taken),
    /// header names lowercased.
    pub fn new<'a>(
        method: &str,
        target: &str,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: impl Into<Bytes>,
    ) -> Self {
        let target = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Self {
            method: method.to_owned(),
            path: decode(path),
            query: pairs(query),
            headers: headers.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned())).collect(),
            body: body.into(),
        }
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The body's form fields (`application/x-www-form-urlencoded`).
    pub fn form(&self) -> Vec<(String, String)> {
        pairs(&String::from_utf8_lossy(&self.body))
    }

    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON answer.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// The same answer with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What answers requests.
pub type Handler = Arc<dyn Fn(Request) -> Response + Send + Sync>;

/// Serves `handle` on `listener` until the runtime stops; answers its address.
pub fn serve_on(listener: TcpListener, handle: Handler) -> std::io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(connection(stream, handle.clone(), false));
        }
    });
    Ok(addr)
}

/// Serves `handle` over TLS (`tls`) on `listener` until the runtime stops; answers its address.
pub fn serve_tls_on(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handle: Handler,
) -> std::io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, handle) = (acceptor.clone(), handle.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate hangs up during the handshake: nothing to serve.
                if let Ok(stream) = acceptor.accept(stream).await {
                    let verified = stream.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty());
                    connection(stream, handle, verified).await;
                }
            });
        }
    });
    Ok(addr)
}

/// The header a TLS fake sets on the requests of a connection whose client presented a certificate its CA
/// issued (the handshake verified it); a client's own header of that name is dropped.
pub const CLIENT_CERTIFICATE: &str = "x-fake-client-certificate";

/// Serves one connection's requests; `verified`: the client presented a certificate the fake's CA issued.
async fn connection<S>(stream: S, handle: Handler, verified: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let handle = handle.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let headers = parts
                .headers
                .iter()
                .filter(|(k, _)| k.as_str() != CLIENT_CERTIFICATE)
                .map(|(k, v)| (k.as_str(), v.to_str().unwrap_or_default()))
                .chain(verified.then_some((CLIENT_CERTIFICATE, "verified")));
            let request = Request::new(parts.method.as_str(), &parts.uri.to_string(), headers, body);
            let answer = handle(request);
            let mut response = hyper::Response::new(Full::new(Bytes::from(answer.body)));
            *response.status_mut() =
                hyper::StatusCode::from_u16(answer.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
            for (k, v) in answer.headers {
                if let (Ok(k), Ok(v)) =
                    (hyper::header::HeaderName::from_bytes(k.as_bytes()), hyper::header::HeaderValue::from_str(&v))
                {
                    response.headers_mut().append(k, v);
                }
            }
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
}

/// `a=1&b=x%20y` as pairs.
fn pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding, with `+` as a space (forms and queries).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| char::from(b).to_digit(16);
                if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_the_path_and_query_of_a_url() {
        let r = Request::new("GET", "http://127.0.0.1:9/a%20b?x=1&y=a+b", [("Host", "h")], Bytes::new());
        assert_eq!(
            (r.path.as_str(), r.param("y"), r.headers.get("host").map(String::as_str)),
            ("/a b", Some("a b"), Some("h"))
        );
        assert_eq!(Request::new("GET", "/p?q=1", [], Bytes::new()).param("q"), Some("1"));
    }

    #[test]
    fn queries_and_forms_decode() {
        assert_eq!(
            pairs("filter=labels.a%20%3D%20%22owned%22&x=a+b&flag"),
            [
                ("filter".into(), "labels.a = \"owned\"".into()),
                ("x".into(), "a b".into()),
                ("flag".into(), String::new())
            ]
        );
        assert_eq!(decode("100%"), "100%");
    }
}
