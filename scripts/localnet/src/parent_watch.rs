//! `--exit-with-parent <pid>`: the ledger ends when the process that started it ends, so a
//! SIGKILLed `npm start` (or test runner) leaves no orphan holding the ports and the ledger
//! directory. The ledger is sent SIGTERM, its own graceful path: the log is synced and closed.

/// Arranges for SIGTERM when `parent` ends. Errs when `parent` is not (or no longer) our parent.
pub fn exit_with_parent(parent: u32) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory.
        let set = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
        if set != 0 {
            return Err(format!("prctl(PR_SET_PDEATHSIG): {}", std::io::Error::last_os_error()));
        }
    }
    // Checked after arming: a parent that died before that would never send the signal.
    if std::os::unix::process::parent_id() != parent {
        return Err(format!("parent process {parent} is gone"));
    }
    #[cfg(not(target_os = "linux"))]
    std::thread::Builder::new()
        .name("parent-watch".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            if std::os::unix::process::parent_id() != parent {
                // SAFETY: sends a signal to this process; no memory is involved.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
                return;
            }
        })
        .map_err(|error| format!("cannot watch the parent process: {error}"))?;
    Ok(())
}
