//! `apiary stack check`: whether a deployed stack can work, asked of the account itself.
//!
//! - **Every call allowed.** Each function's role is put to IAM's policy simulator (SimulatePrincipalPolicy) for
//!   every call the function makes: [`CALLS`], `infra/function-calls.json`, the list `make test` holds to the calls
//!   the functions made under their own roles (infra/role_check.py), so it is neither longer nor shorter than what
//!   the code does. Each call is asked on the stack's own resource ARNs, with the condition keys the roles use (the
//!   tags a pool's instances and secrets carry, the sweep item's leading key, the service a role is passed to).
//! - **Health.** The API answers `/version`; the queues' depth and their dead letters; the sweep's last full pass;
//!   the stack's alarms in ALARM.
//!
//! Every finding is a row; the command exits 1 when any says a problem.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::commands::{compatibility, Ctx};
use crate::error::{Failure, Result};
use crate::teardown::aws_failure as aws;

/// Every call each function makes, by the kind of resource it is made on.
pub const CALLS: &str = include_str!("../../infra/function-calls.json");

/// The role output of each function.
const ROLES: [(&str, &str); 4] = [
    ("claim-api", "ClaimApiRoleArn"),
    ("reconcile", "ReconcileRoleArn"),
    ("power", "PowerRoleArn"),
    ("timeouts", "TimeoutsRoleArn"),
];

/// The condition keys that hold a list of values (IAM's simulator takes them as `stringList`).
const MULTIVALUED: [&str; 2] = ["dynamodb:LeadingKeys", "aws:TagKeys"];

/// What a pool's resources carry, as the check names them.
const POOL: &str = "apiary-check";

/// One line of `infra/function-calls.json`.
#[derive(Debug, Deserialize)]
struct Listed {
    resource: String,
    actions: Vec<String>,
}

/// One finding: what was looked at, whether it is as it should be, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was looked at (`power: ec2:StartInstances on instance`, `queue power-dlq`).
    pub what: String,
    /// Whether it is as it should be.
    pub ok: bool,
    /// What was seen.
    pub said: String,
}

impl Finding {
    fn new(what: impl Into<String>, ok: bool, said: impl Into<String>) -> Self {
        Finding { what: what.into(), ok, said: said.into() }
    }
}

/// The deployed stack, as CloudFormation describes it.
#[derive(Debug, Clone, Default)]
pub struct Stack {
    /// Its name.
    pub name: String,
    /// Its partition, region and account (from its id).
    pub partition: String,
    /// Its region.
    pub region: String,
    /// Its account.
    pub account: String,
    /// Its outputs.
    pub outputs: HashMap<String, String>,
    /// Its parameters.
    pub parameters: HashMap<String, String>,
}

impl Stack {
    fn output(&self, key: &str) -> Result<&str> {
        self.outputs.get(key).map(String::as_str).ok_or_else(|| {
            Failure::other(format!("stack {} has no output {key}: is it an Apiary stack of this release?", self.name))
        })
    }

    fn arn(&self, service: &str, account: &str, resource: &str) -> String {
        format!("arn:{}:{service}:{}:{account}:{resource}", self.partition, self.region)
    }
}

/// A request's condition keys and their values, as IAM's simulator takes them.
pub type Context = Vec<(String, Vec<String>)>;

