//! One language-agnostic conformance suite, run against every language guest.
//!
//! Cases are data in `tests/conformance/*.toml`: code per language plus expectations.
//! A new guest language gets the whole suite by adding its runtime to `LANGUAGES` and
//! its code to the cases. Fields of a case (all but `name` optional):
//!
//! - `python`, `js`: the code per language (a case without code for a language is skipped
//!   for it, and counted, so the per-language totals stay visible);
//! - `input`: the run's JSON input; `scope`: tool names in scope (default: all test tools
//!   but `secret`); `limits`: a partial `Limits` table;
//! - `status` (default `ok`); `value`, `value_is_null`; `error_kind` (a string, or a table
//!   by language); `error_message_contains`; `traceback_contains`;
//! - `stdout`, `stderr` (exact), `stdout_truncated`, `stdout_bytes`;
//! - `tool_calls` (how many), `tool_statuses` (their statuses, in order);
//! - `then_<lang>` + `then_value` / `then_value_by_lang`: a second, fresh run afterwards.
//!
//! TOML has no null: the string `"__null__"` inside a `value` stands for JSON null.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use wasmbox::{Limits, Outcome, Runtime, Sandbox, Scope};

use crate::support::tools;

#[derive(Debug, Deserialize)]
struct CaseFile {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    python: Option<String>,
    js: Option<String>,
    input: Option<Value>,
    scope: Option<Vec<String>>,
    limits: Option<Limits>,
    status: Option<String>,
    value: Option<Value>,
    #[serde(default)]
    value_is_null: bool,
    error_kind: Option<PerLanguage>,
    error_message_contains: Option<String>,
    traceback_contains: Option<String>,
    stdout: Option<String>,
    stderr: Option<String>,
    stdout_truncated: Option<bool>,
    stdout_bytes: Option<usize>,
    tool_calls: Option<usize>,
    tool_statuses: Option<Vec<String>>,
    then_python: Option<String>,
    then_js: Option<String>,
    then_value: Option<Value>,
    then_value_by_lang: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PerLanguage {
    Same(String),
    ByLanguage(std::collections::BTreeMap<String, String>),
}

impl PerLanguage {
    fn for_language(&self, language: &str) -> Option<&str> {
        match self {
            PerLanguage::Same(s) => Some(s),
            PerLanguage::ByLanguage(map) => map.get(language).map(String::as_str),
        }
    }
}

impl Case {
    fn code(&self, language: &str) -> Option<&str> {
        match language {
            "python" => self.python.as_deref(),
            "js" => self.js.as_deref(),
            _ => None,
        }
    }

    fn then_code(&self, language: &str) -> Option<&str> {
        match language {
            "python" => self.then_python.as_deref(),
            "js" => self.then_js.as_deref(),
            _ => None,
        }
    }
}

fn load_cases() -> Vec<(String, Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("tests/conformance").map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "toml")) {
        let text = std::fs::read_to_string(file).unwrap();
        let parsed: CaseFile = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        cases.extend(parsed.case.into_iter().map(|case| (stem.clone(), case)));
    }
    cases
}

fn with_nulls(value: &Value) -> Value {
    match value {
        Value::String(s) if s == "__null__" => Value::Null,
        Value::Array(items) => Value::Array(items.iter().map(with_nulls).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), with_nulls(v))).collect()),
        other => other.clone(),
    }
}

fn sandbox_for(runtime: &Runtime, case: &Case) -> Sandbox {
    let scope = match &case.scope {
        Some(names) => Scope::only(names.iter().cloned()),
        None => Scope::only(["add", "echo", "weather", "slow"]),
    };
    Sandbox::new(runtime.clone(), tools()).scope(scope).limits(case.limits.clone().unwrap_or_default())
}

/// Checks one outcome against the case; returns what did not match.
fn check(case: &Case, language: &str, outcome: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let status = case.status.as_deref().unwrap_or("ok");
    expect(outcome.status.as_str() == status, format!("status {} (expected {status})", outcome.status));
    if let Some(value) = &case.value {
        let value = with_nulls(value);
        expect(outcome.value.as_ref() == Some(&value), format!("value {:?} (expected {value})", outcome.value));
    }
    if case.value_is_null {
        expect(outcome.value == Some(Value::Null), format!("value {:?} (expected null)", outcome.value));
    }
    let error = outcome.error.as_ref();
    if let Some(kind) = case.error_kind.as_ref().and_then(|k| k.for_language(language)) {
        expect(
            error.is_some_and(|e| e.kind == kind),
            format!("error kind {:?} (expected {kind})", error.map(|e| &e.kind)),
        );
    }
    if let Some(part) = &case.error_message_contains {
        expect(error.is_some_and(|e| e.message.contains(part.as_str())), format!("error {error:?} lacks {part:?}"));
    }
    if let Some(part) = &case.traceback_contains {
        expect(
            error.is_some_and(|e| e.traceback.contains(part.as_str())),
            format!("traceback {error:?} lacks {part:?}"),
        );
    }
    if let Some(stdout) = &case.stdout {
        expect(&outcome.stdout.text == stdout, format!("stdout {:?} (expected {stdout:?})", outcome.stdout.text));
    }
    if let Some(stderr) = &case.stderr {
        expect(&outcome.stderr.text == stderr, format!("stderr {:?} (expected {stderr:?})", outcome.stderr.text));
    }
    if let Some(truncated) = case.stdout_truncated {
        expect(outcome.stdout.truncated == truncated, format!("stdout truncated {}", outcome.stdout.truncated));
    }
    if let Some(bytes) = case.stdout_bytes {
        expect(
            outcome.stdout.text.len() == bytes,
            format!("stdout is {} bytes (expected {bytes})", outcome.stdout.text.len()),
        );
    }
    if let Some(count) = case.tool_calls {
        expect(
            outcome.tool_calls.len() == count,
            format!("{} tool calls (expected {count})", outcome.tool_calls.len()),
        );
    }
    if let Some(statuses) = &case.tool_statuses {
        let got: Vec<&str> = outcome.tool_calls.iter().map(|c| c.status.as_str()).collect();
        expect(got == *statuses, format!("tool statuses {got:?} (expected {statuses:?})"));
    }
    problems
}

