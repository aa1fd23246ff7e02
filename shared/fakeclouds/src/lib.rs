//! Stateful fakes of the cloud REST APIs Apiary drives over HTTP, for its tests and for `make run`'s demo
//! pools (no emulator of these APIs exists to install). Each serves on 127.0.0.1 with the real request and
//! response shapes, machines with timed state transitions, small pages, injected faults and a request log.
//!
//! - [`gcp`]: Compute Engine and Google's token endpoint.
//! - [`azure`]: Azure Resource Manager (resource groups, deployments, VMs) and Entra ID's token endpoint.
//! - [`vsphere`]: vCenter's Automation REST API (sessions, inventory, clones, power, tools, tagging).
//! - [`cluster_api`]: the clusters' API servers (`/readyz`, nodes, ClusterOperators, Machines), for readiness
//!   checks, with [`kubelets`] whose certificates expire while their cluster is hibernated.
//! - [`webhook`]: a reference receiver of Apiary's webhook provisioner, installing on the fake Compute Engine.
//! - [`notifications`]: a reference receiver of a pool's claim notifications, verifying each signature.
//! - [`canary`]: the secrets they make, each unique and recognisable, for the tests' scan for leaked secrets.

pub mod azure;
pub mod canary;
pub mod cluster_api;
pub mod common;
pub mod gcp;
pub mod kubelets;
pub mod notifications;
pub mod server;
pub mod tls;
pub mod vsphere;
pub mod webhook;
