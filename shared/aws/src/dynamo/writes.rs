//! Conditional writes: one write as one PutItem or DeleteItem, several as one TransactWriteItems, each condition
//! as an expression; a lost condition is a conflict, a throttle is said as one.

use std::collections::HashMap;

use apiary_ports::store::{Cond, Write};
use apiary_ports::{Error, Result};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};

use crate::calls::count;

use super::*;

impl DynamoStore {
    pub(super) async fn write_one(&self, pool: &str, write: Write) -> Result<()> {
        match write {
            Write::Check(..) => self.transact(pool, vec![write]).await,
            Write::Append(ref event) => {
                count("dynamodb:PutItem");
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(encode_event(pool, event, &write.key())?))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| crate::error::aws("dynamodb:PutItem", e))
            }
            Write::Put(item, cond) => {
                let c = condition(&cond);
                count("dynamodb:PutItem");
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(encode(pool, &item)?))
                    .set_condition_expression(c.expression)
                    .set_expression_attribute_names(opt(c.names))
                    .set_expression_attribute_values(opt(c.values))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| write_error("dynamodb:PutItem", || format!("{pool}/{}: {cond:?}", sk(&item.key())), e))
            }
            Write::Delete(key, cond) => {
                let c = condition(&cond);
                count("dynamodb:DeleteItem");
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(pool, &key)))
                    .set_condition_expression(c.expression)
                    .set_expression_attribute_names(opt(c.names))
                    .set_expression_attribute_values(opt(c.values))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| write_error("dynamodb:DeleteItem", || format!("{pool}/{}: {cond:?}", sk(&key)), e))
            }
        }
    }

    pub(super) async fn transact(&self, pool: &str, writes: Vec<Write>) -> Result<()> {
        let mut items = Vec::with_capacity(writes.len());
        for w in &writes {
            let item = match w {
                Write::Put(item, cond) => {
                    let c = condition(cond);
                    let put = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(encode(pool, item)?))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().put(put).build()
                }
                Write::Delete(key, cond) => {
                    let c = condition(cond);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(pool, key)))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().delete(delete).build()
                }
                Write::Append(event) => {
                    let put = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(encode_event(pool, event, &w.key())?))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().put(put).build()
                }
                Write::Check(key, cond) => {
                    let c = condition(cond);
                    let check = ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(pool, key)))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().condition_check(check).build()
                }
            };
            items.push(item);
        }
        count("dynamodb:TransactWriteItems");
        match self.client.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(se)) if lost_condition(se.err()) => {
                Err(Error::Conflict(format!("{pool}: transaction of {} writes cancelled", writes.len())))
            }
            Err(e) => {
                let throttled = matches!(&e, SdkError::ServiceError(se) if throttled(se.err()));
                let mut err = crate::error::aws("dynamodb:TransactWriteItems", e);
                if let Error::Service { retryable, .. } = &mut err {
                    *retryable |= throttled;
                }
                Err(err)
            }
        }
    }
}

/// A condition expression with its names and values (none for [`Cond::Any`]).
pub(super) struct Condition {
    expression: Option<String>,
    names: HashMap<String, String>,
    values: Attrs,
}

/// The condition expression of `cond`: each must hold exactly when [`Cond::holds`] does (`tests/store.rs` checks
/// every one against the emulator).
pub(super) fn condition(cond: &Cond) -> Condition {
    let n = |pairs: &[(&str, &str)]| pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    let rev = |r: u64| ("#rev", AttributeValue::N(r.to_string()));
    let (expression, names, values): (&str, HashMap<String, String>, Vec<(&str, AttributeValue)>) = match cond {
        Cond::Absent => ("attribute_not_exists(PK)", HashMap::new(), vec![]),
        Cond::Rev(r) => ("#rev = :rev", n(&[("#rev", "rev")]), vec![(":rev", rev(*r).1)]),
        // Cond::holds: at this revision, unclaimed, and Running as Cluster::is_running means it (installed too).
        Cond::RevUnclaimedRunning(r) => (
            "#rev = :rev AND attribute_not_exists(#claim) AND attribute_exists(#installed) AND #power = :running",
            n(&[("#rev", "rev"), ("#claim", "claim"), ("#installed", "installedAt"), ("#power", "powerState")]),
            vec![(":rev", rev(*r).1), (":running", s("Running"))],
        ),
        Cond::RevPending(r) => (
            "#rev = :rev AND attribute_not_exists(#cluster)",
            n(&[("#rev", "rev"), ("#cluster", "cluster")]),
            vec![(":rev", rev(*r).1)],
        ),
        Cond::Holder(h) => ("#holder = :holder", n(&[("#holder", "holder")]), vec![(":holder", s(h.clone()))]),
        Cond::Any => ("", HashMap::new(), vec![]),
    };
    Condition {
        expression: (!expression.is_empty()).then(|| expression.to_owned()),
        names,
        values: values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

pub(super) fn opt<T>(m: HashMap<String, T>) -> Option<HashMap<String, T>> {
    (!m.is_empty()).then_some(m)
}

/// A failed single write: a lost condition is a [`Error::Conflict`] described by `what`, anything else an AWS error.
pub(super) fn write_error<E, R>(op: &'static str, what: impl FnOnce() -> String, e: SdkError<E, R>) -> Error
where
    E: std::error::Error + Send + Sync + 'static + aws_smithy_types::error::metadata::ProvideErrorMetadata,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match &e {
        SdkError::ServiceError(se) if se.err().code() == Some("ConditionalCheckFailedException") => {
            Error::Conflict(what())
        }
        _ => crate::error::aws(op, e),
    }
}

/// A transaction cancelled because a condition failed (or another transaction held an item: also a lost race).
pub(super) fn lost_condition(err: &TransactWriteItemsError) -> bool {
    match err {
        TransactWriteItemsError::TransactionCanceledException(e) => {
            e.cancellation_reasons()
                .iter()
                .any(|r| matches!(r.code(), Some("ConditionalCheckFailed") | Some("TransactionConflict")))
                || e.cancellation_reasons().is_empty()
        }
        _ => false,
    }
}

/// A transaction cancelled because an item's partition was past its throughput (a burst of claims on one pool):
/// nothing was written, and the same transaction may be tried again.
pub(super) fn throttled(err: &TransactWriteItemsError) -> bool {
    match err {
        TransactWriteItemsError::TransactionCanceledException(e) => e.cancellation_reasons().iter().any(|r| {
            matches!(
                r.code(),
                Some("ThrottlingError") | Some("ProvisionedThroughputExceeded") | Some("RequestLimitExceeded")
            )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::error::TransactionCanceledException;
    use aws_sdk_dynamodb::types::CancellationReason;

    use super::*;

    fn cancelled(codes: &[&str]) -> TransactWriteItemsError {
        let reasons = codes.iter().map(|c| CancellationReason::builder().code(*c).build()).collect();
        TransactWriteItemsError::TransactionCanceledException(
            TransactionCanceledException::builder().set_cancellation_reasons(Some(reasons)).build(),
        )
    }

    /// DynamoDB names each item's reason, `None` for the items that were fine.
    #[test]
    fn a_cancelled_transaction_is_a_lost_race_or_a_throttle_by_its_reasons() {
        let race = cancelled(&["None", "ConditionalCheckFailed"]);
        assert!(lost_condition(&race) && !throttled(&race));
        let busy = cancelled(&["ThrottlingError", "None"]);
        assert!(throttled(&busy) && !lost_condition(&busy));
        let invalid = cancelled(&["ValidationError"]);
        assert!(!throttled(&invalid) && !lost_condition(&invalid));
    }
}
