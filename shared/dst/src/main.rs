//! `apiary-dst`: runs seeds of the whole-system simulation.

fn main() {}
