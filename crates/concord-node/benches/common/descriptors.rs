//! File descriptors for benches that hold many connections at once: the soft
//! `RLIMIT_NOFILE` raised to the hard limit.

/// Raises the soft descriptor limit to the hard one and returns the limit now in force; an
/// error when the hard one is below `needed`, advising to run fewer `fewer` (what to cut,
/// and the options that set it).
pub fn raise_limit(
    needed: usize,
    fewer: &str,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!(
            "cannot read RLIMIT_NOFILE: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    if limit.rlim_max < needed as u64 {
        return Err(format!(
            "this run needs {needed} file descriptors, but the hard limit (ulimit -Hn) is {}: \
             raise it (`ulimit -Hn {needed}` as root, /etc/security/limits.conf, or systemd \
             LimitNOFILE) or run fewer {fewer}",
            limit.rlim_max
        )
        .into());
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(format!(
            "cannot raise RLIMIT_NOFILE: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    Ok(limit.rlim_cur)
}
