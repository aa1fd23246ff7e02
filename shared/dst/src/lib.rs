//! A deterministic simulation of the whole system, the way FoundationDB and TigerBeetle earn trust: the real
//! handlers of claim-api, reconcile, power and timeouts run on the in-memory ports ([`apiary_testkit`]) with a
//! virtual clock, while a seeded stream interleaves them call by call and injects the faults the cloud can
//! produce ([`faults`]). Invariants are checked after every step ([`invariants`]); a failing seed replays
//! exactly (`make dst SEED=…`).
//!
//! - [`sim`]: the driver, with Lambda's queue consumption and concurrency.
//! - [`installer`]: the reference OpenShift installer, its jobs on the virtual clock.
//! - [`workload`]: a seeded mix of pool edits, claims, releases, lifetimes, schedules and power requests.
//! - [`invariants`]: what must hold after every step, and once quiet.
//! - [`run()`]: one seed end to end: chaos with faults, then quiet until everything converges.

pub mod clouds;
pub mod faults;
pub mod installer;
pub mod invariants;
mod run;
pub mod sim;
pub mod workload;

pub use clouds::{SimClouds, FIRST_CERTIFICATES};
pub use faults::Faults;
pub use run::{run, settle, start, Failure, Report, RunConfig, BACKLOG_LIMIT};
pub use sim::{Options, Request, Sim};
