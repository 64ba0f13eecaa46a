//! Standard output for the subcommands' results.
//!
//! `println!` panics when the write fails, and Rust ignores SIGPIPE, so `graft schema |
//! head -1` died with a panic. Writes here return their error as [`StdoutError`] instead,
//! which lets `cli::main` tell a reader that went away (quiet) from a failing stdout (an
//! error), and from any other I/O error.

use std::fmt::Display;
use std::io::{self, Write as _};

/// A write to standard output failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output: {0}")]
pub struct StdoutError(#[source] io::Error);

impl StdoutError {
    /// The reader closed its end (`graft ... | head`): it has all it wanted, which is no
    /// failure of graft's.
    pub fn is_broken_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

/// Standard output, locked for one subcommand's results.
pub struct Stdout(io::StdoutLock<'static>);

impl Stdout {
    pub fn lock() -> Self {
        Self(io::stdout().lock())
    }

    /// Writes `bytes` and flushes them: whatever is still buffered when the process exits
    /// is flushed with its error ignored, so text without a final newline could be lost
    /// without a word.
    pub fn write(&mut self, bytes: impl AsRef<[u8]>) -> Result<(), StdoutError> {
        self.0
            .write_all(bytes.as_ref())
            .and_then(|()| self.0.flush())
            .map_err(StdoutError)
    }

    /// Writes `text` and a newline.
    pub fn line(&mut self, text: impl Display) -> Result<(), StdoutError> {
        self.write(format!("{text}\n"))
    }

    /// Writes `value` as pretty JSON and a newline, serialized whole first so that a write
    /// error is a [`StdoutError`] rather than a `serde_json` one.
    pub fn json_pretty(&mut self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value)?;
        bytes.push(b'\n');
        Ok(self.write(bytes)?)
    }

    /// Writes `value` as one line of JSON.
    pub fn json_line(&mut self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec(value)?;
        bytes.push(b'\n');
        Ok(self.write(bytes)?)
    }
}

/// Writes `bytes` to standard output.
pub fn print(bytes: impl AsRef<[u8]>) -> Result<(), StdoutError> {
    Stdout::lock().write(bytes)
}

/// Whether `error` is, or was caused by, a reader that closed standard output.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<StdoutError>()
            .is_some_and(StdoutError::is_broken_pipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_stdout_is_a_broken_pipe() {
        let stdout = |kind| anyhow::Error::new(StdoutError(io::Error::from(kind)));
        assert!(is_broken_pipe(&stdout(io::ErrorKind::BrokenPipe)));
        assert!(is_broken_pipe(
            &stdout(io::ErrorKind::BrokenPipe).context("printing the report")
        ));
        assert!(!is_broken_pipe(&stdout(io::ErrorKind::StorageFull)));
        // A pipe given as `--out` is not the reader of stdout going away.
        let file = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(!is_broken_pipe(&file));
    }
}
