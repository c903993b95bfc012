//! Ctrl-C presses during a command, from one signal stream kept for the whole command:
//! a press while nothing awaits one is kept for the next wait, never lost.

use anyhow::Context;

/// The Ctrl-C presses since [`Interrupts::listen`].
#[derive(Debug)]
pub struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
    #[cfg(not(unix))]
    signal: tokio::signal::windows::CtrlC,
}

impl Interrupts {
    /// Listens for Ctrl-C (SIGINT on Unix) from now on, instead of being ended by it.
    ///
    /// # Errors
    /// When the signal cannot be listened for.
    pub fn listen() -> anyhow::Result<Self> {
        #[cfg(unix)]
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        #[cfg(not(unix))]
        let signal = tokio::signal::windows::ctrl_c();
        Ok(Self {
            signal: signal.context("cannot listen for Ctrl-C")?,
        })
    }

    /// The next press (one pressed since the last call returns at once).
    pub async fn next(&mut self) {
        if self.signal.recv().await.is_none() {
            // The runtime's signal driver is gone: no press will come.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Sends this process a SIGINT, as Ctrl-C does.
    fn press() {
        let sent = std::process::Command::new("kill")
            .args(["-INT", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    #[tokio::test]
    async fn a_press_while_none_is_awaited_is_kept_for_the_next_wait() {
        let mut interrupts = Interrupts::listen().unwrap();
        // Pressed while nothing waits for a press (as between two waits of a command).
        press();
        tokio::time::sleep(Duration::from_millis(200)).await;
        tokio::time::timeout(Duration::from_secs(10), interrupts.next())
            .await
            .expect("the press was lost");
        // And the next one after it, too.
        press();
        tokio::time::timeout(Duration::from_secs(10), interrupts.next())
            .await
            .expect("the second press was lost");
    }
}
