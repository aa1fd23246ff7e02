//! The install-config check's cost (BENCHMARKS.md, "The reference installer"): compiling openshift-install's
//! schema (once per process, on its first install request) and checking one rendered install-config against it
//! (every install request), with the template's rendering beside it.
// criterion's macros define undocumented functions.
#![allow(missing_docs)]

use std::collections::BTreeMap;

use apiary_installer::schema::{Schema, CRD};
use apiary_installer::template::{render, Values};
use criterion::{criterion_group, criterion_main, Criterion};

const TEMPLATE: &str = include_str!("../../infra/demo-openshift-install-config.yaml");

fn benches(c: &mut Criterion) {
    let labels = BTreeMap::from([("team".to_owned(), "platform".to_owned())]);
    let parameters =
        BTreeMap::from([("workers".to_owned(), "2".to_owned()), ("machineCidr".to_owned(), "10.0.0.0/16".to_owned())]);
    let values = Values {
        cluster_name: "ocp-blue",
        base_domain: Some("demo.example.com"),
        labels: &labels,
        parameters: &parameters,
    };
    let mut group = c.benchmark_group("install-config");
    group.sample_size(20);
    group.bench_function("compile the schema", |b| b.iter(|| Schema::from_crd(CRD).map(|_| ())));
    group.bench_function("render the template", |b| b.iter(|| render(TEMPLATE, &values)));
    let schema = Schema::installer().expect("the schema");
    let mut doc: serde_json::Value =
        serde_saphyr::from_str(&render(TEMPLATE, &values).expect("rendered")).expect("yaml");
    doc["pullSecret"] = serde_json::json!("{\"auths\":{}}");
    group.bench_function("check an install-config", |b| b.iter(|| schema.check(&doc, 8)));
    group.finish();
}

criterion_group!(schema, benches);
criterion_main!(schema);
