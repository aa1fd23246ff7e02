//! The power function: steps clusters' power state machines (installs, hibernation and resume, with their
//! timeouts) a step at a time, and looks at every cluster of a pool in motion with one message, the pool's tick.
//!
//! A message names one cluster (a nudge, stepped by [`run`]), the pool's tick ([`tick`]), the reaper's pass
//! ([`reap`]), or a claim notification's delivery and the pass that finds one no writer sent ([`notice`]); [`handler`] reads each and hands it on. Every write is conditional on the revision read, and a
//! lost condition reads again ([`apiary_ports::retry`]); a duplicate or late message re-reads the stored state and
//! takes the step that state calls for. How the pieces fit is in docs/concepts.md ("How it runs").

mod credentials;
pub mod handler;
pub mod notice;
mod outcome;
mod platform;
pub mod reap;
mod run;
pub mod tick;

pub use handler::{handle, handle_each, power, respond};
pub use outcome::{Outcome, Received};
pub use tick::ensure_tick;
