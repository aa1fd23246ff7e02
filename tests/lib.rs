//! System tests live in `tests/system.rs`; this crate has no library code.