/// The ARN a call of `kind` is asked on, and the request's condition keys, for `stack`; `None` for a kind that
/// needs what the stack does not have (member roles without `MemberAccountIds`).
pub fn resource(stack: &Stack, kind: &str) -> Result<Option<(String, Context)>> {
    let one = |k: &str, v: &str| (k.to_owned(), vec![v.to_owned()]);
    let table = || -> Result<String> {
        Ok(stack.arn("dynamodb", &stack.account, &format!("table/{}", stack.output("TableName")?)))
    };
    let queue = |url: &str| -> String {
        let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        stack.arn("sqs", &stack.account, name)
    };
    let tagged = |service: &str| {
        vec![one("aws:ResourceTag/apiary:pool", POOL), one(&format!("{service}:ResourceTag/apiary:pool"), POOL)]
    };
    let ec2 = |what: &str| stack.arn("ec2", &stack.account, &format!("{what}/*"));
    Ok(Some(match kind {
        "*" => ("*".into(), vec![]),
        "table" => (table()?, vec![one("dynamodb:LeadingKeys", &format!("POOL#{POOL}"))]),
        "sweep-item" => (table()?, vec![one("dynamodb:LeadingKeys", "SWEEP")]),
        k if k.starts_with("index/") => (format!("{}/{k}", table()?), vec![]),
        "reconcile-queue" => (stack.output("ReconcileQueueArn")?.to_owned(), vec![]),
        "power-queue" => (queue(stack.output("PowerQueueUrl")?), vec![]),
        "schedule" => {
            let name = format!("{}{POOL}", stack.output("SchedulePrefix")?);
            (stack.arn("scheduler", &stack.account, &format!("schedule/default/{name}")), vec![])
        }
        "scheduler-role" => {
            (stack.output("SchedulerRoleArn")?.to_owned(), vec![one("iam:PassedToService", "scheduler.amazonaws.com")])
        }
        "instance" => (stack.arn("ec2", &stack.account, "instance/i-0a1b2c3d4e5f60718"), tagged("ec2")),
        "new-instance" => (
            ec2("instance"),
            vec![
                one("aws:RequestTag/apiary:pool", POOL),
                one("aws:RequestTag/apiary:cluster", &format!("{POOL}-1")),
                ("aws:TagKeys".into(), vec!["apiary:cluster".into(), "apiary:pool".into()]),
                one("ec2:CreateAction", "RunInstances"),
            ],
        ),
        "image" => (stack.arn("ec2", "", "image/ami-0123456789abcdef0"), vec![]),
        "subnet" | "network-interface" | "security-group" | "volume" | "key-pair" | "launch-template" => {
            (ec2(kind), vec![])
        }
        "secret" => {
            let mut context = tagged("secretsmanager");
            for service in ["aws", "secretsmanager"] {
                context.push(one(&format!("{service}:ResourceTag/apiary"), "true"));
                context.push(one(&format!("{service}:ResourceTag/apiary:pools"), POOL));
            }
            (stack.arn("secretsmanager", &stack.account, &format!("secret:{POOL}-AbCdEf")), context)
        }
        "member-role" => {
            let accounts = stack.parameters.get("MemberAccountIds").map(String::as_str).unwrap_or_default();
            // A list parameter (the emulator writes an empty one as `['']`): its first account id.
            let account_id = |a: &&str| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit());
            let mut ids = accounts.split(',').map(|a| a.trim_matches(|c: char| "[]'\" ".contains(c)));
            let Some(member) = ids.find(account_id) else { return Ok(None) };
            let pattern = stack.parameters.get("MemberRoleNamePattern").map_or("apiary-member-*", String::as_str);
            let role = format!("arn:{}:iam::{member}:role/{}", stack.partition, pattern.replace('*', "check"));
            (role, vec![one("aws:ResourceAccount", member)])
        }
        other => return Err(Failure::other(format!("infra/function-calls.json: unknown resource kind {other:?}"))),
    }))
}

/// The calls each function makes, as [`CALLS`] lists them.
fn listed() -> Result<BTreeMap<String, Vec<Listed>>> {
    let mut all: BTreeMap<String, Value> =
        serde_json::from_str(CALLS).map_err(|e| Failure::other(format!("infra/function-calls.json: {e}")))?;
    ROLES
        .iter()
        .map(|(function, _)| {
            let entries = all.remove(*function).unwrap_or(Value::Null);
            let entries: Vec<Listed> = serde_json::from_value(entries)
                .map_err(|e| Failure::other(format!("infra/function-calls.json: {function}: {e}")))?;
            Ok(((*function).to_owned(), entries))
        })
        .collect()
}

