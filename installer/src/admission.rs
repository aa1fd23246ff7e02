//! Whether a signed request may be answered for what it asks (the service's [`crate::service::Installer`]): its
//! `webhook-id` must name its method, path and attempt as Apiary's client writes them, and an id is taken for one
//! request only ([`crate::ports::Replays`], keyed by `digest`).

use bytes::Bytes;
use http::{Method, Request};
use serde_json::Value;

/// How far a request's `webhook-timestamp` may be from the installer's time, either way (Standard Webhooks').
pub(crate) const TOLERANCE_SECONDS: i64 = 5 * 60;
/// How long an accepted request's id is remembered: the signature's tolerance and a minute more.
pub(crate) const REPLAY_SECONDS: i64 = TOLERANCE_SECONDS + 60;

/// Whether `req` carries a Standard Webhooks signature by one of `keys` over its id, timestamp and body, with a
/// timestamp within [`TOLERANCE_SECONDS`] of `now` (Unix seconds, the installer's clock). The specification's crate
/// computes the signature; the time is the installer's own, not the system's, so a simulation can run it.
pub(crate) fn verified(keys: &[String], req: &Request<Bytes>, now: i64) -> std::result::Result<(), String> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) =
        (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"))
    else {
        return Err("the request's signature: webhook-id, webhook-timestamp and webhook-signature are required".into());
    };
    let at: i64 = timestamp
        .parse()
        .map_err(|_| format!("the request's signature: webhook-timestamp {timestamp:?} is not a number"))?;
    if (now - at).abs() > TOLERANCE_SECONDS {
        return Err(format!("the request's signature: webhook-timestamp {at} is more than five minutes from {now}"));
    }
    let mut why = "the installer has no signing key".to_owned();
    for key in keys {
        let hook = standardwebhooks::Webhook::new(key).map_err(|e| format!("the installer's key: {e}"))?;
        let expected = hook.sign(id, at, req.body()).map_err(|e| format!("the installer's key: {e}"))?;
        let matches = |given: &str| {
            aws_lc_rs::constant_time::verify_slices_are_equal(given.as_bytes(), expected.as_bytes()).is_ok()
        };
        if signatures.split(' ').any(matches) {
            return Ok(());
        }
        why = "the request's signature: none of its signatures is by the installer's key".to_owned();
    }
    Err(why)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS01ZjFkMGMzYTllN2IyNDY4";

    fn signed(key: &str, at: i64, signatures: impl Fn(String) -> String) -> Request<Bytes> {
        let body = Bytes::from_static(b"{\"attempt\":1}");
        let signature = standardwebhooks::Webhook::new(key).expect("key").sign("ci-1.PutCluster.1", at, &body);
        Request::builder()
            .method("PUT")
            .uri("/apiary/clusters/ci-1")
            .header("webhook-id", "ci-1.PutCluster.1")
            .header("webhook-timestamp", at.to_string())
            .header("webhook-signature", signatures(signature.expect("signed")))
            .body(body)
            .expect("request")
    }

    #[test]
    fn a_signature_holds_five_minutes_either_side_of_the_installers_own_time() {
        let keys = [KEY.to_owned()];
        let at = 1_795_000_000;
        for (now, ok) in [(at, true), (at + 300, true), (at - 300, true), (at + 301, false), (at - 301, false)] {
            let verdict = verified(&keys, &signed(KEY, at, |s| s), now);
            assert_eq!(verdict.is_ok(), ok, "signed at {at}, now {now}: {verdict:?}");
        }
        // One good signature among others (a key being rotated) is enough; another key's alone is not.
        assert!(verified(&keys, &signed(KEY, at, |s| format!("v1,bm90LXRoaXM= {s}")), at).is_ok());
        let other = "whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS0wYjdlNDFjOWQyYTZmMzg1";
        let why = verified(&keys, &signed(other, at, |s| s), at).expect_err("another key's");
        assert!(why.contains("none of its signatures"), "{why}");
        let mut unsigned = signed(KEY, at, |s| s);
        unsigned.headers_mut().remove("webhook-signature");
        assert!(verified(&keys, &unsigned, at).is_err_and(|why| why.contains("required")));
    }
}
