//! How `temper mcp` learns it should stop: the first SIGTERM or SIGINT,
//! after which it writes the counted calls and exits. Hand-written on libc
//! (a self-pipe) rather than tokio's `signal` feature, which would change
//! tokio's features for every crate and rebuild them; `signal-hook`'s
//! `flag::register_conditional_default` is the maintained alternative.

/// Waits for SIGTERM or SIGINT; returns its name. The first of either is
/// caught (through a self-pipe: the handler only writes a byte), later
/// ones act as by default, so a second Ctrl-C ends a stuck shutdown.
#[cfg(not(unix))]
pub async fn shutdown_signal() -> Result<&'static str, String> {
    std::future::pending().await
}

/// Waits for SIGTERM or SIGINT; returns its name. The first of either is
/// caught (through a self-pipe: the handler only writes a byte), later
/// ones act as by default, so a second Ctrl-C ends a stuck shutdown.
#[cfg(unix)]
pub async fn shutdown_signal() -> Result<&'static str, String> {
    use std::sync::atomic::{AtomicI32, Ordering};
    static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
    static CAUGHT: AtomicI32 = AtomicI32::new(0);
    extern "C" fn on_signal(sig: libc::c_int) {
        CAUGHT.store(sig, Ordering::SeqCst);
        let fd = PIPE_WRITE.load(Ordering::SeqCst);
        if fd >= 0 {
            let byte = 1u8;
            // SAFETY: write(2) is async-signal-safe; the buffer is a local.
            unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
        }
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two descriptors of a local array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("signal pipe: {}", std::io::Error::last_os_error()));
    }
    PIPE_WRITE.store(fds[1], Ordering::SeqCst);
    let set = |sig: libc::c_int, handler: libc::sighandler_t| {
        // SAFETY: a zeroed sigaction with an emptied mask and a handler
        // that is SIG_DFL or async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        }
    };
    for sig in [libc::SIGTERM, libc::SIGINT] {
        if set(
            sig,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        ) != 0
        {
            return Err(format!("signal {sig}: {}", std::io::Error::last_os_error()));
        }
    }
    let read_fd = fds[0];
    // A thread of its own (not a blocking task: the runtime would wait
    // for it at shutdown).
    let (tx, rx) = tokio::sync::oneshot::channel();
    let wait = move || {
        let mut byte = 0u8;
        loop {
            // SAFETY: reads one byte into a local.
            let n = unsafe { libc::read(read_fd, (&raw mut byte).cast(), 1) };
            if n == 1 {
                break;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("signal pipe: {}", std::io::Error::last_os_error()));
        }
        for sig in [libc::SIGTERM, libc::SIGINT] {
            set(sig, libc::SIG_DFL);
        }
        Ok(match CAUGHT.load(Ordering::SeqCst) {
            libc::SIGTERM => "SIGTERM",
            _ => "SIGINT",
        })
    };
    std::thread::Builder::new()
        .name("temper-signals".into())
        .spawn(move || drop(tx.send(wait())))
        .map_err(|e| format!("signal thread: {e}"))?;
    rx.await.map_err(|e| format!("signal wait: {e}"))?
}
