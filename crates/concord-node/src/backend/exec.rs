//! The `exec` backend: a command run per call, input JSON on stdin, output JSON on stdout
//! (with progress and event lines before it), or, for a stream action, the stream's bytes
//! on its stdin and stdout (`stream`).
//!
//! A command answers an application error (a 404 for an unknown product) by printing an
//! error report on stdout; the rule that tells a report from an output is on
//! [`ExecAction`]. Everything else that goes wrong (the command cannot start, fails without
//! a report, prints no JSON or too much, runs too long) is a backend failure: the caller
//! gets 502 "the action failed" (504 "the action did not finish in time") and nothing else,
//! our log a `warn` line with the action's name (the node's `action` span), the program,
//! its exit status, the problem and the end of its stderr. What a command prints on stderr
//! never reaches the caller.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::action::{Action, ActionError, ActionFuture};
use crate::backend::lines::{answer_part, read_lines, Control};
use crate::backend::report::{read_error_object, read_problem, ReportError};
use crate::backend::{describe_json_error, preview, FAILED, TIMED_OUT};
use crate::config::human;
use crate::interact::{ProgressAction, ProgressReporter, Publisher, StreamAction, StreamIo};

mod stream;

/// Runs a command per call: the action's input JSON is written to its stdin, and what it
/// prints on stdout is the output JSON.
///
/// # Application errors
///
/// A command reports an application error by printing on stdout one of:
///
/// - **an error object**: a JSON object whose *only* member is `error`, itself an object
///   with `code` (an integer from 400 to 599) and `message` (a string, optional),
///   `{"error": {"code": 404, "message": "no product P9"}}`, whatever its exit status
///   (0 or not);
/// - **RFC 9457 problem details**, *only when it exits non-zero*: a JSON object with a
///   `status` member (an integer from 400 to 599), `{"type": "about:blank", "title": "Not
///   Found", "status": 404, "detail": "no product P9"}`; the message is `detail`, else
///   `title` (a member of the wrong type is ignored, as the RFC says).
///
/// The caller gets that code and that message, trimmed and cut to
/// [`MAX_ERROR_MESSAGE_CHARS`](crate::MAX_ERROR_MESSAGE_CHARS) characters (no message: the
/// status's reason phrase, `Not Found`). Any other JSON a command prints and exits 0 with is
/// its output, problem details and objects with an `error` member beside others
/// (`{"name": "Laptop", "error": null}`) included: an action whose output can be an object
/// with `error` as its only member must add a member to it to be served by a command.
///
/// # Failures
///
/// | the command… | the caller gets | our log (`warn`) says |
/// |---|---|---|
/// | exits 0 having printed one JSON value (not an error object) | that value | |
/// | reports an application error (above) | its code and message | (`info`: the end of its stderr, if any) |
/// | reports one whose code is missing, not an integer or outside 400–599 | 502 "the action failed" | what is wrong with the report |
/// | cannot be started | 502 "the action failed" | the program and the OS error |
/// | exits non-zero (or is killed by a signal) with no report | 502 "the action failed" | the exit code (or the signal) |
/// | exits 0 having printed something that is not JSON (or nothing) | 502 "the action failed" | the parse error and the start of the output |
/// | prints more than `max_output_bytes` | 502 "the action failed" | the limit |
/// | runs past `timeout` | 504 "the action did not finish in time"; the command (and its process group, on Unix) is killed | the timeout |
///
/// Every `warn` line names the action (the node's `action` span) and the program, and
/// carries the end of the command's stderr (at most 500 characters) once it has ended.
///
/// # Progress and event lines
///
/// Before its answer a command may print, one per line (each at most
/// [`max_line_bytes`](Self::max_line_bytes)):
///
/// - `{"progress": 0.4, "partial": {…}}` (`partial` optional): served as a long-running
///   action ([`NodeBuilder::progress_action`](crate::NodeBuilder::progress_action): an
///   `ExecAction` is a [`ProgressAction`]), each such line is reported to the caller at once
///   ([`ProgressReporter::report`]); `progress` is a number from 0 to 1;
/// - `{"event": "userFeedbackReceived", "data": {…}}` (any mode): the node serving the
///   action publishes the event ([`Publisher::publish`]; the node hands its publisher to
///   its actions when it is built, [`Action::attach`]). An `ExecAction` called outside a
///   node has no publisher: its event lines are reported and ignored.
///
/// A line is one of these when it is a JSON object whose members are exactly `progress`
/// (and `partial`), or `event` (and `data`): an output of that very shape must add a member
/// to be told apart. Such lines are taken out of stdout as they arrive; what remains holds
/// the answer: all of it when it is one JSON document (as a command that prints no such
/// lines always did), else its last non-empty line. A line that cannot be used (a progress
/// outside 0–1, an unknown event, data its schema refuses, a stray line before the answer, a
/// progress line from an action not served as long-running) is reported in our log
/// (`warn`) and ignored: the call goes on. `max_output_bytes` bounds everything the command
/// prints on stdout, the progress and event lines taken out included: a command that
/// floods them fails like one that prints too much.
///
/// # Streams
///
/// Served as a stream action ([`NodeBuilder::stream_action`](crate::NodeBuilder::stream_action):
/// an `ExecAction` is a [`StreamAction`]), the command gets the action's input JSON in the
/// environment variable [`STREAM_INPUT_ENV`], the requester's bytes on its stdin (closed when
/// the requester ends its half), and what it prints on stdout goes to the requester, in
/// frames of [`frame_bytes`](Self::frame_bytes) when set; the stream ends when stdout does.
/// Its stderr goes to our log (`info`). A command that exits non-zero, cannot start or runs
/// past `timeout` resets the stream.
///
/// ```no_run
/// use std::time::Duration;
/// use concord_node::ExecAction;
///
/// let action = ExecAction::new("python3")
///     .arg("product_info.py")
///     .timeout(Duration::from_secs(5));
/// ```
///
/// A command that publishes events needs nothing more than the node declaring them: the
/// node gives the action its publisher when it is built.
///
/// ```
/// use concord_negotiate::ActionSpec;
/// use concord_node::{Event, ExecAction, Node};
/// use serde_json::json;
///
/// let feedback = ActionSpec {
///     name: "logFeedback".into(),
///     description: "Records a rating and publishes it.".into(),
///     input: json!({"type": "object", "properties": {"rating": {"type": "integer"}}}),
///     output: json!({"type": "object", "properties": {"recorded": {"type": "boolean"}}}),
/// };
/// // log_feedback.sh prints `{"event": "userFeedbackReceived", "data": {"rating": 5}}`.
/// let dir = tempfile::tempdir()?;
/// let node = Node::builder("Weather")
///     .event("userFeedbackReceived", Event::new(json!({"type": "object"})))
///     .notify_action(feedback, ExecAction::new("./log_feedback.sh"))
///     .data_dir(dir.path())
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ExecAction {
    inner: Arc<ExecSpec>,
    /// The serving node's publisher, for the command's event lines ([`Action::attach`]).
    publisher: OnceLock<Publisher>,
}

