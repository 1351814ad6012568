//! `wasmbox describe-tools`: the tools of a tools file as the model writing guest code
//! should see them — Python stubs (`--format pyi`), TypeScript declarations (`ts`) or a
//! JSON catalogue (`json`, the default), generated from their JSON Schemas by
//! [`wasmbox_stubs`]; `--search` keeps the tools best matching some words.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::ValueEnum;
use wasmbox::ToolSummary;

use crate::command_tool;

/// The arguments of `describe-tools`.
#[derive(clap::Args)]
pub struct DescribeToolsArgs {
    /// The tools file (TOML or JSON), as `run --tools` reads it.
    #[arg(long = "tools", value_name = "FILE")]
    tools: Option<PathBuf>,
    /// The tools file, given without `--tools`.
    #[arg(value_name = "FILE", conflicts_with = "tools")]
    file: Option<PathBuf>,
    /// What to print: `json` (each tool with its schema, and how Python and JavaScript call
    /// it), `pyi` (a Python stub module) or `ts` (TypeScript declarations).
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// Only the tools best matching these words (in their names, then descriptions), best first.
    #[arg(long, value_name = "WORDS")]
    search: Option<String>,
    /// With `--search`: how many tools at most.
    #[arg(long, default_value_t = 10, requires = "search")]
    limit: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Pyi,
    Ts,
}

/// What `describe-tools` prints for `args`.
pub fn describe(args: &DescribeToolsArgs) -> Result<String> {
    let Some(path) = args.tools.as_ref().or(args.file.as_ref()) else {
        bail!("describe-tools needs a tools file: --tools FILE");
    };
    let tools = command_tool::load(path)?;
    // In the registry's order, which is the order a guest's `list_tools()` shows.
    let mut summaries: Vec<ToolSummary> = tools
        .iter()
        .map(|tool| ToolSummary {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            args_schema: tool.args_schema().to_string(),
        })
        .collect();
    if let Some(query) = &args.search {
        summaries = wasmbox_stubs::search(&summaries, query, args.limit).into_iter().cloned().collect();
    }
    Ok(match args.format {
        Format::Json => serde_json::to_string_pretty(&wasmbox_stubs::json(&summaries))? + "\n",
        Format::Pyi => wasmbox_stubs::python(&summaries),
        Format::Ts => wasmbox_stubs::typescript(&summaries),
    })
}
