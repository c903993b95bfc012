//! The node's registrations: one task per directory executes its [`Schedule`], registering
//! the node's current description (`PUT`, which refreshes `expires` too), backing off while
//! the directory is away, and deregistering on a graceful shutdown. Each registration's
//! state is readable at any time ([`Server::registrations`](crate::Server::registrations))
//! and logged when it changes.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::schedule::{Outcome, Phase, Schedule};
use super::{Directory, DirectoryError, RegistrationSettings, RegistrationSigning};
use crate::describe::Description;
use crate::node::Shared;

/// Where one registration stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrationState {
    /// Not registered yet, or no longer (the TTL ran out while the directory was away): the
    /// node is trying (see `failures` and `next_attempt`).
    Pending,
    /// The directory holds the node's description.
    Registered,
    /// The directory refused the description (an invalid description, a signature required
    /// or refused): the node stopped trying (`last_error` says why).
    GivenUp,
    /// The directory answered 403 for the node's DID-named entry: it keeps that id to
    /// another writer (another agent registered it first). The node stopped trying
    /// (`last_error` says so).
    Conflict,
    /// Removed on a graceful shutdown.
    Deregistered,
}

/// One registration's state ([`Server::registrations`](crate::Server::registrations)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistrationStatus {
    /// The directory's base URL.
    pub directory: String,
    /// The entry's id, once known.
    pub id: Option<String>,
    /// Where it stands.
    pub state: RegistrationState,
    /// When the directory last accepted the description.
    pub registered_at: Option<SystemTime>,
    /// Failed attempts since the last success.
    pub failures: u32,
    /// The last failure, when the last attempt failed.
    pub last_error: Option<String>,
    /// When the next attempt is due, when one is.
    pub next_attempt: Option<SystemTime>,
    /// Whether the next (or the last successful) registration is signed with the node's
    /// DID ([`RegistrationSigning`](crate::RegistrationSigning)).
    pub signed: bool,
}

