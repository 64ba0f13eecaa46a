//! Where `graft serve` writes its log lines: into a buffer in memory, which a flusher
//! thread writes to stdout every [`FLUSH_EVERY`], so a review's thread never makes a
//! system call for its log line nor wakes another thread.
//!
//! Writing each line to stdout from the review's thread cost a write(2) per review;
//! queueing it to a writer thread instead cost a thread wake per review whenever the
//! server was not saturated. With the buffer, one write(2) carries every line of the
//! last [`FLUSH_EVERY`] (or of [`BUFFER_BYTES`], when that fills first: the logging thread
//! then writes it itself). Nothing is dropped; warn and error lines are written at once;
//! dropping the [`Flusher`] writes out what is left.

use std::io::{self, BufWriter, Write};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

/// How long an info line may wait in the buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// The buffer's size: about 160 lines of a review's log.
pub const BUFFER_BYTES: usize = 64 * 1024;

/// The log's buffer in front of `W` (stdout), shared by every logging thread and the
/// flusher.
pub struct LogBuffer<W: Write>(Arc<Mutex<BufWriter<W>>>);

impl<W: Write> Clone for LogBuffer<W> {
    fn clone(&self) -> Self {
        LogBuffer(Arc::clone(&self.0))
    }
}

impl<W: Write> LogBuffer<W> {
    fn lock(&self) -> MutexGuard<'_, BufWriter<W>> {
        // A panic while holding the lock leaves whole lines in the buffer (a line is
        // written under one lock): it stays usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Creates the buffer in front of stdout and starts its flusher thread.
pub fn start() -> io::Result<(LogBuffer<io::Stdout>, Flusher)> {
    start_with(io::stdout(), FLUSH_EVERY)
}

/// [`start`] for any output, flushed every `every`.
fn start_with<W: Write + Send + 'static>(
    output: W,
    every: Duration,
) -> io::Result<(LogBuffer<W>, Flusher)> {
    let buffer = LogBuffer(Arc::new(Mutex::new(BufWriter::with_capacity(
        BUFFER_BYTES,
        output,
    ))));
    let (stop, stopped) = mpsc::channel::<()>();
    let flushed = buffer.clone();
    let thread = std::thread::Builder::new()
        .name("graft-log".to_string())
        .spawn(move || {
            loop {
                let stopping =
                    !matches!(stopped.recv_timeout(every), Err(RecvTimeoutError::Timeout));
                // Nowhere to report a failing stdout: the next flush tries again.
                let _ = flushed.lock().flush();
                if stopping {
                    return;
                }
            }
        })?;
    Ok((
        buffer,
        Flusher {
            stop: Some(stop),
            thread: Some(thread),
        },
    ))
}

/// Stops the flusher thread when dropped, after it has written out the buffer.
pub struct Flusher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One log line's writer: the line goes into the buffer under one lock, so lines from
/// different threads never interleave; `urgent` lines are written out at once.
pub struct LineWriter<'a, W: Write> {
    buffer: &'a LogBuffer<W>,
    urgent: bool,
}

impl<W: Write> Write for LineWriter<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut buffer = self.buffer.lock();
        buffer.write_all(bytes)?;
        if self.urgent {
            buffer.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.buffer.lock().flush()
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for LogBuffer<W> {
    type Writer = LineWriter<'a, W>;

    fn make_writer(&'a self) -> LineWriter<'a, W> {
        LineWriter {
            buffer: self,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter<'a, W> {
        LineWriter {
            buffer: self,
            urgent: *meta.level() <= tracing::Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// An output that keeps what is written to it, counts the writes, and says so
    /// on its channel, when it has one.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<(Vec<u8>, usize)>>, Option<mpsc::Sender<()>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let mut sink = self.0.lock().unwrap();
            sink.0.extend_from_slice(bytes);
            sink.1 += 1;
            if let Some(written) = &self.1 {
                let _ = written.send(());
            }
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().0.clone()).unwrap()
        }

        fn writes(&self) -> usize {
            self.0.lock().unwrap().1
        }
    }

    fn line(buffer: &LogBuffer<Sink>, level: &'static tracing::Metadata<'static>, text: &str) {
        buffer
            .make_writer_for(level)
            .write_all(text.as_bytes())
            .unwrap();
    }

    // Metadata of a callsite at each level, for `make_writer_for`.
    fn info() -> &'static tracing::Metadata<'static> {
        tracing::info_span!("info").metadata().unwrap()
    }

    fn warn() -> &'static tracing::Metadata<'static> {
        tracing::warn_span!("warn").metadata().unwrap()
    }

    fn error() -> &'static tracing::Metadata<'static> {
        tracing::error_span!("error").metadata().unwrap()
    }

    // A flush interval no test waits for: only `drop` and urgent lines write.
    const NEVER: Duration = Duration::from_secs(3600);

    #[test]
    fn info_lines_wait_in_the_buffer_and_dropping_the_flusher_writes_them_out() {
        let sink = Sink::default();
        let (buffer, flusher) = start_with(sink.clone(), NEVER).unwrap();
        line(&buffer, info(), "one\n");
        line(&buffer, info(), "two\n");
        assert_eq!(sink.text(), "");
        drop(flusher);
        assert_eq!(sink.text(), "one\ntwo\n");
        assert_eq!(sink.writes(), 1, "both lines in one write");
    }

    #[test]
    fn warn_and_error_lines_are_written_at_once_with_what_came_before() {
        let sink = Sink::default();
        let (buffer, _flusher) = start_with(sink.clone(), NEVER).unwrap();
        line(&buffer, info(), "before\n");
        line(&buffer, warn(), "warned\n");
        assert_eq!(sink.text(), "before\nwarned\n");
        line(&buffer, error(), "failed\n");
        assert_eq!(sink.text(), "before\nwarned\nfailed\n");
    }

    #[test]
    fn the_flusher_writes_info_lines_on_its_own() {
        let (written, write) = mpsc::channel();
        let sink = Sink(Arc::default(), Some(written));
        let (buffer, _flusher) = start_with(sink.clone(), Duration::from_millis(1)).unwrap();
        line(&buffer, info(), "soon\n");
        write
            .recv_timeout(Duration::from_secs(10))
            .expect("never flushed");
        assert_eq!(sink.text(), "soon\n");
    }

    #[test]
    fn a_full_buffer_is_written_by_the_logging_thread() {
        let sink = Sink::default();
        let (buffer, _flusher) = start_with(sink.clone(), NEVER).unwrap();
        let text = format!("{}\n", "x".repeat(1023));
        for _ in 0..(BUFFER_BYTES / 1024 + 1) {
            line(&buffer, info(), &text);
        }
        assert_eq!(
            sink.text().len(),
            BUFFER_BYTES,
            "the full buffer, in one write"
        );
        assert_eq!(sink.writes(), 1);
    }

    #[test]
    fn lines_from_many_threads_never_interleave() {
        let sink = Sink::default();
        let (buffer, flusher) = start_with(sink.clone(), Duration::from_millis(1)).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let buffer = buffer.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        let text = format!("{thread}:{i}:{}\n", "y".repeat(200));
                        line(&buffer, info(), &text);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(flusher);
        let text = sink.text();
        assert_eq!(text.lines().count(), 8 * 500);
        for written in text.lines() {
            let mut parts = written.split(':');
            let (thread, i, rest) = (parts.next(), parts.next(), parts.next());
            assert!(thread.is_some() && i.is_some(), "{written}");
            assert_eq!(rest, Some("y".repeat(200).as_str()), "{written}");
        }
    }
}
