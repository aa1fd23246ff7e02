//! What a provisioned table would cost: DynamoDB's provisioned capacity under its auto scaling, against the units
//! each minute of the simulated weeks asks for.
//!
//! A provisioned table is billed for the capacity it has each hour, used or not; on demand, for the units it uses.
//! Used in full, provisioned capacity costs a little over a quarter of on demand's price, for reads and writes
//! alike, but only where the capacity follows the load. The template's auto scaling (target tracking,
//! [`Scaling`]) follows it as AWS documents it for DynamoDB:
//!
//! - Out: when the units used are over the target share of the capacity two minutes running, the capacity becomes
//!   what puts the last minute's use at the target, from the next minute.
//! - In: when they are under the target less 20 points fifteen minutes running, the same, but DynamoDB lets a table
//!   lower its capacity only four times a UTC day, and once more each hour without one.
//! - Between: a table keeps up to five minutes of the capacity it did not use (burst capacity) and spends it on a
//!   minute over its capacity; what that does not cover is throttled (the SDK retries it, later).
//!
//! Minutes are the grain: a burst inside a minute (a CI fan-out of hundreds of claims) is averaged over it, so
//! the throttling counted here is a floor. The table's `MinCapacity` is what serves such a burst at once.

/// The template's auto scaling of one dimension (the table's, or its `pools` index's, reads or writes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaling {
    /// The share of the capacity the units used are kept at (the template's `ProvisionedTargetUtilization`, 70 %
    /// unless set).
    pub target: f64,
    /// Units a second, at least (`ProvisionedMinCapacity`).
    pub min: f64,
    /// Units a second, at least, on the `pools` index (`ProvisionedIndexMinCapacity`): it holds the pool items
    /// alone.
    pub index_min: f64,
    /// Units a second, at most (`ProvisionedMaxCapacity`).
    pub max: f64,
    /// Minutes over the target before the capacity goes up.
    pub out_after: usize,
    /// Minutes under the target less [`Scaling::in_margin`] before it comes down.
    pub in_after: usize,
    /// How far under the target the units used must stay for it to come down.
    pub in_margin: f64,
    /// Seconds of unused capacity a table keeps for a burst.
    pub burst_seconds: f64,
}

impl Scaling {
    /// What the template sets by default: a target of 70 % (`ProvisionedTargetUtilization`), from 5 units a
    /// second (1 on the `pools` index) to 4 000.
    pub const TEMPLATE: Self = Self {
        target: 0.70,
        min: 5.0,
        index_min: 1.0,
        max: 4000.0,
        out_after: 2,
        in_after: 15,
        in_margin: 0.20,
        burst_seconds: 300.0,
    };

    /// The `pools` index's: the same but for its least capacity.
    pub fn index(&self) -> Self {
        Self { min: self.index_min, ..*self }
    }

    /// The highest target the template's `ProvisionedTargetUtilization` takes (DynamoDB's target tracking allows
    /// 20 % to 90 %).
    pub const FULLEST: f64 = 0.90;

    /// The capacity that puts `used` units a second at the target, in whole units within the bounds.
    fn fit(&self, used: f64) -> f64 {
        // (Less a hair, so that 42 units at 70 % is 60, not 61.)
        (used / self.target - 1e-9).ceil().clamp(self.min, self.max)
    }
}

/// Minutes in a UTC day.
const DAY: usize = 24 * 60;

/// What a dimension's capacity came to over the minutes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Provisioned {
    /// Capacity-hours billed: each minute's capacity for a sixtieth of an hour.
    pub unit_hours: f64,
    /// Units asked for that neither the capacity nor the burst capacity covered: throttled.
    pub throttled: f64,
    /// Units asked for.
    pub used: f64,
    /// The highest capacity, units a second.
    pub peak: f64,
    /// Times the capacity came down.
    pub decreases: usize,
}

