//! The cloud adapters against the fakes, in one test binary: each module links the same adapters, fakes and HTTP
//! stack, and one binary links them once. The log test and the calls test have binaries of their own: one installs
//! a subscriber, the other counts the process's calls.

#[path = "../support/mod.rs"]
mod support;

mod azure;
mod gcp;
mod kubernetes;
mod notify;
mod readiness;
mod vsphere;
mod webhook;
