//! `concord handler …`: generate protocol handler modules, run one function in the
//! sandbox, and test handlers against negotiated test cases.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Subcommand, ValueEnum};
use concord_handlers::{
    template, CaseRunner, Code, GenerateError, Generated, Generator, Local, Origin, Verifier,
};
use concord_negotiate::{ProtocolDocument, TestCases};
use concord_sandbox::{Function, Limits, Role, Sandbox};
use serde_json::Value;

use crate::consensus::fixed_action;
use crate::input::{read_action, read_need, read_protocol, read_text};
use crate::llm;
use crate::output::{self, checked, note, out, outln, Wrong};
use crate::runtime::block_on;

/// Commands on protocol handler modules.
#[derive(Debug, Subcommand)]
pub enum HandlerCommand {
    /// Write the handler module for one side of a protocol and print it.
    ///
    /// The template is used when it fits and passes the test cases (the given ones, else
    /// cases drafted from the protocol's schemas); with `--llm`, an LLM writes the module
    /// when it does not.
    ///
    /// Exits 1 when no module can be written that passes (no template fits and no `--llm`,
    /// or the LLM's attempts all fail), 2 when the LLM cannot be reached or a file read.
    #[command(after_help = "\
Examples:
  concord handler generate product-info.md --role provider --action-schema action.json
  concord handler generate product-info.md --role requester --action getProductInfo --cases cases.md")]
    Generate {
        /// The agreed protocol document; standard input when `-`.
        protocol: PathBuf,
        /// Which side the module is for.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// Our action (provider) or the peer's action we call (requester), as JSON:
        /// `{"name", "description"?, "input"?: schema, "output"?: schema}`. Default: the
        /// protocol's own fields.
        #[arg(long)]
        action_schema: Option<PathBuf>,
        /// Requester: our need, as JSON `{"action", "input"?: schema, "output"?: schema}`.
        #[arg(long, conflicts_with = "action_schema")]
        need: Option<PathBuf>,
        /// The action's name, when neither the protocol (a `const`) nor a schema file says.
        #[arg(long)]
        action: Option<String>,
        /// The negotiated test cases to verify the module with.
        #[arg(long)]
        cases: Option<PathBuf>,
        /// Let an LLM write the module when no template fits (CONCORD_LLM_BASE_URL,
        /// CONCORD_LLM_API_KEY, CONCORD_LLM_MODEL, or OPENAI_BASE_URL / OPENAI_API_KEY).
        #[arg(long)]
        llm: bool,
    },
    /// Call one function of a module in the sandbox and print its result as JSON.
    ///
    /// The role follows from the function. Exits 1 naming the error, or the limit hit.
    ///
    /// The module is a strict-mode script declaring its role's two functions, or an ES
    /// module exporting them (`export function encodeRequest(…)`, `export { f, g }`); it
    /// may not `import` anything. The argument is what the runtime passes: `encodeRequest`
    /// takes `{messageId, input}`; `decodeResponse` and `decodeRequest` take the message;
    /// `encodeResponse` takes `{messageId, result}` or `{messageId, error: {code,
    /// message}}`. `decodeResponse` returns `{messageId, output}` (or `error`),
    /// `decodeRequest` `{messageId, input}`.
    ///
    /// `result` and `output` are different values on different sides, hence two names:
    /// `result` is what the provider's own action returned (its `output` schema), before
    /// any message exists; `output` is what the requester's caller gets back once
    /// `decodeResponse` has read the response (the caller's own `output` schema, which
    /// may name and shape things differently). A `decodeResponse` returning `result` breaks
    /// the contract, and the templates' `encodeResponse` does not take `output`.
    #[command(after_help = "\
Examples:
  concord handler run requester.js encodeRequest '{\"messageId\":\"m1\",\"input\":{\"productId\":\"P1\"}}'
  concord handler run provider.js decodeRequest '{\"messageId\":\"m1\",\"type\":\"REQUEST\",\"action\":\"getProductInfo\",\"productId\":\"P1\"}'")]
    Run {
        /// The module (a strict-mode script declaring its role's functions, or an ES module
        /// exporting them).
        module: PathBuf,
        /// `encodeRequest`, `decodeResponse`, `decodeRequest` or `encodeResponse`.
        function: String,
        /// The argument, as JSON.
        argument: String,
        /// Memory cap in MiB (default 32).
        #[arg(long)]
        memory_mb: Option<usize>,
        /// Per-call deadline in milliseconds (default 100).
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Run test cases through template handlers for both sides; print a table of results.
    ///
    /// Exits 1 when any case fails, after the failures and the fix-error report.
    #[command(after_help = "\
Examples:
  concord handler test product-info.md cases.md
  concord handler test product-info.md cases.md --provider provider.js")]
    Test {
        /// The agreed protocol document.
        protocol: PathBuf,
        /// The test cases.
        cases: PathBuf,
        /// The provider's action, as JSON (as for `generate`). Default: the protocol's fields.
        #[arg(long)]
        action_schema: Option<PathBuf>,
        /// The action's name, when neither the protocol, the schema file nor the cases say.
        #[arg(long)]
        action: Option<String>,
        /// Test this requester module instead of the template's.
        #[arg(long)]
        requester: Option<PathBuf>,
        /// Test this provider module instead of the template's.
        #[arg(long)]
        provider: Option<PathBuf>,
    },
}

/// A side of a protocol, on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    /// Sends requests.
    Requester,
    /// Answers them.
    Provider,
}

