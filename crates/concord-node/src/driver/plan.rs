//! Executing the preparation policy (`concord_proto::Preparation`): each command it
//! queues becomes a task, a session call or the session's end; what comes back is fed to
//! it again.

use std::time::Instant;

use concord_proto::PreparationCommand;

use super::{Cause, Driver};
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
}
