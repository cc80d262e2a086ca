//! The stdio connection's output ([`Output`]): one message per line,
//! written by whichever sender has one, with no writer thread of its own.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::TIMING_TARGET;
use crate::inline::{MAX_INLINE_WRITE, Writable};

/// The connection's output: one message per line, written by whoever has
/// one to send, without a thread of its own. A sender serializes its
/// message, queues it and, unless another sender is writing, writes
/// whatever is queued (its own and what others queued meanwhile) in one
/// buffered write and one flush; a sender that finds a write under way
/// leaves its message to that writer and returns at once. So at most one
/// thread waits on a client that reads slowly (never the reader thread:
/// its own messages are written on the blocking pool when it would have to
/// write them), messages never interleave, and under load the answers of
/// many calls share a system call.
pub(super) struct Output {
    queue: Mutex<Queue>,
    writer: Mutex<io::BufWriter<Box<dyn Write + Send>>>,
    /// Whether a write of the reader's would not block now (`None`: never
    /// written by the reader).
    probe: Option<Writable>,
    /// Writing failed (the client is gone): later messages are dropped.
    failed: AtomicBool,
}

#[derive(Default)]
struct Queue {
    lines: Vec<u8>,
    /// When the requests answered by the queued lines were read.
    read_at: Vec<Instant>,
    /// A sender is writing (and will write what is queued).
    writing: bool,
}

impl Output {
    #[cfg(test)]
    pub(super) fn new(output: Box<dyn Write + Send>) -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            writer: Mutex::new(io::BufWriter::with_capacity(64 << 10, output)),
            probe: None,
            failed: AtomicBool::new(false),
        }
    }

    /// An output whose descriptor `probe` checks (it must be `output`'s).
    pub(super) fn with_probe(probe: Writable, output: Box<dyn Write + Send>) -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            writer: Mutex::new(io::BufWriter::with_capacity(64 << 10, output)),
            probe: Some(probe),
            failed: AtomicBool::new(false),
        }
    }

    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Sends `message` (the answer to a request read at `read_at`, or a
    /// notification), writing it now unless a write is under way.
    pub(super) fn send(&self, message: &impl Serialize, read_at: Option<Instant>) {
        if let Some(batch) = self.enqueue(message, read_at) {
            self.write_out(batch);
        }
    }

    /// [`Output::send`] from a request's task while other requests are in
    /// flight: if this sender must write, it first yields to the tasks the
    /// runtime has ready (the other requests' handlers), whose answers queue
    /// behind this one meanwhile, and then writes them all in one write.
    /// Under load, one system call (and one wake-up of the client) carries
    /// many answers instead of one each. The write is done even if the
    /// task is dropped while it yields (the guard's drop writes).
    pub(super) async fn send_coalesced(
        &self,
        message: &(impl Serialize + Sync),
        read_at: Option<Instant>,
    ) {
        /// Writes the batch and what queued behind it when dropped.
        struct Coalesced<'a> {
            out: &'a Output,
            batch: Option<Batch>,
        }
        impl Drop for Coalesced<'_> {
            fn drop(&mut self) {
                if let Some((mut lines, mut answered)) = self.batch.take() {
                    {
                        let mut q = lock(&self.out.queue);
                        lines.append(&mut q.lines);
                        answered.append(&mut q.read_at);
                    }
                    self.out.write_out((lines, answered));
                }
            }
        }
        let Some(batch) = self.enqueue(message, read_at) else {
            return;
        };
        let _write = Coalesced {
            out: self,
            batch: Some(batch),
        };
        tokio::task::yield_now().await;
    }

    /// Like [`Output::send`], but the write, if this sender must do it,
    /// runs on `rt`'s blocking pool: for the reader thread, which must
    /// never wait on a client that does not read its answers (it would
    /// stop reading the requests such a client is still writing).
    /// `held` is held until the write is done (the server waits for it
    /// before it returns).
    pub(super) fn send_detached(
        self: &Arc<Self>,
        message: &Value,
        rt: &tokio::runtime::Handle,
        held: &mpsc::Sender<()>,
    ) {
        if let Some(batch) = self.enqueue(message, None) {
            let (out, held) = (self.clone(), held.clone());
            rt.spawn_blocking(move || {
                out.write_out(batch);
                drop(held);
            });
        }
    }

    /// [`Output::send`] from the reader thread polling a request (see
    /// [`inline`]): it writes the batch itself only when the batch is one
    /// small write the output has room for now; otherwise, and for what
    /// others queued meanwhile, the write runs on `rt`'s blocking pool,
    /// holding `held` until done.
    pub(super) fn send_on_reader(
        self: &Arc<Self>,
        message: &impl Serialize,
        read_at: Option<Instant>,
        rt: &tokio::runtime::Handle,
        held: mpsc::Sender<()>,
    ) {
        let Some((lines, mut answered)) = self.enqueue(message, read_at) else {
            return;
        };
        let rest =
            if lines.len() <= MAX_INLINE_WRITE && self.probe.as_ref().is_some_and(Writable::now) {
                if !self.write_batch(&lines, &mut answered) {
                    return;
                }
                let mut q = lock(&self.queue);
                if q.lines.is_empty() {
                    q.writing = false;
                    return;
                }
                (std::mem::take(&mut q.lines), std::mem::take(&mut q.read_at))
            } else {
                (lines, answered)
            };
        let out = self.clone();
        rt.spawn_blocking(move || {
            out.write_out(rest);
            drop(held);
        });
    }

    /// Queues `message`; when no write is under way, takes the queue (this
    /// sender becomes the writer and must [`Output::write_out`] it).
    pub(super) fn enqueue(
        &self,
        message: &impl Serialize,
        read_at: Option<Instant>,
    ) -> Option<Batch> {
        if self.failed() {
            return None;
        }
        let mut line = Vec::with_capacity(256);
        // A `Value` always serializes, and so does an `Outgoing`.
        let _ = serde_json::to_writer(&mut line, message);
        line.push(b'\n');
        let mut q = lock(&self.queue);
        q.read_at.extend(read_at);
        if q.writing {
            q.lines.extend_from_slice(&line);
            return None;
        }
        q.writing = true;
        if !q.lines.is_empty() {
            q.lines.extend_from_slice(&line);
            line = std::mem::take(&mut q.lines);
        }
        Some((line, std::mem::take(&mut q.read_at)))
    }

    /// Writes `batch` and whatever is queued meanwhile, until the queue is
    /// empty.
    pub(super) fn write_out(&self, (mut lines, mut answered): Batch) {
        loop {
            if !self.write_batch(&lines, &mut answered) {
                return;
            }
            lines.clear();
            let mut q = lock(&self.queue);
            if q.lines.is_empty() {
                q.writing = false;
                return;
            }
            std::mem::swap(&mut lines, &mut q.lines);
            std::mem::swap(&mut answered, &mut q.read_at);
        }
    }
}

