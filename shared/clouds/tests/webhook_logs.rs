//! The webhook adapter's log lines, in a test binary of their own: the subscriber that captures them is this
//! thread's, and no other test's events interleave with (or race) its callsites.

mod support;

use std::sync::Arc;

use apiary_planner::power::Install;
use support::installer::{World, INSTALL, KEY};

/// Every line the adapter logs while it installs, fails on a wrong or garbled key and removes, at every level:
/// the signing key appears in none.
#[test]
fn the_signing_key_never_reaches_a_log_line() {
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber =
        tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(move || writer.clone()).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let wrong = "whsec_bm90IHRoZSBrZXkgdGhlIHJlY2VpdmVyIGhvbGRz";
    runtime.block_on(async {
        let mut w = World::new(KEY).await;
        w.machinery.provision(w.target()).await.expect("put");
        w.later(INSTALL);
        assert!(matches!(w.install_state().await, Install::Installed { .. }));
        w.machinery.deprovision(w.target()).await.expect("delete");
        let refused = World::new(wrong).await;
        refused.machinery.provision(refused.target()).await.expect_err("refused");
    });
    let text = String::from_utf8_lossy(&lines.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    assert!(text.contains("credential refused"), "the refusal was logged: {text}");
    for key in [KEY, wrong] {
        assert!(!text.contains(key.trim_start_matches("whsec_")), "a key reached the log: {text}");
    }
}