/// The capacity auto scaling gives a dimension asked for `units` each minute (the first minute at the start of a
/// UTC day), starting at the least capacity.
pub fn provision(units: &[f64], s: &Scaling) -> Provisioned {
    let mut out = Provisioned::default();
    let mut capacity = s.min;
    let mut burst = capacity * s.burst_seconds;
    let (mut over, mut under) = (0usize, 0usize);
    let mut last_decrease: Option<usize> = None;
    let mut decreases_today = 0usize;
    for (minute, &asked) in units.iter().enumerate() {
        if minute % DAY == 0 {
            decreases_today = 0;
        }
        out.unit_hours += capacity / 60.0;
        out.used += asked;
        out.peak = out.peak.max(capacity);
        let spare = capacity * 60.0 - asked;
        if spare >= 0.0 {
            burst = (burst + spare).min(capacity * s.burst_seconds);
        } else {
            let covered = burst.min(-spare);
            burst -= covered;
            out.throttled += -spare - covered;
        }
        let used = asked / 60.0;
        let share = used / capacity;
        over = if share > s.target { over + 1 } else { 0 };
        under = if share < s.target - s.in_margin { under + 1 } else { 0 };
        if over >= s.out_after {
            capacity = capacity.max(s.fit(used));
            over = 0;
        } else if under >= s.in_after {
            let allowed = decreases_today < 4 || last_decrease.is_none_or(|at| minute - at >= 60);
            let lower = s.fit(used);
            if allowed && lower < capacity {
                capacity = lower;
                burst = burst.min(capacity * s.burst_seconds);
                last_decrease = Some(minute);
                decreases_today += 1;
                out.decreases += 1;
                under = 0;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{provision, Scaling, DAY};

    const S: Scaling = Scaling::TEMPLATE;

    #[test]
    fn a_steady_load_is_provisioned_at_the_target_share_after_two_minutes_over_it() {
        // 42 units a second: the least capacity (5) for the first two minutes, burst capacity spent, then 60.
        let p = provision(&[42.0 * 60.0; 60], &S);
        assert_eq!(p.peak, 60.0);
        let expected = (2.0 * 5.0 + 58.0 * 60.0) / 60.0;
        assert!((p.unit_hours - expected).abs() < 1e-9, "{}", p.unit_hours);
        // Two minutes at 37 units a second over the capacity, 1 500 units of burst to cover them.
        assert!((p.throttled - (2.0 * 37.0 * 60.0 - 1500.0)).abs() < 1e-9, "{}", p.throttled);
        assert_eq!(p.decreases, 0);
    }

    #[test]
    fn a_short_burst_is_served_from_the_capacity_left_unused() {
        // Ten units a second for an hour (capacity 15), then one minute at three times that: the five minutes
        // of unused capacity kept cover it.
        let mut units = vec![600.0; 60];
        units.push(1800.0);
        units.extend(vec![600.0; 10]);
        let p = provision(&units, &S);
        assert_eq!(p.throttled, 0.0);
        assert_eq!(p.peak, 15.0, "one minute over the target does not scale out");
    }

    #[test]
    fn the_capacity_comes_down_after_fifteen_quiet_minutes_and_at_most_once_an_hour_after_four_a_day() {
        // A day of five busy minutes (100 units a second) every `every` minutes, quiet (1 a second) between.
        let spikes = |every: usize| -> Vec<f64> {
            (0..DAY).map(|minute| if minute % every < 5 { 100.0 * 60.0 } else { 60.0 }).collect()
        };
        // Every ninety minutes: each fall comes more than an hour after the last decrease, so the capacity comes
        // down after each.
        assert_eq!(provision(&spikes(90), &S).decreases, 16);
        // Every half hour, each followed by fifteen quiet minutes at its 20th: four decreases (minutes 20, 50, 80,
        // 110), then one at each hour since the last (170, 230, ... 1 430): 26 in the day.
        let q = provision(&spikes(30), &S);
        assert_eq!(q.decreases, 26);
    }

    #[test]
    fn a_fuller_target_holds_less_capacity_and_leaves_less_room_for_a_rise() {
        // 63 units a second: 90 at 70 %, 70 at 90 %. From the second hour, one minute in five at 100 a second (one
        // minute over is no reason to scale out). At 70 % the 27 units a second left unused refill the burst
        // capacity faster than the rises spend it; at 90 % the 7 left do not, and by the end of the day it is spent.
        let units: Vec<f64> =
            (0..DAY).map(|m| if m >= 60 && m % 5 == 0 { 100.0 * 60.0 } else { 63.0 * 60.0 }).collect();
        let full = Scaling { target: Scaling::FULLEST, ..S };
        let (at_70, at_90) = (provision(&units, &S), provision(&units, &full));
        assert_eq!((at_70.peak, at_90.peak), (90.0, 70.0));
        assert!(at_90.unit_hours < 0.8 * at_70.unit_hours, "{} against {}", at_90.unit_hours, at_70.unit_hours);
        // The first two minutes, at the least capacity, throttle alike; the rises only at 90 %.
        let start = provision(&units[..60], &S).throttled;
        assert_eq!((at_70.throttled, provision(&units[..60], &full).throttled), (start, start));
        assert!(at_90.throttled > start, "{} against {start}", at_90.throttled);
    }

    #[test]
    fn the_capacity_stays_within_its_bounds() {
        let p = provision(&[0.0; 120], &S);
        assert_eq!(p.peak, S.min);
        assert!((p.unit_hours - 2.0 * S.min).abs() < 1e-9, "{}", p.unit_hours);
        let p = provision(&[1e7; 10], &S);
        assert_eq!(p.peak, S.max);
        assert!(p.throttled > 0.0);
    }
}