impl Output {
    /// Writes `lines` (one write and flush) and reports the requests they
    /// answer (read at `answered`). On failure, marks the output failed,
    /// drops what is queued, ends the writing and returns false.
    pub(super) fn write_batch(&self, lines: &[u8], answered: &mut Vec<Instant>) -> bool {
        let written = {
            let mut w = lock(&self.writer);
            w.write_all(lines).and_then(|()| w.flush())
        };
        if let Err(e) = written {
            tracing::warn!("cannot write to the client: {e}");
            self.failed.store(true, Ordering::Release);
            let mut q = lock(&self.queue);
            q.lines = Vec::new();
            q.read_at = Vec::new();
            q.writing = false;
            return false;
        }
        for at in answered.drain(..) {
            self::answered(at);
        }
        true
    }
}

/// Lines to write and when the requests they answer were read.
pub(super) type Batch = (Vec<u8>, Vec<Instant>);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reports a request's time in the server, from its line read to its
/// answer written, as a `trace` event of target [`TIMING_TARGET`] (what
/// `cargo bench --bench mcp` collects; free when nothing listens).
fn answered(read_at: Instant) {
    tracing::trace!(
        target: TIMING_TARGET,
        transport = "stdio",
        micros = read_at.elapsed().as_micros() as u64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    /// A writer into a shared buffer, slow enough that senders meet.
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_micros(50));
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn concurrent_senders_write_whole_lines_and_lose_none() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::new(Output::new(Box::new(Shared(buf.clone()))));
        let senders: Vec<_> = (0..8)
            .map(|t| {
                let out = out.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let text = "x".repeat(i % 50);
                        out.send(&serde_json::json!({"t": t, "i": i, "text": text}), None);
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        let bytes = lock(&buf).clone();
        let mut seen = std::collections::HashSet::new();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).expect("a whole JSON line");
            assert!(seen.insert((v["t"].as_u64().unwrap(), v["i"].as_u64().unwrap())));
        }
        assert_eq!(seen.len(), 8 * 200);
        assert!(!out.failed());
    }

    /// Counts the writes made into a shared buffer.
    struct Counting(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut b = lock(&self.0);
            b.0.extend_from_slice(buf);
            b.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn lines_of(bytes: &[u8]) -> Vec<Value> {
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("a whole JSON line"))
            .collect()
    }

    #[test]
    fn answers_ready_together_share_one_write() {
        let buf = Arc::new(Mutex::new((Vec::new(), 0)));
        // The combining writer buffers; a write of the batch reaches the
        // output as one `write` (64 KiB buffer, small lines).
        let out = Arc::new(Output::new(Box::new(Counting(buf.clone()))));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..10)
                .map(|i| {
                    let out = out.clone();
                    tokio::spawn(async move {
                        out.send_coalesced(&serde_json::json!({"i": i}), Some(Instant::now()))
                            .await;
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        let (bytes, writes) = lock(&buf).clone();
        let got: Vec<u64> = lines_of(&bytes)
            .iter()
            .map(|v| v["i"].as_u64().unwrap())
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>(), "all, in order");
        assert_eq!(writes, 1, "the ten answers ready together in one write");
        let q = lock(&out.queue);
        assert!(!q.writing && q.lines.is_empty() && q.read_at.is_empty());
    }

    #[test]
    fn a_coalescing_writer_dropped_while_it_yields_still_writes() {
        let buf = Arc::new(Mutex::new((Vec::new(), 0)));
        let out = Output::new(Box::new(Counting(buf.clone())));
        let message = serde_json::json!({"a": 1});
        let mut fut = Box::pin(out.send_coalesced(&message, None));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending(), "yielded");
        // Queued behind the yielding writer.
        out.send(&serde_json::json!({"a": 2}), None);
        assert_eq!(lock(&buf).1, 0, "nothing written yet");
        drop(fut);
        let (bytes, _) = lock(&buf).clone();
        assert_eq!(lines_of(&bytes).len(), 2, "both written by the drop");
        assert!(!lock(&out.queue).writing, "the writing ended");
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_drops_later_messages() {
        let out = Output::new(Box::new(Broken));
        out.send(&serde_json::json!({"a": 1}), Some(Instant::now()));
        assert!(out.failed());
        // Dropped without a write (and without blocking or panicking).
        out.send(&serde_json::json!({"a": 2}), None);
        let q = lock(&out.queue);
        assert!(q.lines.is_empty() && q.read_at.is_empty() && !q.writing);
    }
}
