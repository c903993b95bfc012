//! A process's resident memory, as Linux reports it in `/proc/<pid>/status`.

use std::fmt::Display;

/// `VmRSS` and `VmHWM` (its peak) of `/proc/<pid>` (`self` for this process), in kB.
pub fn memory_of(
    pid: impl Display,
) -> Result<(u64, u64), Box<dyn std::error::Error + Send + Sync>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))?;
        let kb = line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("no value in {line:?}"))?;
        Ok(kb.parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}
