//! The `apiary` command line: pools, claims and Hive ClusterPool imports against Apiary's claim API.
//!
//! The binary (`src/main.rs`) parses the arguments ([`args`]), connects ([`api`]) and runs a command
//! ([`commands`]); what it prints is made by [`render`], pure functions tested against golden files.

pub mod api;
pub mod apply;
pub mod args;
pub mod check;
pub mod commands;
pub mod document;
pub mod error;
pub mod hive;
pub mod render;
pub mod sign;
pub mod teardown;