/// The node's registration tasks, stopped by [`Registrar::deregister`] (graceful) or
/// aborted on drop.
#[derive(Debug)]
pub(crate) struct Registrar {
    statuses: Arc<Mutex<Vec<RegistrationStatus>>>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Registrar {
    /// Starts one task per directory the node registers with; `None` when it has none.
    pub(crate) fn start(shared: &Arc<Shared>, description: Description) -> Option<Self> {
        if shared.directories.is_empty() {
            return None;
        }
        let description = Arc::new(description);
        let (stop, stopped) = watch::channel(false);
        let statuses = Arc::new(Mutex::new(
            shared
                .directories
                .iter()
                .map(|directory| RegistrationStatus {
                    directory: directory.url().to_owned(),
                    id: None,
                    state: RegistrationState::Pending,
                    registered_at: None,
                    failures: 0,
                    last_error: None,
                    next_attempt: Some(SystemTime::now()),
                    signed: shared.identity.identity().is_some()
                        && shared.registration.sign != RegistrationSigning::Never,
                })
                .collect(),
        ));
        let tasks = shared
            .directories
            .iter()
            .enumerate()
            .map(|(index, directory)| {
                let span = tracing::info_span!("directory", url = %directory.url());
                // Signed as the node's DID (settled now that it serves) while the schedule
                // says so; unsigned otherwise.
                let signed = shared
                    .identity
                    .identity()
                    .map(|identity| directory.clone().with_identity(Arc::clone(identity)));
                let registration = Registration {
                    shared: Arc::clone(shared),
                    description: Arc::clone(&description),
                    directory: directory.clone(),
                    signed,
                    signs: false,
                    settings: shared.registration,
                    statuses: Arc::clone(&statuses),
                    index,
                    id: None,
                };
                tokio::spawn(registration.run(stopped.clone()).instrument(span))
            })
            .collect();
        Some(Self {
            statuses,
            stop,
            tasks,
        })
    }

    /// Every registration's state now.
    pub(crate) fn statuses(&self) -> Vec<RegistrationStatus> {
        self.statuses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops the tasks; each deregisters when its directory may hold the entry (within the
    /// client's timeout).
    pub(crate) async fn deregister(mut self) {
        self.stop.send_replace(true);
        for task in std::mem::take(&mut self.tasks) {
            if let Err(error) = task.await {
                tracing::error!(%error, "a directory registration task failed");
            }
        }
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        // Not graceful: the entries stay until their TTL runs out.
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// One directory's registration, run by its task.
struct Registration {
    shared: Arc<Shared>,
    description: Arc<Description>,
    /// The unsigned client.
    directory: Directory,
    /// The client signing as the node's DID, when it has one.
    signed: Option<Directory>,
    /// Whether the last attempt was signed (a deregistration is made the same way).
    signs: bool,
    settings: RegistrationSettings,
    statuses: Arc<Mutex<Vec<RegistrationStatus>>>,
    index: usize,
    /// The entry's id, once known (the description's, or the directory's for a description
    /// without one).
    id: Option<String>,
}

impl Registration {
    async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        let mut schedule = Schedule::new(self.settings, self.signed.is_some(), Instant::now());
        // An attempt cut short by the shutdown may have registered.
        let mut interrupted = false;
        while let Some(at) = schedule.next_attempt() {
            tokio::select! {
                () = tokio::time::sleep_until(at.into()) => {}
                _ = stopped.wait_for(|stop| *stop) => break,
            }
            self.signs = schedule.signs();
            let attempt = self.attempt();
            let result = tokio::select! {
                result = attempt => result,
                _ = stopped.wait_for(|stop| *stop) => {
                    interrupted = true;
                    break;
                }
            };
            let now = Instant::now();
            let did_named = self.id.as_deref().is_some_and(is_did);
            let outcome = match &result {
                Ok(()) => Outcome::Registered,
                Err(error) if error.is_transient() => Outcome::Away {
                    retry_after: error.retry_after(),
                },
                Err(error) if error.status() == Some(401) => Outcome::Unauthorized,
                Err(error) if error.status() == Some(403) && did_named => Outcome::Conflict,
                Err(_) => Outcome::Refused,
            };
            let before = schedule.phase(now);
            schedule.record(now, outcome, fastrand::f64());
            self.report(&schedule, now, result.err(), before);
        }
        if *stopped.borrow() || stopped.wait_for(|stop| *stop).await.is_ok() {
            let now = Instant::now();
            if schedule.should_deregister(now) || interrupted {
                self.deregister().await;
            }
        }
    }

    /// The client of this attempt: signed or not.
    fn client(&self) -> &Directory {
        match &self.signed {
            Some(signed) if self.signs => signed,
            _ => &self.directory,
        }
    }

    /// One registration: the current description, `PUT` (or `POST` without an id).
    async fn attempt(&mut self) -> Result<(), DirectoryError> {
        let bytes = self
            .description
            .bytes(&self.shared)
            .await
            .map_err(|error| DirectoryError::Invalid {
                url: self.directory.url().to_owned(),
                reason: format!("our own description cannot be built: {error}"),
            })?;
        let mut td: Value =
            serde_json::from_slice(&bytes).map_err(|error| DirectoryError::Invalid {
                url: self.directory.url().to_owned(),
                reason: format!("our own description is not JSON: {error}"),
            })?;
        if td.get("id").is_none() {
            let did = self
                .shared
                .identity
                .identity()
                .map(|identity| identity.did().to_string());
            if let (Some(id), Some(object)) = (self.id.clone().or(did), td.as_object_mut()) {
                object.insert("id".to_owned(), Value::String(id));
            }
        }
        if let Some(id) = td.get("id").and_then(Value::as_str) {
            // Known before the answer: a shutdown during this attempt deletes it.
            self.id = Some(id.to_owned());
        }
        let registered = self.client().register(&td, Some(self.settings.ttl)).await?;
        self.id = Some(registered.id);
        Ok(())
    }

    async fn deregister(&mut self) {
        let Some(id) = self.id.clone() else { return };
        match self.client().deregister(&id).await {
            Ok(()) => tracing::info!(%id, "deregistered"),
            Err(error) => tracing::warn!(%id, %error, "could not deregister"),
        }
        self.update(|status| {
            status.state = RegistrationState::Deregistered;
            status.next_attempt = None;
        });
    }

    /// Records an attempt's result where the server shows it, and logs a change.
    fn report(
        &self,
        schedule: &Schedule,
        now: Instant,
        error: Option<DirectoryError>,
        before: Phase,
    ) {
        let phase = schedule.phase(now);
        let next_attempt = schedule
            .next_attempt()
            .map(|at| SystemTime::now() + at.saturating_duration_since(now));
        let wait = schedule
            .next_attempt()
            .map(|at| at.saturating_duration_since(now));
        let id = self.id.as_deref().unwrap_or_default();
        match (&error, phase) {
            (None, _) if !matches!(before, Phase::Registered { .. }) => tracing::info!(
                id,
                ttl = self.settings.ttl_secs(),
                signed = self.signs,
                "registered"
            ),
            (None, _) => tracing::debug!("registration refreshed"),
            (Some(error), Phase::Conflict) => tracing::error!(
                id,
                %error,
                "conflict: the directory keeps this DID-named entry to another writer; not retrying"
            ),
            (Some(error), Phase::GivenUp) if error.status() == Some(401) => tracing::error!(
                %error,
                "the directory requires a signature this agent cannot give (unsigned refused{}); \
                 not retrying",
                if self.signs { ", and our DID signature" } else { "" }
            ),
            (Some(error), Phase::GivenUp) => {
                tracing::error!(%error, "the directory refused our description; not retrying");
            }
            (Some(error), _) if self.signs && !schedule.signs() => tracing::warn!(
                %error,
                "the directory cannot verify our DID signature (401: a challenge this agent \
                 cannot meet); registering unsigned"
            ),
            (Some(error), _) => tracing::warn!(
                %error,
                failures = schedule.failures(),
                retry_in = ?wait.unwrap_or(Duration::ZERO),
                "directory away; retrying"
            ),
        }
        let id = self.id.clone();
        let signs = schedule.signs();
        self.update(|status| {
            status.id = id;
            status.signed = signs;
            status.failures = schedule.failures();
            status.next_attempt = next_attempt;
            status.state = match phase {
                Phase::Pending => RegistrationState::Pending,
                Phase::Registered { .. } => RegistrationState::Registered,
                Phase::GivenUp => RegistrationState::GivenUp,
                Phase::Conflict => RegistrationState::Conflict,
            };
            match &error {
                None => {
                    status.registered_at = Some(SystemTime::now());
                    status.last_error = None;
                }
                Some(error) => status.last_error = Some(error.to_string()),
            }
        });
    }

    fn update(&self, change: impl FnOnce(&mut RegistrationStatus)) {
        let mut statuses = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(status) = statuses.get_mut(self.index) {
            change(status);
        }
    }
}

/// Whether an entry's id is a DID.
fn is_did(id: &str) -> bool {
    id.get(..4)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("did:"))
}