#[derive(Debug, Clone)]
struct ExecSpec {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    current_dir: Option<PathBuf>,
    timeout: Duration,
    max_output_bytes: usize,
    max_line_bytes: usize,
    frame_bytes: usize,
}

/// Default time a command may run per call.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on what a command may print on stdout per call (and on the stderr kept).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 10 << 20;
/// Default cap on one progress or event line a command prints.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 10;
/// The environment variable a stream action's command finds its input JSON in.
pub const STREAM_INPUT_ENV: &str = "CONCORD_ACTION_INPUT";

impl ExecAction {
    /// Runs `program` (looked up in `PATH` when it has no slash) with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(ExecSpec {
                program: program.into(),
                args: Vec::new(),
                env: Vec::new(),
                current_dir: None,
                timeout: DEFAULT_EXEC_TIMEOUT,
                max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
                max_line_bytes: DEFAULT_MAX_LINE_BYTES,
                frame_bytes: 0,
            }),
            publisher: OnceLock::new(),
        }
    }

    fn spec(&mut self) -> &mut ExecSpec {
        Arc::make_mut(&mut self.inner)
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.spec().args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.spec().args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the command.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.spec().env.push((key.into(), value.into()));
        self
    }

    /// Runs the command in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spec().current_dir = Some(dir.into());
        self
    }

    /// How long one call may run (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.spec().timeout = timeout;
        self
    }

    /// Cap on stdout per call, progress and event lines aside (default 10 MiB).
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.spec().max_output_bytes = bytes;
        self
    }

    /// Cap on one progress or event line (default 64 KiB): a longer line is not read as
    /// one.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.spec().max_line_bytes = bytes;
        self
    }

    /// In stream mode, sends stdout to the requester in frames of this many bytes (the
    /// stream's `frame_bytes`; the last may be shorter). Default 0: as it is read.
    pub fn frame_bytes(mut self, bytes: usize) -> Self {
        self.spec().frame_bytes = bytes;
        self
    }

    /// Runs the command for one call; `progress` in progress mode.
    fn call_command(&self, input: Value, progress: Option<ProgressReporter>) -> ActionFuture {
        let spec = Arc::clone(&self.inner);
        let control = Control {
            progress,
            publisher: self.publisher.get().cloned(),
        };
        Box::pin(async move { spec.run(&input, &control).await })
    }

    /// Keeps the publisher of the node that serves the action (the first one given: a
    /// node owns the actions it serves, so there is no second).
    fn keep(&self, publisher: &Publisher) {
        if self.publisher.set(publisher.clone()).is_err() {
            tracing::warn!(
                program = %self.inner.program,
                "an exec action served by a second node keeps publishing to the first one's events"
            );
        }
    }
}