/// Reads stack `name`: outputs, parameters, partition, region and account.
async fn describe(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Result<Stack> {
    // A stack that does not exist, or may not be read, fails as for every command that names a stack.
    let found = crate::api::describe_stack(cfn, name).await?;
    let id = found.stack_id().unwrap_or_default();
    let parts: Vec<&str> = id.splitn(6, ':').collect();
    let [_, partition, _, region, account, _] = parts.as_slice() else {
        return Err(Failure::other(format!("stack {name}: its id {id:?} is not an ARN")));
    };
    Ok(Stack {
        name: name.to_owned(),
        partition: (*partition).to_owned(),
        region: (*region).to_owned(),
        account: (*account).to_owned(),
        outputs: found
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect(),
        parameters: found
            .parameters()
            .iter()
            .filter_map(|p| Some((p.parameter_key()?.to_owned(), p.parameter_value().unwrap_or_default().to_owned())))
            .collect(),
    })
}

/// Each function's calls put to IAM's policy simulator.
async fn roles(iam: &aws_sdk_iam::Client, stack: &Stack) -> Result<Vec<Finding>> {
    let listed = listed()?;
    let mut findings = vec![];
    for (function, output) in ROLES {
        let role = stack.output(output)?;
        for entry in &listed[function] {
            let what = format!("{function}: {} on {}", entry.actions.join(", "), entry.resource);
            let Some((arn, context)) = resource(stack, &entry.resource)? else {
                findings.push(Finding::new(what, true, "not asked: the stack names no MemberAccountIds"));
                continue;
            };
            let mut ask = iam.simulate_principal_policy().policy_source_arn(role).resource_arns(&arn);
            for action in &entry.actions {
                ask = ask.action_names(action);
            }
            for (key, values) in &context {
                let kind = if MULTIVALUED.contains(&key.as_str()) {
                    ContextKeyTypeEnum::StringList
                } else {
                    ContextKeyTypeEnum::String
                };
                let entry = ContextEntry::builder()
                    .context_key_name(key)
                    .set_context_key_values(Some(values.clone()))
                    .context_key_type(kind)
                    .build();
                ask = ask.context_entries(entry);
            }
            let answer = ask.send().await.map_err(|e| aws(&format!("simulating {function}'s role"), &e))?;
            let refused: Vec<String> = answer
                .evaluation_results()
                .iter()
                .filter(|r| r.eval_decision().as_str() != "allowed")
                .map(|r| format!("{} {}", r.eval_action_name(), r.eval_decision().as_str()))
                .collect();
            findings.push(match refused.is_empty() {
                true => Finding::new(what, true, "allowed"),
                false => Finding::new(what, false, format!("{} on {arn}: the role lacks it", refused.join(", "))),
            });
        }
    }
    Ok(findings)
}

/// The queues' depth; a dead letter is a problem.
async fn queues(sqs: &aws_sdk_sqs::Client, stack: &Stack) -> Result<Vec<Finding>> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let reconcile = stack.output("ReconcileQueueUrl")?.to_owned();
    let power = stack.output("PowerQueueUrl")?.to_owned();
    let dead = |url: &str, queue: &str, dlq: &str| url.replacen(queue, dlq, 1);
    let name = &stack.name;
    let queues = [
        ("reconcile", reconcile.clone(), false),
        ("power", power.clone(), false),
        (
            "reconcile dead letters",
            dead(&reconcile, &format!("{name}-reconcile.fifo"), &format!("{name}-reconcile-dlq.fifo")),
            true,
        ),
        ("power dead letters", dead(&power, &format!("{name}-power"), &format!("{name}-power-dlq")), true),
    ];
    let mut findings = vec![];
    for (what, url, dead_letters) in queues {
        let answer = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await;
        let finding = match answer {
            Err(e) => Finding::new(format!("queue {what}"), false, aws(&url, &e).message),
            Ok(a) => {
                let count = |n: &A| a.attributes().and_then(|m| m.get(n)).and_then(|v| v.parse::<u64>().ok());
                let (waiting, in_flight) =
                    (count(&A::ApproximateNumberOfMessages), count(&A::ApproximateNumberOfMessagesNotVisible));
                let (waiting, in_flight) = (waiting.unwrap_or(0), in_flight.unwrap_or(0));
                match dead_letters && waiting + in_flight > 0 {
                    true => Finding::new(
                        format!("queue {what}"),
                        false,
                        format!("{} messages a function gave up on: see docs/operations.md", waiting + in_flight),
                    ),
                    false => Finding::new(
                        format!("queue {what}"),
                        true,
                        format!("{waiting} waiting, {in_flight} being handled"),
                    ),
                }
            }
        };
        findings.push(finding);
    }
    Ok(findings)
}

