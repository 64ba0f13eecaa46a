//! Where `graft serve`'s log lines are made and where they go: [`json`] writes
//! `--log-format json`'s lines, [`writer`] buffers every line in memory for a flusher
//! thread to write out, so a review's thread never makes a system call for its log line.

pub mod json;
pub mod writer;
