//! Whether a signed request may be answered for what it asks (the service's [`crate::service::Installer`]): its
//! `webhook-id` must name its method, path and attempt as Apiary's client writes them, and an id is taken for one
//! request only ([`crate::ports::Replays`], keyed by `digest`).

use bytes::Bytes;
use http::{Method, Request};
use serde_json::Value;

/// How long an accepted request's id is remembered: the signature's tolerance (five minutes) and a minute more.
pub(crate) const REPLAY_SECONDS: i64 = 6 * 60;

/// What one request is, for the replays: its method, its path and query, and its body, hashed.
pub(crate) fn digest(req: &Request<Bytes>) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(req.method().as_str());
    hash.update(b" ");
    hash.update(req.uri().path_and_query().map_or("", |p| p.as_str()));
    hash.update(b"\n");
    hash.update(req.body());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The pool a list (`GET …/clusters?pool=`) names; empty when none.
pub(crate) fn listed_pool(req: &Request<Bytes>) -> &str {
    req.uri().query().and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("pool="))).unwrap_or_default()
}

/// Whether `req`'s `webhook-id` names what it does, as Apiary's client writes it (`shared/clouds/src/webhook.rs`):
/// the cluster of its path and the operation of its method with the attempt (for a `PUT`, the body's), or the pool
/// of a list with the request's timestamp. A signature covers the id and the body but not the method or the path.
pub(crate) fn bound(req: &Request<Bytes>) -> std::result::Result<(), String> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let id = header("webhook-id");
    let segments: Vec<&str> = req.uri().path().split('/').filter(|s| !s.is_empty()).collect();
    let refused = |what: String| Err(format!("webhook-id {id:?} does not name this request ({what})"));
    match (req.method(), segments.as_slice()) {
        (&Method::GET, [.., "clusters"]) => {
            let want = format!("{}.list.{}", listed_pool(req), header("webhook-timestamp"));
            if id == want {
                Ok(())
            } else {
                refused(format!("want {want:?}"))
            }
        }
        (method, [.., "clusters", cluster]) => {
            let op = match *method {
                Method::PUT => "PutCluster",
                Method::GET => "GetCluster",
                Method::DELETE => "DeleteCluster",
                _ => return refused(format!("{method} is no operation of the contract")),
            };
            let attempt = id.strip_prefix(&format!("{cluster}.{op}.")).and_then(|n| n.parse::<u32>().ok());
            match attempt {
                Some(n) if n >= 1 && *method != Method::PUT => Ok(()),
                Some(n) if n >= 1 => {
                    match serde_json::from_slice::<Value>(req.body()).ok().and_then(|b| b["attempt"].as_u64()) {
                        Some(a) if a == u64::from(n) => Ok(()),
                        _ => refused(format!("the body's attempt is not {n}")),
                    }
                }
                _ => refused(format!("want {cluster}.{op}.<attempt>")),
            }
        }
        _ => refused("no request of the contract".to_owned()),
    }
}
