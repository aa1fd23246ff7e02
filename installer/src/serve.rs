//! The installer served over HTTP/1 on a listener of its own (a local run; on AWS a Lambda function URL serves
//! it). The body is read whole, at most [`MAX_BODY`] bytes.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::service::Installer;

/// The largest request body the installer reads: an install request is a few kilobytes.
pub const MAX_BODY: usize = 64 * 1024;

/// Serves `installer` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, installer: Installer) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "the installer's accept failed");
                continue;
            }
        };
        let installer = installer.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let installer = installer.clone();
                async move { Ok::<_, Infallible>(answer(&installer, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

async fn answer(installer: &Installer, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let Ok(body) = Limited::new(body, MAX_BODY).collect().await.map(|b| b.to_bytes()) else {
        let mut too_large = hyper::Response::new(Full::new(Bytes::from_static(
            b"{\"message\":\"the request body is larger than the installer reads (64 KiB)\"}",
        )));
        *too_large.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
        return too_large;
    };
    let (parts, body) = installer.handle(http::Request::from_parts(parts, body)).await.into_parts();
    hyper::Response::from_parts(parts, Full::new(body))
}
