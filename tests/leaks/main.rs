//! The one test that counts this process's file descriptors, threads and inotify watches
//! (`reload_leaks`): a binary of its own, so that no other test's sockets or threads blur
//! the counts.

#[path = "../support/mod.rs"]
mod support;

mod reload_leaks;