/// The sweep's last full pass: overdue past twice `FullSweepSeconds` and a minute.
async fn sweep(dynamodb: &aws_sdk_dynamodb::Client, stack: &Stack) -> Result<Finding> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let every: i64 = stack.parameters.get("FullSweepSeconds").and_then(|s| s.parse().ok()).unwrap_or(600);
    let answer = dynamodb
        .get_item()
        .table_name(stack.output("TableName")?)
        .key("PK", AttributeValue::S("SWEEP".into()))
        .key("SK", AttributeValue::S("SWEEP".into()))
        .consistent_read(true)
        .send()
        .await;
    let last = match answer {
        Err(e) => return Ok(Finding::new("sweep", false, aws("reading the sweep's item", &e).message)),
        Ok(a) => a.item().and_then(|i| i.get("lastFullAt")).and_then(|v| v.as_s().ok()).cloned(),
    };
    let Some(last) = last else {
        return Ok(Finding::new("sweep", false, "no full pass recorded yet (the sweep runs every minute)"));
    };
    let at = chrono::DateTime::parse_from_rfc3339(&last).map_err(|e| Failure::other(format!("sweep: {last}: {e}")))?;
    let age = chrono::Utc::now().signed_duration_since(at).num_seconds();
    let ok = age <= 2 * every + 60;
    let said = format!("last full pass {age} s ago (one every {every} s)");
    Ok(Finding::new("sweep", ok, if ok { said } else { format!("{said}: is the sweep's schedule enabled?") }))
}

/// The stack's alarms in ALARM.
async fn alarms(cloudwatch: &aws_sdk_cloudwatch::Client, stack: &Stack) -> Result<Vec<Finding>> {
    let answer = cloudwatch
        .describe_alarms()
        .alarm_name_prefix(format!("{}-", stack.name))
        .state_value(aws_sdk_cloudwatch::types::StateValue::Alarm)
        .send()
        .await
        .map_err(|e| aws("reading the stack's alarms", &e))?;
    Ok(alarm_findings(answer.metric_alarms()))
}

/// A problem for each alarm in ALARM, with CloudWatch's reason; one row saying so when there is none.
pub fn alarm_findings(firing: &[aws_sdk_cloudwatch::types::MetricAlarm]) -> Vec<Finding> {
    if firing.is_empty() {
        return vec![Finding::new("alarms", true, "none in ALARM")];
    }
    firing
        .iter()
        .map(|a| {
            let reason = a.state_reason().unwrap_or_default();
            Finding::new(format!("alarm {}", a.alarm_name().unwrap_or_default()), false, reason)
        })
        .collect()
}