impl Action for ExecAction {
    fn call(&self, input: Value) -> ActionFuture {
        self.call_command(input, None)
    }

    fn attach(&self, publisher: &Publisher) {
        self.keep(publisher);
    }
}

impl ProgressAction for ExecAction {
    fn call(&self, input: Value, progress: ProgressReporter) -> ActionFuture {
        self.call_command(input, Some(progress))
    }

    fn attach(&self, publisher: &Publisher) {
        self.keep(publisher);
    }
}

impl StreamAction for ExecAction {
    fn call(&self, input: Value, stream: StreamIo) -> ActionFuture {
        let spec = Arc::clone(&self.inner);
        Box::pin(async move { spec.run_stream(&input, stream).await })
    }
}

/// At most this many characters of a command's stderr go to our log.
pub(super) const STDERR_TAIL_CHARS: usize = 500;

/// What a command that ran to its end answered.
#[derive(Debug, PartialEq)]
enum Answer {
    /// The action's output.
    Output(Value),
    /// An application error the command reported.
    Reported(ActionError),
}

/// Why what a command printed is not an answer.
#[derive(Debug, PartialEq, thiserror::Error)]
enum BadAnswer {
    /// More than the limit on stdout.
    #[error("it printed more than the limit of {limit} bytes")]
    TooLarge {
        /// `max_output_bytes`.
        limit: usize,
    },
    /// It exited 0 but its stdout is not JSON.
    #[error("it printed output that is not JSON ({reason}); it starts: {start}")]
    NotJson {
        /// The parse error and its position.
        reason: String,
        /// The start of the output.
        start: String,
    },
    /// It exited non-zero with no error report on stdout.
    #[error("it printed no error report")]
    NoReport,
    /// Its error report cannot be used.
    #[error("its error report cannot be used: {0}")]
    BadReport(#[from] ReportError),
}

/// Why a call to a command failed, for our log (the caller gets a generic message).
#[derive(Debug, thiserror::Error)]
enum ExecError {
    /// The command cannot be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The command started without the pipes we asked for.
    #[error("`{program}` started without its standard streams")]
    NoStreams {
        /// The program.
        program: String,
    },
    /// Waiting for the command to end failed.
    #[error("waiting for `{program}` failed: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Reading its stdout failed.
    #[error("reading the output of `{program}` failed: {source}")]
    Read {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// It ended, but what it printed is not an answer.
    #[error("`{program}` {ended}: {problem}")]
    Answer {
        /// The program.
        program: String,
        /// How it ended: `exited with code 3`, `was killed by signal 9`.
        ended: String,
        /// What is wrong with its answer.
        problem: BadAnswer,
    },
    /// It ran past its timeout and was killed.
    #[error("`{program}` did not finish within {} and was killed", human(*.timeout))]
    Timeout {
        /// The program.
        program: String,
        /// The timeout.
        timeout: Duration,
    },
}

impl ExecError {
    /// What the caller gets: the status code, and a message that says nothing of the
    /// failure.
    fn to_caller(&self) -> ActionError {
        match self {
            Self::Timeout { .. } => ActionError::timeout(TIMED_OUT),
            _ => ActionError::bad_gateway(FAILED),
        }
    }
}

/// A failed call: why, and the end of the command's stderr (empty when none was read).
#[derive(Debug)]
struct Failure {
    error: ExecError,
    stderr: String,
}

impl From<ExecError> for Failure {
    fn from(error: ExecError) -> Self {
        Self {
            error,
            stderr: String::new(),
        }
    }
}

impl ExecSpec {
    async fn run(&self, input: &Value, control: &Control) -> Result<Value, ActionError> {
        match self.run_command(input, control).await {
            Ok(Answer::Output(value)) => Ok(value),
            Ok(Answer::Reported(error)) => Err(error),
            Err(Failure { error, stderr }) => {
                tracing::warn!(
                    %error,
                    %stderr,
                    "the action's command failed; the caller is told only that it failed"
                );
                Err(error.to_caller())
            }
        }
    }

