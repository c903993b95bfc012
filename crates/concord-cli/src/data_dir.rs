//! `--data-dir`: where the store lives, for every command that uses it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use concord_store::Store;

/// The store's directory, shared by the commands that read or write it.
#[derive(Debug, Clone, Args)]
pub struct DataDir {
    /// Directory of the store (protocols, consensus registry, transcripts); created if
    /// missing. Default: the platform data directory (`~/.local/share/concord` on Linux).
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
}

impl DataDir {
    /// The directory: the one given, else the platform default.
    pub fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.data_dir {
            Some(dir) => Ok(dir.clone()),
            None => Store::default_dir().context("no --data-dir given"),
        }
    }

    /// Opens (or creates) the store.
    pub fn open(&self) -> anyhow::Result<Store> {
        let dir = self.path()?;
        Store::open(&dir).with_context(|| format!("cannot open the store in {}", dir.display()))
    }
}