impl From<RoleArg> for Role {
    fn from(role: RoleArg) -> Self {
        match role {
            RoleArg::Requester => Role::Requester,
            RoleArg::Provider => Role::Provider,
        }
    }
}

/// Runs one `concord handler` command.
pub fn run(command: HandlerCommand) -> anyhow::Result<ExitCode> {
    match command {
        HandlerCommand::Generate {
            protocol,
            role,
            action_schema,
            need,
            action,
            cases,
            llm,
        } => {
            let document = match read_protocol(&protocol)? {
                Ok(document) => document,
                Err(code) => return Ok(code),
            };
            let cases = match cases.as_deref().map(read_cases).transpose()? {
                Some(Ok(cases)) => Some(cases),
                Some(Err(code)) => return Ok(code),
                None => None,
            };
            let role = Role::from(role);
            let local = match (role, need) {
                (Role::Requester, Some(need)) => {
                    Local::Requester(read_need(&need).map_err(checked)?)
                }
                (Role::Provider, Some(_)) => {
                    bail!("--need is for the requester; the provider takes --action-schema")
                }
                (_, None) => local_side(
                    &document,
                    role,
                    action_schema.as_deref(),
                    action.as_deref(),
                    cases.as_ref(),
                )?,
            };
            let mut generator = Generator::new();
            if llm {
                generator = generator.with_llm(llm::client()?);
            }
            match block_on(generator.generate(&document, &local, cases.as_ref()))? {
                Ok(generated) => {
                    out!("{}", generated.source)?;
                    report_generated(&generated);
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    let usage = error.usage();
                    let cost = if usage.calls > 0 {
                        format!(
                            " ({} LLM call(s), {} tokens in, {} out)",
                            usage.calls, usage.prompt_tokens, usage.completion_tokens
                        )
                    } else {
                        String::new()
                    };
                    let line = format!("{}{cost}", output::one_line(&error.to_string()));
                    Err(match error {
                        GenerateError::Llm { .. } | GenerateError::Prompt(_) => {
                            anyhow!("{line}")
                        }
                        _ => Wrong::error(line),
                    })
                }
            }
        }
        HandlerCommand::Run {
            module,
            function,
            argument,
            memory_mb,
            timeout_ms,
        } => {
            let function: Function = function.parse()?;
            let argument: Value =
                serde_json::from_str(&argument).context("the argument is not valid JSON")?;
            let mut limits = Limits::default();
            if let Some(megabytes) = memory_mb {
                limits.memory_bytes = megabytes
                    .checked_mul(1 << 20)
                    .ok_or_else(|| anyhow!("--memory-mb {megabytes} is too large"))?;
            }
            if let Some(milliseconds) = timeout_ms {
                limits.call_timeout = Duration::from_millis(milliseconds);
            }
            limits.validate()?;
            let source = read_text(Some(&module), "the module")?;
            let mut handler = Sandbox::load(&source, function.role(), limits)
                .map_err(|error| Wrong::error(format!("{}: {error}", module.display())))?;
            match handler.call(function, &argument) {
                Ok(result) => {
                    output::json(&result)?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) if error.is_limit() => {
                    Err(Wrong::error(format!("{function} was stopped: {error}")))
                }
                Err(error) => Err(Wrong::error(format!("{function} failed: {error}"))),
            }
        }
        HandlerCommand::Test {
            protocol,
            cases,
            action_schema,
            action,
            requester,
            provider,
        } => {
            let document = match read_protocol(&protocol)? {
                Ok(document) => document,
                Err(code) => return Ok(code),
            };
            let cases = match read_cases(&cases)? {
                Ok(cases) => cases,
                Err(code) => return Ok(code),
            };
            let provider_side = local_side(
                &document,
                Role::Provider,
                action_schema.as_deref(),
                action.as_deref(),
                Some(&cases),
            )?;
            let requester_side = match &provider_side {
                Local::Provider(spec) if action_schema.is_some() => Local::requester_for(spec),
                _ => local_side(
                    &document,
                    Role::Requester,
                    None,
                    Some(provider_side.action()),
                    None,
                )?,
            };
            let verifier = Verifier::new(&document).map_err(Wrong::error)?;
            let mut handlers = Vec::new();
            for (side, module) in [(&requester_side, &requester), (&provider_side, &provider)] {
                match load_side(&document, side, module.as_deref())? {
                    Ok(handler) => handlers.push(handler),
                    Err(code) => return Ok(code),
                }
            }
            let [requester_handler, provider_handler] = handlers.as_mut_slice() else {
                bail!("internal error: expected two handlers");
            };
            let report = CaseRunner::new(&verifier)
                .with_side(requester_handler, &requester_side)
                .with_side(provider_handler, &provider_side)
                .run(&cases);
            out!("{}", report.table())?;
            match report.fix_error_report() {
                None => Ok(ExitCode::SUCCESS),
                Some(fix) => {
                    outln!("\nFailures:\n{}", report.details())?;
                    outln!("Fix-error report (for fixErrorNegotiation.errorDescription):\n{fix}")?;
                    let failed = report.cases.iter().filter(|case| !case.passed()).count();
                    Err(Wrong::error(format!(
                        "{failed} of {} test case(s) failed (the failures and the fix-error \
                         report are on standard output)",
                        report.cases.len()
                    )))
                }
            }
        }
    }
}

