//! Apiary's reference installer: OpenShift clusters installed by `openshift-install`, behind Apiary's webhook
//! provisioner contract (`shared/clouds/provisioner.openapi.json`).
//!
//! A platform team moving from Hive names, per pool, a release image, an install-config template and the pull
//! secret and SSH key by ARN ([`settings`]). For each cluster Apiary asks for, the installer renders the template
//! ([`template`]), checks the result against openshift-install's own schema ([`schema`]), and runs
//! `openshift-install create cluster` as a job where long jobs run ([`ports::Jobs`]), with the pool's extra
//! manifests ([`manifests`]) in `openshift/`; the install directory is kept
//! apart from its records. Once the job is done it answers with the cluster's infraId and outputs, its kubeconfig
//! and kubeadmin password stored as secrets tagged for the pool; a removal runs `openshift-install destroy
//! cluster` from the kept metadata ([`service`]). A request is answered only if signed, its id naming what it
//! asks, and not a replay ([`admission`]).

pub mod admission;
pub mod aws;
pub mod config;
pub mod credentials;
pub mod local;
pub mod manifests;
pub mod memory;
pub mod model;
pub mod outputs;
pub mod ports;
pub mod schema;
pub mod serve;
pub mod service;
pub mod template;
