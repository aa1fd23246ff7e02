//! What went wrong, as one line, and the exit code a CI script branches on.

use std::fmt;

/// The exit codes (`apiary --help` and docs/cli.md list them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Anything not below: the network, the service unavailable, an answer the command did not expect.
    Failure = 1,
    /// Bad arguments, a file that cannot be read or parsed, a field the API refused (400).
    Usage = 2,
    /// Not allowed: no AWS credentials, or the API refused the caller (401, 403).
    Forbidden = 3,
    /// No such pool or claim (404).
    NotFound = 4,
    /// The request contradicts what is stored (409): a claim of another principal, a pool being deleted.
    Conflict = 5,
    /// A wait ended before what it waited for (`claim --wait`, `pool delete --wait`).
    TimedOut = 6,
    /// `pool apply --diff`: applying the files would change pools (0: it would change nothing).
    Changes = 7,
}

/// The exit codes as `--help` shows them.
pub const EXIT_CODES: &str = "Exit codes: 0 done; 1 failure (network, service unavailable); 2 bad arguments, \
file or field (HTTP 400); 3 not allowed (no credentials, HTTP 401/403); 4 no such pool or claim (HTTP 404); \
5 conflict with stored state (HTTP 409); 6 a wait timed out; 7 pool apply --diff: the files would change pools.";

/// A failed command: one line for the terminal and its exit code. `details` are further lines (one per field the
/// API refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// The line that says what is wrong.
    pub message: String,
    /// One line per refused field, when there are several.
    pub details: Vec<String>,
}

impl Failure {
    /// A failure with exit code `exit`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self { exit, message: message.into(), details: vec![] }
    }

    /// Bad arguments or input (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// Exit 1.
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    /// The same failure with `context: ` before its message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for d in &self.details {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// A command's result.
pub type Result<T> = std::result::Result<T, Failure>;
