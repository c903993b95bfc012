//! Executing the preparation policy (`concord_proto::Preparation`): each command it
//! queues becomes a task, a session call or the session's end; what comes back is fed to
//! it again.

use std::sync::Arc;
use std::time::Instant;

use concord_negotiate::Negotiator;
use concord_proto::PreparationCommand;

use super::work::{StepError, Work};
use super::{Cause, Driver};
use crate::code;
use crate::transport::Transport;

impl<T: Transport> Driver<T> {
    /// Executes what the preparation policy asks, until it asks nothing more. Called
    /// after every input given to it, so its commands run in the order of those inputs.
    pub(super) fn execute_preparation(&mut self) {
        while let Some(command) = self.prep.poll_command() {
            match command {
                PreparationCommand::ProposeTestCases => self.propose_test_cases(),
                PreparationCommand::Generate {
                    generation,
                    test_cases,
                } => self.spawn_generate(generation, test_cases),
                PreparationCommand::Save { then } => self.save(then),
                PreparationCommand::Announce { generation } => self.announce_code(generation),
                PreparationCommand::FailCode(failure) => {
                    tracing::warn!(error = %failure, "our code generation failed");
                    if let Err(error) = self.session.code_failed(Instant::now()) {
                        tracing::debug!(%error, "cannot report failed code generation");
                    }
                }
                PreparationCommand::Verify => self.start_verification(),
                PreparationCommand::ReportFailures { report } => {
                    tracing::warn!(%report, "the peer's code fails the agreed test cases");
                    self.reported = false;
                    self.report_to_peer(report);
                }
                PreparationCommand::RefusePeerCode(failure) => {
                    self.stop = Some(Cause::Verification(failure.to_string()));
                }
            }
        }
    }

    /// Requester: proposes our own test cases, or drafts them with the negotiator.
    pub(super) fn propose_test_cases(&mut self) {
        if let Some(cases) = self.own_test_cases() {
            return self.send_test_cases(Instant::now(), cases);
        }
        let shared = Arc::clone(&self.shared);
        let document = self.document();
        self.spawn_step(
            shared.limits.negotiation_timeout,
            "drafting test cases",
            async move {
                shared
                    .policy
                    .draft_test_cases(&document?)
                    .await
                    .map_err(StepError::Negotiator)
            },
            Work::TestCasesDrafted,
        );
    }

    pub(super) fn send_test_cases(&mut self, now: Instant, cases: String) {
        match self.session.propose_test_cases(now, cases) {
            Ok(()) => self.prep.test_cases_proposed(),
            Err(error) => {
                tracing::warn!(%error, "cannot propose test cases; going on without them");
                self.prep.test_cases_dropped(now);
                self.execute_preparation();
            }
        }
    }

    /// Starts generation `generation` of our code, verified against `cases`, and aborts
    /// the one before it if it still runs. Its deadline is the policy's
    /// (`code_generation_timeout`, counted from now, the wait for a turn included): past it
    /// the session gives up; the task also bounds itself by it, and ends with the session.
    pub(super) fn spawn_generate(&mut self, generation: u32, cases: Option<String>) {
        if let Some((_, superseded)) = self.generating.take() {
            superseded.abort();
        }
        let Some(text) = self.protocol_text().map(str::to_owned) else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let local = self.local_side();
        let peer = self.peer.clone();
        let work = self.work_tx.clone();
        let limit = shared.limits.code_generation_timeout;
        let task = tokio::spawn(async move {
            let step = async {
                let _turn = shared.enter_work().await;
                code::generate(&shared, &text, local, cases, &peer)
                    .await
                    .map(Box::new)
            };
            let result = tokio::select! {
                result = tokio::time::timeout(limit, step) => match result {
                    Ok(result) => result,
                    // The policy's deadline ends the session at the same instant.
                    Err(_) => return,
                },
                () = work.closed() => return,
            };
            let _ = work.send(Box::new(Work::CodeGenerated { generation, result }));
        });
        self.generating = Some((generation, task.abort_handle()));
    }

    /// Puts our fresh code (generation `generation`) in force and says `generated`.
    pub(super) fn announce_code(&mut self, generation: u32) {
        let Some(code) = self.fresh.take() else {
            return;
        };
        self.code = Some(code);
        self.share_protocol_text();
        self.install_interact();
        match self.session.code_ready(Instant::now()) {
            Ok(()) => tracing::info!(generation, "our code is ready: sent `generated`"),
            Err(error) => tracing::debug!(%error, "cannot announce our code"),
        }
    }
}
