//! `apiary stack delete`: a stack removed without leaving a machine behind. Its pools are drained through the API
//! first (each pool's clusters removed from their clouds, as `DELETE /pools/NAME` does), then the CloudFormation
//! stack is deleted; the table, kept by the stack (`DeletionPolicy: Retain`), is deleted only when asked.

use std::time::{Duration, Instant};

use crate::api::stack_output;
use crate::commands::{duration, out, Ctx};
use crate::error::{Exit, Failure, Result};

/// How often the pools and the stack are looked at while they go.
const POLL: Duration = Duration::from_secs(2);

impl Ctx {
    /// Drains every pool of the API, then deletes stack `name`, within `wait`; refuses while claims are held unless
    /// `end_claims`; deletes the kept table too when `delete_table`.
    pub async fn stack_delete(
        &self,
        config: &aws_config::SdkConfig,
        name: &str,
        end_claims: bool,
        delete_table: bool,
        wait: &str,
    ) -> Result<()> {
        let deadline = Instant::now() + duration("--wait", wait)?;
        let cfn = aws_sdk_cloudformation::Client::new(config);
        let table = stack_output(&cfn, name, "TableName").await?;
        let pools = self.pools().await?;
        let held = self.held_claims(&pools).await?;
        if !held.is_empty() && !end_claims {
            let mut failure = Failure::new(
                Exit::Conflict,
                format!("{} claims are held; nothing was deleted (--end-claims ends them)", held.len()),
            );
            failure.details = held.iter().map(|(pool, claim, said)| format!("{pool}/{claim} ({said})")).collect();
            return Err(failure);
        }
        // A pool being deleted keeps a claimed cluster until its claim ends: the claims are released first.
        for (pool, claim, _) in &held {
            self.api.call("DELETE", &format!("/pools/{pool}/claims/{claim}"), None).await?;
            out(&format!("claim {pool}/{claim}: released\n"));
        }
        for pool in &pools {
            self.api.call("DELETE", &format!("/pools/{pool}"), None).await?;
            out(&format!("pool {pool}: draining\n"));
        }
        loop {
            let left = self.pools().await?;
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Failure::new(
                    Exit::TimedOut,
                    format!("pools still draining: {} (the stack is not deleted)", left.join(", ")),
                ));
            }
            tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
        }
        out(&format!("every pool drained; deleting stack {name}\n"));
        cfn.delete_stack().stack_name(name).send().await.map_err(|e| aws_failure("deleting the stack", &e))?;
        loop {
            match stack_status(&cfn, name).await? {
                None => break,
                Some(status) if !status.ends_with("_IN_PROGRESS") => {
                    return Err(Failure::other(format!("stack {name}: {status}")));
                }
                Some(_) if Instant::now() >= deadline => {
                    return Err(Failure::new(Exit::TimedOut, format!("stack {name} is still being deleted")));
                }
                Some(_) => tokio::time::sleep(POLL.min(deadline - Instant::now())).await,
            }
        }
        out(&format!("stack {name} deleted\n"));
        match (table, delete_table) {
            (Some(table), true) => {
                let dynamodb = aws_sdk_dynamodb::Client::new(config);
                dynamodb
                    .update_table()
                    .table_name(&table)
                    .deletion_protection_enabled(false)
                    .send()
                    .await
                    .map_err(|e| aws_failure("turning the table's deletion protection off", &e))?;
                dynamodb
                    .delete_table()
                    .table_name(&table)
                    .send()
                    .await
                    .map_err(|e| aws_failure("deleting the table", &e))?;
                out(&format!("table {table} deleted\n"));
            }
            (Some(table), false) => out(&format!("table {table} kept, with its records (--delete-table deletes it)\n")),
            (None, _) => {}
        }
        Ok(())
    }

    /// The names of the pools the caller may see.
    async fn pools(&self) -> Result<Vec<String>> {
        let (_, answer) = self.api.call("GET", "/pools", None).await?;
        Ok(answer["pools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str().map(String::from))
            .collect())
    }

    /// The claims of `pools` not being released: each its pool, its name, and its phase and owner.
    async fn held_claims(&self, pools: &[String]) -> Result<Vec<(String, String, String)>> {
        let mut held = vec![];
        for pool in pools {
            let (_, answer) = self.api.call("GET", &format!("/pools/{pool}/claims"), None).await?;
            for claim in answer["claims"].as_array().into_iter().flatten() {
                let text = |k: &str| claim[k].as_str().unwrap_or_default().to_owned();
                if text("phase") != "Releasing" {
                    held.push((pool.clone(), text("name"), format!("{}, {}", text("phase"), text("owner"))));
                }
            }
        }
        Ok(held)
    }
}

/// Stack `name`'s status, `None` once it is gone.
async fn stack_status(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Result<Option<String>> {
    match cfn.describe_stacks().stack_name(name).send().await {
        Ok(answer) => Ok(answer
            .stacks()
            .first()
            .and_then(|s| s.stack_status().map(|st| st.as_str().to_owned()))
            .filter(|s| s != "DELETE_COMPLETE")),
        Err(e) if aws_sdk_cloudformation::error::DisplayErrorContext(&e).to_string().contains("does not exist") => {
            Ok(None)
        }
        Err(e) => Err(aws_failure("reading the stack", &e)),
    }
}

/// An AWS SDK error as one line: what was being done, the error and each of its sources.
pub(crate) fn aws_failure(doing: &str, e: &dyn std::error::Error) -> Failure {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    Failure::other(format!("{doing}: {text}"))
}