    /// The command, its standard streams piped, in a process group of its own on Unix.
    pub(super) fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        #[cfg(unix)]
        command.process_group(0);
        command
    }

    async fn run_command(&self, input: &Value, control: &Control) -> Result<Answer, Failure> {
        let program = &self.program;
        let mut child = self.command().spawn().map_err(|source| ExecError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child.id();
        let outcome =
            tokio::time::timeout(self.timeout, self.exchange(&mut child, input, control)).await;
        match outcome {
            Ok(result) => result,
            Err(_) => {
                kill_group(pid);
                let _ = child.start_kill();
                Err(ExecError::Timeout {
                    program: program.clone(),
                    timeout: self.timeout,
                }
                .into())
            }
        }
    }

    async fn exchange(
        &self,
        child: &mut Child,
        input: &Value,
        control: &Control,
    ) -> Result<Answer, Failure> {
        let program = &self.program;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ExecError::NoStreams {
                program: program.clone(),
            }
            .into());
        };
        // JSON of a `Value` cannot fail to serialise.
        let body = serde_json::to_vec(input).unwrap_or_default();
        let write = async move {
            // A command that exits without reading its input is not an error by itself.
            let _ = stdin.write_all(&body).await;
            let _ = stdin.shutdown().await;
            drop(stdin);
        };
        let limit = self.max_output_bytes;
        let (_, stdout, stderr) = tokio::join!(
            write,
            read_lines(stdout, limit, self.max_line_bytes, control),
            stderr_tail(stderr)
        );
        let stderr = tail(String::from_utf8_lossy(&stderr).trim(), STDERR_TAIL_CHARS);
        let failure = |error| Failure {
            error,
            stderr: stderr.clone(),
        };
        let status = child.wait().await.map_err(|source| {
            failure(ExecError::Wait {
                program: program.clone(),
                source,
            })
        })?;
        let kept = stdout.map_err(|source| {
            failure(ExecError::Read {
                program: program.clone(),
                source,
            })
        })?;
        let stdout = answer_part(&kept.bytes);
        let answer =
            read_answer(status.success(), stdout, kept.truncated, limit).map_err(|problem| {
                failure(ExecError::Answer {
                    program: program.clone(),
                    ended: ended(status),
                    problem,
                })
            })?;
        if let Answer::Reported(error) = &answer {
            if !stderr.is_empty() {
                tracing::info!(
                    %error,
                    %stderr,
                    "the action's command reported an application error"
                );
            }
        }
        Ok(answer)
    }
}

/// Reads what a command printed on stdout (`truncated`: it printed more than `limit`),
/// given whether it exited 0, by the rule on [`ExecAction`]: an object whose only member is
/// `error` is an error object whatever the exit status; an object with a `status` member
/// is problem details when it exited non-zero; any other JSON is the output when it
/// exited 0.
fn read_answer(
    succeeded: bool,
    stdout: &[u8],
    truncated: bool,
    limit: usize,
) -> Result<Answer, BadAnswer> {
    if truncated {
        return Err(BadAnswer::TooLarge { limit });
    }
    let value = match serde_json::from_slice::<Value>(stdout) {
        Ok(value) => value,
        Err(_) if !succeeded => return Err(BadAnswer::NoReport),
        Err(error) => {
            return Err(BadAnswer::NotJson {
                reason: describe_json_error(&error, stdout),
                start: preview(stdout),
            })
        }
    };
    if let Value::Object(object) = &value {
        if let (1, Some(error)) = (object.len(), object.get("error")) {
            return Ok(Answer::Reported(read_error_object(error, None)?));
        }
        if !succeeded && object.contains_key("status") {
            return Ok(Answer::Reported(read_problem(object, None)?));
        }
    }
    if succeeded {
        Ok(Answer::Output(value))
    } else {
        Err(BadAnswer::NoReport)
    }
}

/// How a command ended: `exited with code 3`, `was killed by signal 9`.
pub(super) fn ended(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("was killed by signal {signal}");
    }
    format!("ended with {status}")
}

/// Bytes of a command's stderr kept for the log: its last ones. The rest is read and
/// dropped, so a command may write on stderr as much as it likes (its timeout still
/// applies) without ever blocking on a full pipe.
const STDERR_KEPT: usize = 4 * STDERR_TAIL_CHARS;

