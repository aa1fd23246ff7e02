//! The EventBridge Scheduler adapter of the [`Schedules`] port: a pool's `schedules` as EventBridge Scheduler
//! schedules that enqueue a reconcile.
//!
//! A schedule only wakes the pool at a window's start; the planner works out which window is open from the pool
//! spec itself (and records the window's end as a wake-up), so a missed or late firing is caught up by the
//! next sweep. Schedule names are `<prefix><pool>-<index>`, shortened with a hash when longer than Scheduler's 64.

use apiary_planner::Schedule;
use async_trait::async_trait;
use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, SqsParameters, Target};
use aws_sdk_scheduler::Client;

use apiary_ports::messages::ReconcileMessage;
use apiary_ports::schedules::Schedules;
use apiary_ports::{Config, Result};

use crate::calls::count;

/// EventBridge Scheduler, in the `default` group.
#[derive(Debug, Clone)]
pub struct EventBridgeSchedules {
    client: Client,
    prefix: String,
    queue_arn: String,
    role_arn: String,
}

impl EventBridgeSchedules {
    /// Schedules targeting the reconcile queue of `config`.
    pub fn new(client: Client, config: &Config) -> Self {
        Self {
            client,
            prefix: config.schedule_prefix.clone(),
            queue_arn: config.reconcile_queue_arn.clone(),
            role_arn: config.scheduler_role_arn.clone(),
        }
    }

    fn stem(&self, pool: &str) -> String {
        let stem = format!("{}{pool}-", self.prefix);
        if stem.len() <= 60 {
            return stem;
        }
        let mut h: u32 = 0x811c_9dc5;
        for b in stem.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        format!("{}{h:08x}-", &stem[..51])
    }

    async fn existing(&self, stem: &str) -> Result<Vec<String>> {
        let mut names = vec![];
        let mut token = None;
        loop {
            count("scheduler:ListSchedules");
            let page = self
                .client
                .list_schedules()
                .name_prefix(stem)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| crate::error::aws("scheduler:ListSchedules", e))?;
            names.extend(page.schedules().iter().filter_map(|s| s.name().map(String::from)));
            token = page.next_token().map(String::from);
            if token.is_none() {
                break;
            }
        }
        // A prefix also matches longer pool names (`ci-` matches `ci-gpu-0`): keep our own indexes only.
        names.retain(|n| n.strip_prefix(stem).is_some_and(|i| i.parse::<usize>().is_ok()));
        Ok(names)
    }
}

/// EventBridge's six-field cron for a five-field Unix cron: day-of-week as names (Unix 0/7 = SUN), `?` in
/// whichever day field is left open, and any year.
pub fn eventbridge_cron(cron: &str) -> String {
    let f: Vec<&str> = cron.split_whitespace().collect();
    if f.len() != 5 {
        return format!("cron({cron})");
    }
    const DAYS: [&str; 8] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let dow: String = {
        let mut out = String::new();
        let mut digits = String::new();
        let flush = |digits: &mut String, out: &mut String| {
            if let Ok(n) = digits.parse::<usize>() {
                out.push_str(DAYS.get(n).copied().unwrap_or("SUN"));
            }
            digits.clear();
        };
        let mut after_slash = false;
        for ch in f[4].chars() {
            if ch.is_ascii_digit() && !after_slash {
                digits.push(ch);
                continue;
            }
            flush(&mut digits, &mut out);
            after_slash = ch == '/';
            out.push(ch);
        }
        flush(&mut digits, &mut out);
        out
    };
    let (dom, dow) = if f[4] == "*" { (f[2].to_owned(), "?".to_owned()) } else { ("?".to_owned(), dow) };
    format!("cron({} {} {dom} {} {dow} *)", f[0], f[1], f[3])
}

#[async_trait]
impl Schedules for EventBridgeSchedules {
    async fn sync(&self, pool: &str, schedules: &[Schedule]) -> Result<()> {
        let stem = self.stem(pool);
        let existing = self.existing(&stem).await?;
        let input = serde_json::to_string(&ReconcileMessage::new(pool, "schedule"))?;
        for (i, s) in schedules.iter().enumerate() {
            let name = format!("{stem}{i}");
            let target = Target::builder()
                .arn(&self.queue_arn)
                .role_arn(&self.role_arn)
                .input(&input)
                .sqs_parameters(SqsParameters::builder().message_group_id(pool).build())
                .build()
                .map_err(|e| crate::error::build("scheduler:CreateSchedule", e))?;
            let window = FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()
                .map_err(|e| crate::error::build("scheduler:CreateSchedule", e))?;
            let expression = eventbridge_cron(&s.cron);
            let description = format!("apiary pool {pool}: {}", s.name.as_deref().unwrap_or("schedule"));
            if existing.contains(&name) {
                count("scheduler:UpdateSchedule");
                self.client
                    .update_schedule()
                    .name(&name)
                    .schedule_expression(expression)
                    .schedule_expression_timezone(&s.time_zone)
                    .description(description)
                    .flexible_time_window(window)
                    .target(target)
                    .send()
                    .await
                    .map_err(|e| crate::error::aws("scheduler:UpdateSchedule", e))?;
            } else {
                count("scheduler:CreateSchedule");
                self.client
                    .create_schedule()
                    .name(&name)
                    .schedule_expression(expression)
                    .schedule_expression_timezone(&s.time_zone)
                    .description(description)
                    .flexible_time_window(window)
                    .target(target)
                    .send()
                    .await
                    .map_err(|e| crate::error::aws("scheduler:CreateSchedule", e))?;
            }
        }
        for name in existing {
            let index = name[stem.len()..].parse::<usize>().unwrap_or(usize::MAX);
            if index >= schedules.len() {
                count("scheduler:DeleteSchedule");
                self.client
                    .delete_schedule()
                    .name(&name)
                    .send()
                    .await
                    .map_err(|e| crate::error::aws("scheduler:DeleteSchedule", e))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::eventbridge_cron;

    #[test]
    fn unix_cron_becomes_eventbridge_cron() {
        assert_eq!(eventbridge_cron("0 8 * * 1-5"), "cron(0 8 ? * MON-FRI *)");
        assert_eq!(eventbridge_cron("30 6 1 * *"), "cron(30 6 1 * ? *)");
        assert_eq!(eventbridge_cron("0 */2 * * 0,6"), "cron(0 */2 ? * SUN,SAT *)");
        assert_eq!(eventbridge_cron("0 9 * * MON"), "cron(0 9 ? * MON *)");
    }
}
