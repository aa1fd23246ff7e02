//! The cloud adapters against the fakes, in one test binary: each module links the same adapters, fakes and HTTP
//! stack, and one binary links them once. (The log test has a binary of its own: it installs a subscriber.)

#[path = "../support/mod.rs"]
mod support;

mod azure;
mod calls;
mod gcp;
mod readiness;
mod vsphere;
mod webhook;
