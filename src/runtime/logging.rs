//! Logging that can neither stall nor kill the daemon.
//!
//! Every log line is handed to one writer thread through a bounded queue of [`QUEUE_LINES`]
//! lines. Handing over never blocks: when the queue is full (stderr is a pipe nobody reads) the
//! line is dropped and counted. The writer thread ignores write errors: once stderr is a broken
//! pipe (its reader exited) every later line is dropped and counted, and nothing panics — unlike
//! `eprintln!`, which tracing-subscriber's own writer would use and which panics on EPIPE inside
//! whichever task logged. The count is `dawnpost_log_lines_dropped_total` in `/metrics`.
//!
//! Shutdown never waits on a log line: [`flush`] waits a bounded time, and the writer thread is
//! never joined.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tracing_subscriber::fmt::MakeWriter;

/// Lines the queue holds before new lines are dropped.
pub(crate) const QUEUE_LINES: usize = 8192;

enum Msg {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// The process's log queue, created with its writer thread on first use.
struct Sink {
    tx: SyncSender<Msg>,
}

static SINK: OnceLock<Sink> = OnceLock::new();
static DROPPED: OnceLock<Counter> = OnceLock::new();

/// Log lines dropped because the sink was full or broken (shared with `/metrics`).
pub(crate) fn dropped_lines() -> Counter {
    DROPPED.get_or_init(Counter::default).clone()
}

fn sink() -> &'static Sink {
    SINK.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        spawn_writer(rx, Box::new(std::io::stderr()));
        Sink { tx }
    })
}

/// Starts the writer thread over `out`. If the thread cannot be started, lines are dropped
/// (and counted) rather than written from the caller's thread.
fn spawn_writer(rx: Receiver<Msg>, out: Box<dyn Write + Send>) {
    let started = std::thread::Builder::new()
        .name("dawnpost-log".into())
        .spawn(move || write_lines(rx, out));
    if started.is_err() {
        // Without a writer every line is dropped and counted by `emit`.
        dropped_lines().inc();
    }
}

fn write_lines(rx: Receiver<Msg>, mut out: Box<dyn Write + Send>) {
    let dropped = dropped_lines();
    let mut broken = false;
    for msg in rx {
        match msg {
            Msg::Line(_) if broken => {
                dropped.inc();
            }
            Msg::Line(line) => {
                if let Err(e) = out.write_all(&line) {
                    dropped.inc();
                    broken = e.kind() == std::io::ErrorKind::BrokenPipe;
                }
            }
            Msg::Flush(ack) => {
                let _ = out.flush();
                let _ = ack.try_send(());
            }
        }
    }
}

/// Queues one line (or any bytes); never blocks, never fails: a full queue drops and counts it.
pub(crate) fn emit(bytes: Vec<u8>) {
    if sink().tx.try_send(Msg::Line(bytes)).is_err() {
        dropped_lines().inc();
    }
}

/// Waits up to `timeout` for the queued lines to be written. Returns false if they were not
/// (the sink is blocked); the caller goes on regardless.
pub fn flush(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let (ack_tx, ack_rx) = sync_channel(1);
    let mut msg = Msg::Flush(ack_tx);
    loop {
        match sink().tx.try_send(msg) {
            Ok(()) => break,
            Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                msg = m;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return false,
        }
    }
    let left = deadline.saturating_duration_since(Instant::now());
    ack_rx.recv_timeout(left).is_ok()
}

/// A `MakeWriter` for tracing-subscriber: each event's bytes go to the queue in one piece.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NonBlocking;

/// One event's bytes, queued when dropped.
pub(crate) struct EventWriter {
    buf: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            emit(std::mem::take(&mut self.buf));
        }
    }
}

impl<'a> MakeWriter<'a> for NonBlocking {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> EventWriter {
        EventWriter {
            buf: Vec::with_capacity(256),
        }
    }
}

/// Writes a line to stderr through the log queue (in order with the logs); never panics.
pub fn eprint_line(text: &str) {
    let mut line = text.as_bytes().to_vec();
    if !line.ends_with(b"\n") {
        line.push(b'\n');
    }
    emit(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that fails like a pipe whose reader exited.
    struct BrokenPipe;

    impl Write for BrokenPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_broken_sink_drops_and_counts_lines_without_panicking() {
        let (tx, rx) = sync_channel(4);
        let before = dropped_lines().get();
        let writer = std::thread::spawn(move || write_lines(rx, Box::new(BrokenPipe)));
        for _ in 0..3 {
            tx.send(Msg::Line(b"x\n".to_vec())).expect("queue");
        }
        let (ack_tx, ack_rx) = sync_channel(1);
        tx.send(Msg::Flush(ack_tx)).expect("queue");
        ack_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the writer keeps running after EPIPE");
        drop(tx);
        writer.join().expect("the writer thread did not panic");
        assert!(dropped_lines().get() >= before + 3);
    }
}