impl Ctx {
    /// `apiary stack check NAME`.
    pub async fn stack_check(&self, config: &aws_config::SdkConfig, name: &str) -> Result<()> {
        let cfn = aws_sdk_cloudformation::Client::new(config);
        let stack = describe(&cfn, name).await?;
        let mut findings = vec![];
        let ours = env!("CARGO_PKG_VERSION");
        findings.push(match self.api.send("GET", "/version", None).await {
            Ok((200, body)) => {
                let version = body["version"].as_str().unwrap_or("?").to_owned();
                Finding::new("API /version", true, format!("{version}; {}", compatibility(ours, Some(&version))))
            }
            Ok((status, body)) => Finding::new("API /version", false, format!("{status}: {body}")),
            Err(e) => Finding::new("API /version", false, e.message),
        });
        findings.extend(roles(&aws_sdk_iam::Client::new(config), &stack).await?);
        findings.extend(queues(&aws_sdk_sqs::Client::new(config), &stack).await?);
        findings.push(sweep(&aws_sdk_dynamodb::Client::new(config), &stack).await?);
        findings.extend(alarms(&aws_sdk_cloudwatch::Client::new(config), &stack).await?);
        let problems = findings.iter().filter(|f| !f.ok).count();
        let value = json!({
            "stack": name,
            "problems": problems,
            "findings": findings.iter().map(|f| json!({"what": f.what, "ok": f.ok, "said": f.said})).collect::<Vec<_>>(),
        });
        self.show(&value, || {
            let mut table = crate::render::table(&["", "WHAT", "SEEN"]);
            for f in &findings {
                table.add_row(vec![if f.ok { "ok" } else { "PROBLEM" }, f.what.as_str(), f.said.as_str()]);
            }
            Ok(format!("{table}\n"))
        })?;
        match problems {
            0 => Ok(()),
            n => Err(Failure::other(format!("stack {name}: {n} problem(s) above"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack() -> Stack {
        let outputs = [
            ("TableName", "apiary-state"),
            ("ReconcileQueueArn", "arn:aws:sqs:eu-west-1:111122223333:apiary-reconcile.fifo"),
            ("PowerQueueUrl", "https://sqs.eu-west-1.amazonaws.com/111122223333/apiary-power"),
            ("SchedulePrefix", "apiary-"),
            ("SchedulerRoleArn", "arn:aws:iam::111122223333:role/apiary-SchedulerRole-X"),
        ];
        Stack {
            name: "apiary".into(),
            partition: "aws".into(),
            region: "eu-west-1".into(),
            account: "111122223333".into(),
            outputs: outputs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            parameters: HashMap::new(),
        }
    }

    #[test]
    fn every_listed_kind_has_an_arn_of_the_stack_and_the_keys_its_statement_tests() {
        let s = stack();
        for (function, entries) in listed().expect("the list") {
            for entry in entries {
                let found = resource(&s, &entry.resource).expect("a known kind");
                if entry.resource == "member-role" {
                    assert!(found.is_none(), "no member accounts, nothing to ask");
                    continue;
                }
                let (arn, _) = found.expect("an ARN");
                assert!(arn == "*" || arn.starts_with("arn:aws:"), "{function}: {arn}");
            }
        }
        let (arn, context) = resource(&s, "sweep-item").expect("kind").expect("arn");
        assert_eq!(arn, "arn:aws:dynamodb:eu-west-1:111122223333:table/apiary-state");
        assert_eq!(context, [("dynamodb:LeadingKeys".to_owned(), vec!["SWEEP".to_owned()])]);
        let (arn, _) = resource(&s, "power-queue").expect("kind").expect("arn");
        assert_eq!(arn, "arn:aws:sqs:eu-west-1:111122223333:apiary-power");
        let (arn, context) = resource(&s, "instance").expect("kind").expect("arn");
        assert!(arn.starts_with("arn:aws:ec2:eu-west-1:111122223333:instance/i-"), "{arn}");
        assert!(context.iter().any(|(k, _)| k == "aws:ResourceTag/apiary:pool"), "{context:?}");
        let mut members = s.clone();
        members.parameters.insert("MemberAccountIds".into(), "['']".into());
        assert!(resource(&members, "member-role").expect("kind").is_none(), "an empty list names no account");
        members.parameters.insert("MemberAccountIds".into(), "444455556666,777788889999".into());
        let (arn, context) = resource(&members, "member-role").expect("kind").expect("arn");
        assert_eq!(arn, "arn:aws:iam::444455556666:role/apiary-member-check");
        assert_eq!(context, [("aws:ResourceAccount".to_owned(), vec!["444455556666".to_owned()])]);
        assert!(resource(&s, "bucket").is_err(), "an unknown kind is an error, not a pass");
    }

    #[test]
    fn an_alarm_in_alarm_is_a_problem_with_its_reason() {
        assert_eq!(alarm_findings(&[]), [Finding::new("alarms", true, "none in ALARM")]);
        let firing = aws_sdk_cloudwatch::types::MetricAlarm::builder()
            .alarm_name("apiary-power-dead-letters")
            .state_value(aws_sdk_cloudwatch::types::StateValue::Alarm)
            .state_reason("Threshold Crossed: 1 datapoint [3.0] was greater than the threshold (0.0).")
            .build();
        let found = alarm_findings(&[firing]);
        assert_eq!(found.len(), 1);
        assert!(!found[0].ok);
        assert_eq!(found[0].what, "alarm apiary-power-dead-letters");
        assert!(found[0].said.contains("Threshold Crossed"), "{:?}", found[0]);
    }
}