/// The test cases, or exit 1 when they do not parse.
fn read_cases(path: &Path) -> anyhow::Result<Result<TestCases, ExitCode>> {
    let text = read_text(Some(path), "the test cases")?;
    Ok(TestCases::parse(&text).map_err(|error| {
        note(format!("{}: {error}", path.display()));
        ExitCode::from(1)
    }))
}

/// Our side: from a schema file, or from the protocol's own fields and an action name.
fn local_side(
    document: &ProtocolDocument,
    role: Role,
    action_schema: Option<&Path>,
    action: Option<&str>,
    cases: Option<&TestCases>,
) -> anyhow::Result<Local> {
    if let Some(path) = action_schema {
        let spec = read_action(path).map_err(checked)?;
        return Ok(match role {
            Role::Provider => Local::Provider(spec),
            Role::Requester => Local::requester_for(&spec),
        });
    }
    let name = match action {
        Some(name) => name.to_owned(),
        None => action_in(document, cases)?,
    };
    Ok(Local::from_protocol(document, role, &name))
}

/// The action's name from the protocol's `const`, else from the test cases' requests.
fn action_in(document: &ProtocolDocument, cases: Option<&TestCases>) -> anyhow::Result<String> {
    if let Some(name) = fixed_action(document) {
        return Ok(name.to_owned());
    }
    let mut named = cases
        .into_iter()
        .flat_map(|cases| &cases.cases)
        .filter_map(|case| case.request.get("action").and_then(Value::as_str));
    if let Some(first) = named.next() {
        if named.all(|other| other == first) {
            return Ok(first.to_owned());
        }
    }
    bail!(
        "the protocol does not fix the action's name (no `const` for `action`): pass \
         --action NAME or --action-schema FILE"
    )
}

/// A loaded handler, run the way a node runs it (our template natively, any other module in
/// the sandbox): the given module, or the template; exit 1 when neither works.
fn load_side(
    document: &ProtocolDocument,
    side: &Local,
    module: Option<&Path>,
) -> anyhow::Result<Result<Code, ExitCode>> {
    let (source, name) = match module {
        Some(path) => (
            read_text(Some(path), "the module")?,
            path.display().to_string(),
        ),
        None => match template(document, side) {
            Ok(source) => (source, format!("the {} template", side.role())),
            Err(error) => {
                note(format!(
                    "{error}; pass --{} MODULE to test a module of your own",
                    side.role()
                ));
                return Ok(Err(ExitCode::from(1)));
            }
        },
    };
    Ok(
        Code::load(&source, document, side, Limits::default()).map_err(|error| {
            note(format!("{name}: {error}"));
            ExitCode::from(1)
        }),
    )
}

/// Says on standard error, on one line, who wrote the module and what checked it.
fn report_generated(generated: &Generated) {
    let checked = match generated.cases_run {
        0 => "loaded, no test cases to run".to_owned(),
        n => format!("passes {n} test case(s)"),
    };
    match generated.origin {
        Origin::Template => eprintln!(
            "concord: {} module written by the template; {checked}",
            generated.role
        ),
        Origin::Llm { attempts } => {
            let usage = generated.usage;
            let no_template = generated
                .template_rejected
                .as_ref()
                .map(|reason| format!(" (no template: {reason})"))
                .unwrap_or_default();
            note(format!(
                "{} module written by the LLM on attempt {attempts}{no_template}; {checked}; \
                 {} LLM call(s), {} tokens in, {} out, {:.1} s",
                generated.role,
                usage.calls,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.wall_time.as_secs_f64()
            ));
        }
    }
}
