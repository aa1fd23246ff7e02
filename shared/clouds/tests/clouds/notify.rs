//! Claim notifications posted to the reference receiver (`apiary_fakeclouds::notifications`), which verifies each
//! signature as a receiver must.

use std::time::Duration;

use apiary_clouds::http::Http;
use apiary_clouds::notify::Notifications;
use apiary_fakeclouds::notifications::FakeReceiver;
use apiary_planner::notify::NotifyHook;
use apiary_planner::validate::UrlPolicy;
use apiary_ports::platform::Notifier;
use apiary_ports::Error;

use crate::support::{refused_to_intruder, MemSecrets, ARN};

const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn hook(url: String) -> NotifyHook {
    NotifyHook { url, secret: ARN.into(), events: vec![] }
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[tokio::test]
async fn a_notification_arrives_signed_and_a_wrong_key_or_a_foreign_pool_does_not() {
    let receiver = FakeReceiver::start(KEY).await.expect("receiver");
    let http = Http::guarded(UrlPolicy::new(true, "", vec![]).expect("policy")).expect("client");
    let notifications = Notifications::new(http.clone(), MemSecrets::one(KEY.into()));
    let body = br#"{"type":"claim.assigned","timestamp":"2026-11-28T12:00:00.000Z","data":{"pool":"ci-pool"}}"#;
    let id = "2026-11-28T12:00:00.000000Z#job-1/ci-abcde#1#ClaimAssigned";
    let status = notifications.post("ci-pool", &hook(receiver.url()), id, now(), body).await.expect("posted");
    assert_eq!(status, 204);
    let got = receiver.received();
    assert_eq!((got.len(), got[0].id.as_str(), got[0].body["type"].as_str()), (1, id, Some("claim.assigned")));
    // The same notification again is dropped by its id.
    notifications.post("ci-pool", &hook(receiver.url()), id, now(), body).await.expect("posted");
    assert_eq!((receiver.received().len(), receiver.duplicates()), (1, 1));

    // A key the receiver does not hold: refused, 401, and nothing received.
    let wrong = Notifications::new(http, MemSecrets::one("whsec_c2VjcmV0LWtleS1vZi1hbm90aGVy".into()));
    let status = wrong.post("ci-pool", &hook(receiver.url()), "other", now(), body).await.expect("answered");
    assert_eq!(status, 401);
    assert!(receiver.refused().iter().any(|r| r.contains("no valid signature")), "{:?}", receiver.refused());
    // A secret not tagged for the pool signs nothing.
    refused_to_intruder(notifications.post("intruder", &hook(receiver.url()), "x", now(), body).await, ARN);
}

/// A failing receiver is posted to once per attempt: its answer is the attempt's, told in the trail and tried
/// again on the documented schedule, with no retry of the HTTP client's in between.
#[tokio::test]
async fn a_receiver_that_fails_is_posted_to_once_an_attempt_and_one_out_of_bounds_never() {
    let receiver = FakeReceiver::start(KEY).await.expect("receiver");
    receiver.fail_next(100);
    let local = Http::guarded(UrlPolicy::new(true, "", vec![]).expect("policy")).expect("client");
    let notifications = Notifications::new(local, MemSecrets::one(KEY.into()));
    let failed = notifications.post("ci-pool", &hook(receiver.url()), "id", now(), b"{}").await;
    assert!(matches!(failed, Ok(503)), "{failed:?}");
    assert_eq!(receiver.failed(), 1, "one post, one attempt");
    let again = notifications.post("ci-pool", &hook(receiver.url()), "id", now(), b"{}").await;
    assert_eq!((again.ok(), receiver.failed()), (Some(503), 2));
    // The stack's policy keeps a notification from its own neighbourhood.
    let guarded = Http::guarded(UrlPolicy::new(false, "", vec![]).expect("policy")).expect("client");
    let notifications = Notifications::new(guarded, MemSecrets::one(KEY.into()));
    let refused = notifications.post("ci-pool", &hook(receiver.url()), "id", now(), b"{}").await;
    assert!(
        matches!(&refused, Err(Error::Service { message, .. }) if message.contains("refused to call")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_receiver_that_never_answers_costs_one_post_its_budget_and_no_more() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/slow", listener.local_addr().expect("address"));
    let held = tokio::spawn(async move {
        let mut open = vec![];
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let http = Http::guarded(UrlPolicy::new(true, "", vec![]).expect("policy")).expect("client");
    let notifications = Notifications::new(http, MemSecrets::one(KEY.into()));
    let started = std::time::Instant::now();
    let slow = notifications.post("ci-pool", &hook(url), "id", now(), b"{}").await;
    let took = started.elapsed();
    assert!(matches!(&slow, Err(e) if e.is_retryable()), "{slow:?}");
    assert!(took >= apiary_clouds::notify::POST_BUDGET - Duration::from_millis(100), "{took:?}");
    assert!(took < apiary_clouds::notify::POST_BUDGET + Duration::from_secs(2), "bounded: {took:?}");
    held.abort();
}