/// Runs every case for `language`; a case with a fuel budget runs on `fuel_runtime`.
async fn run_suite(language: &str, runtime: Runtime, fuel_runtime: fn() -> Runtime) {
    let cases = load_cases();
    let (mut ran, mut failures) = (0, Vec::new());
    for (file, case) in &cases {
        let Some(code) = case.code(language) else { continue };
        ran += 1;
        let metered = case.limits.as_ref().is_some_and(|limits| limits.fuel.is_some());
        let runtime = if metered { fuel_runtime() } else { runtime.clone() };
        let sandbox = sandbox_for(&runtime, case);
        let input = case.input.clone().unwrap_or(Value::Null);
        let outcome = sandbox.run_with_input(code, &input).await;
        let mut problems = check(case, language, &outcome);
        if let Some(then) = case.then_code(language) {
            let next = sandbox_for(&runtime, &Case { limits: None, ..clone_case(case) }).run(then).await;
            let expected = case
                .then_value
                .clone()
                .or_else(|| case.then_value_by_lang.as_ref().and_then(|m| m.get(language).cloned()))
                .map(|v| with_nulls(&v));
            if next.value != expected {
                problems.push(format!("next run: {:?} {:?} (expected {expected:?})", next.status, next.value));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{file}: {}: {}\n    outcome: {}", case.name, problems.join("; "), short(&outcome)));
        }
    }
    println!("conformance[{language}]: {} passed, {} failed of {ran} cases", ran - failures.len(), failures.len());
    assert!(ran >= 40, "{language}: only {ran} conformance cases");
    assert!(failures.is_empty(), "{language}: {} conformance failures:\n{}", failures.len(), failures.join("\n"));
}

fn clone_case(case: &Case) -> Case {
    Case {
        name: case.name.clone(),
        python: None,
        js: None,
        input: None,
        scope: case.scope.clone(),
        limits: None,
        status: None,
        value: None,
        value_is_null: false,
        error_kind: None,
        error_message_contains: None,
        traceback_contains: None,
        stdout: None,
        stderr: None,
        stdout_truncated: None,
        stdout_bytes: None,
        tool_calls: None,
        tool_statuses: None,
        then_python: None,
        then_js: None,
        then_value: None,
        then_value_by_lang: None,
    }
}

fn short(outcome: &Outcome) -> String {
    let mut text = serde_json::json!({
        "status": outcome.status, "value": outcome.value, "error": outcome.error,
        "stdout": outcome.stdout.text.chars().take(200).collect::<String>(),
        "stderr": outcome.stderr.text.chars().take(200).collect::<String>(),
    })
    .to_string();
    text.truncate(1200);
    text
}

#[tokio::test]
async fn conformance_python() {
    run_suite("python", crate::support::python(), crate::support::python_fuel).await;
}

#[tokio::test]
async fn conformance_js() {
    run_suite("js", crate::support::javascript(), crate::support::javascript_fuel).await;
}

/// The snapshot holds one random state: every run must start from fresh randomness.
#[tokio::test]
async fn runs_do_not_share_random_state() {
    let python =
        "import os, random, uuid\n[random.getrandbits(64), random.random(), str(uuid.uuid4()), os.urandom(8).hex()]";
    let js = "return [Math.random(), crypto.randomUUID(), crypto.getRandomValues(new Uint32Array(2)).join()]";
    for (runtime, code) in [(crate::support::python(), python), (crate::support::javascript(), js)] {
        let sandbox = wasmbox::Sandbox::new(runtime, wasmbox::Tools::new());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let outcome = sandbox.run(code).await;
            for part in crate::support::value(&outcome).as_array().expect("a list") {
                assert!(seen.insert(part.to_string()), "{part} came back in two runs of {code:?}");
            }
        }
    }
}