/// Reads `stderr` to its end and returns its last [`STDERR_KEPT`] bytes.
pub(super) async fn stderr_tail(mut stderr: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::with_capacity(2 * STDERR_KEPT);
    let mut buffer = [0u8; 4096];
    while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
        kept.extend_from_slice(buffer.get(..read).unwrap_or_default());
        if kept.len() > 2 * STDERR_KEPT {
            kept.drain(..kept.len() - STDERR_KEPT);
        }
    }
    let excess = kept.len().saturating_sub(STDERR_KEPT);
    kept.drain(..excess);
    kept
}

/// The last `chars` characters of `text`.
pub(super) fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - chars).collect();
    format!("…{tail}")
}

/// Kills the process group the command leads (its children too), on Unix.
pub(super) fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: kill(2) with a negative pid signals the process group we created for the
        // command with `process_group(0)`; it touches no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(succeeded: bool, stdout: &str) -> Result<Answer, BadAnswer> {
        read_answer(succeeded, stdout.as_bytes(), false, 1 << 20)
    }

    #[test]
    fn an_error_object_is_read_whatever_the_exit_status() {
        let stdout = r#"{"error": {"code": 404, "message": "no product P9"}}"#;
        for succeeded in [true, false] {
            assert_eq!(
                read(succeeded, stdout),
                Ok(Answer::Reported(ActionError::new(404, "no product P9")))
            );
        }
    }

    #[test]
    fn problem_details_are_read_only_from_a_command_that_failed() {
        let stdout = r#"{"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no product P9"}"#;
        assert_eq!(
            read(false, stdout),
            Ok(Answer::Reported(ActionError::new(404, "no product P9")))
        );
        // Exit 0: the same object is the output.
        let value: Value = serde_json::from_str(stdout).unwrap();
        assert_eq!(read(true, stdout), Ok(Answer::Output(value)));
    }

    #[test]
    fn an_output_with_an_error_member_beside_others_is_the_output() {
        for stdout in [
            r#"{"name": "Laptop", "error": {"code": 404, "message": "x"}}"#,
            r#"{"name": "Laptop", "error": null}"#,
            r#"[{"error": {"code": 404}}]"#,
            r#""error""#,
        ] {
            let value: Value = serde_json::from_str(stdout).unwrap();
            assert_eq!(read(true, stdout), Ok(Answer::Output(value)), "{stdout}");
        }
        // The same from a command that failed is no report.
        assert_eq!(
            read(false, r#"{"name": "Laptop", "error": null}"#),
            Err(BadAnswer::NoReport)
        );
    }

    #[test]
    fn a_report_with_a_bad_code_is_a_bad_answer() {
        assert_eq!(
            read(true, r#"{"error": {"code": 200, "message": "fine?"}}"#),
            Err(BadAnswer::BadReport(ReportError::BadCode {
                field: "error.code",
                found: "200".into()
            }))
        );
        assert_eq!(
            read(false, r#"{"error": "no product"}"#),
            Err(BadAnswer::BadReport(ReportError::NotAnObject {
                found: "a string"
            }))
        );
        assert_eq!(
            read(false, r#"{"status": "404"}"#),
            Err(BadAnswer::BadReport(ReportError::BadCode {
                field: "status",
                found: "a string".into()
            }))
        );
        assert_eq!(
            read(false, r#"{"title": "Not Found"}"#),
            Err(BadAnswer::NoReport)
        );
    }

    #[test]
    fn no_json_or_too_much_is_a_bad_answer() {
        assert_eq!(read(false, ""), Err(BadAnswer::NoReport));
        assert_eq!(read(false, "disk full"), Err(BadAnswer::NoReport));
        assert_eq!(
            read(true, "not json"),
            Err(BadAnswer::NotJson {
                reason: "syntax error at line 1, column 2".into(),
                start: "\"not json\"".into()
            })
        );
        assert_eq!(
            read_answer(true, b"{}", true, 2),
            Err(BadAnswer::TooLarge { limit: 2 })
        );
        assert_eq!(read(true, " 7 "), Ok(Answer::Output(json!(7))));
    }

    #[test]
    fn a_failure_tells_the_caller_nothing_of_itself() {
        let error = ExecError::Answer {
            program: "/srv/secret/tool".into(),
            ended: "exited with code 3".into(),
            problem: BadAnswer::NoReport,
        };
        assert_eq!(
            error.to_string(),
            "`/srv/secret/tool` exited with code 3: it printed no error report"
        );
        assert_eq!(error.to_caller(), ActionError::new(502, FAILED));
        let timeout = ExecError::Timeout {
            program: "sh".into(),
            timeout: Duration::from_millis(300),
        };
        assert_eq!(
            timeout.to_string(),
            "`sh` did not finish within 300 ms and was killed"
        );
        assert_eq!(timeout.to_caller(), ActionError::new(504, TIMED_OUT));
    }
}
