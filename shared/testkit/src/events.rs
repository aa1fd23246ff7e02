//! Events as AWS sends them: handler tests parse AWS's own sample documents (the `aws_lambda_events` crate's
//! fixtures, copied into `events/` unchanged) with Apiary's messages put where AWS puts a message, and hold the
//! handlers' answers to the documents Lambda accepts.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use serde_json::Value;

/// AWS's sample SQS event for Lambda (`example-sqs-event.json`): one record, every field an event source mapping
/// fills.
const SQS_EVENT: &str = include_str!("../events/sqs-event.json");
/// AWS's sample partial batch response (`example-sqs-batch-response.json`), the shape Lambda reads failures from.
const SQS_BATCH_RESPONSE: &str = include_str!("../events/sqs-batch-response.json");

/// The SQS event Lambda hands a function for `bodies` from the queue `queue_arn`: AWS's sample record once per
/// body, message ids `m0`, `m1`, …, parsed as the runtime parses it.
pub fn sqs_event(queue_arn: &str, bodies: &[&str]) -> SqsEvent {
    let sample: Value = serde_json::from_str(SQS_EVENT).expect("AWS's sample SQS event");
    let record = sample["Records"][0].clone();
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let mut r = record.clone();
            r["messageId"] = Value::from(format!("m{i}"));
            r["receiptHandle"] = Value::from(format!("receipt-{i}"));
            r["body"] = Value::from(*body);
            r["eventSourceARN"] = Value::from(queue_arn);
            r
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("an SQS event")
}

/// `response` as the runtime sends it to Lambda, checked to have the keys of AWS's sample partial batch response
/// and nothing else: a response Lambda could not read would fail (and retry) the whole batch.
pub fn batch_response_json(response: &SqsBatchResponse) -> Value {
    let sent = serde_json::to_value(response).expect("a batch response");
    let sample: Value = serde_json::from_str(SQS_BATCH_RESPONSE).expect("AWS's sample batch response");
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(keys(&sent), keys(&sample), "the batch response's keys: {sent}");
    for failure in sent["batchItemFailures"].as_array().expect("a list of failures") {
        assert_eq!(keys(failure), keys(&sample["batchItemFailures"][0]), "a failure's keys: {failure}");
    }
    sent
}
