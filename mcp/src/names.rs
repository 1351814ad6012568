//! Guest names for downstream tools.
//!
//! A wasmbox tool name is `[a-z_][a-z0-9_]*` of at most [`MAX_TOOL_NAME_BYTES`] bytes (it
//! becomes a Python and JS identifier); MCP tool names are not (`get-sum`, `files.read`,
//! `getSum`). A downstream tool is offered as `<server>__<tool>`, each part spelled as an
//! identifier: `camelCase` becomes `camel_case`, every other character that is not a
//! letter or digit becomes `_`, letters are lower-cased. A name longer than the cap keeps
//! its start and ends in a hash of the original, so it stays unique and stable.
//! Two tools that would get one name get none (see [`assign`]).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use wasmbox::MAX_TOOL_NAME_BYTES;

/// Separates the server's part from the tool's in a guest name.
pub const SEPARATOR: &str = "__";

/// `text` as an identifier part: `getSum` → `get_sum`, `files.read` → `files_read`.
pub fn identifier(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut previous: Option<char> = None;
    for c in text.chars() {
        if c.is_ascii_uppercase() {
            if previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else {
            out.push('_');
        }
        previous = Some(c);
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The guest name of `server`'s tool `tool`.
pub fn guest_name(server: &str, tool: &str) -> String {
    let mut name = format!("{}{SEPARATOR}{}", identifier(server), identifier(tool));
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if name.len() > MAX_TOOL_NAME_BYTES {
        let hash = hex::encode(Sha256::digest(format!("{server}\0{tool}").as_bytes()));
        // The name is ASCII, so any byte index is a character boundary.
        name.truncate(MAX_TOOL_NAME_BYTES - 9);
        name.push('_');
        name.push_str(&hash[..8]);
    }
    name
}

/// Guest names for `(server, tool)` pairs: each pair's name, or for pairs whose names
/// collide, the other pairs that claim it. A collision refuses every pair involved, so
/// which tool a name calls never depends on the order in which tools were listed.
pub fn assign<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Assigned<'a>> {
    let mut by_name: BTreeMap<String, Vec<(&'a str, &'a str)>> = BTreeMap::new();
    for (server, tool) in pairs {
        by_name.entry(guest_name(server, tool)).or_default().push((server, tool));
    }
    let mut out = Vec::new();
    for (name, claimants) in by_name {
        if let [(server, tool)] = claimants[..] {
            out.push(Assigned { server, tool, name: Ok(name) });
        } else {
            let all: Vec<String> = claimants.iter().map(|(s, t)| format!("`{t}` of `{s}`")).collect();
            for &(server, tool) in &claimants {
                let message = format!("{} would all be called `{name}`; none is offered", all.join(" and "));
                out.push(Assigned { server, tool, name: Err(message) });
            }
        }
    }
    out
}

/// One downstream tool's guest name, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned<'a> {
    /// The server's configured name.
    pub server: &'a str,
    /// The tool's name on that server.
    pub tool: &'a str,
    /// Its guest name, or the collision that refused it.
    pub name: Result<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_identifiers() {
        assert_eq!(guest_name("everything", "get-sum"), "everything__get_sum");
        assert_eq!(guest_name("Files", "files.readFile"), "files__files_read_file");
        assert_eq!(guest_name("my-server", "getHTTPStatus2x"), "my_server__get_httpstatus2x");
        assert_eq!(guest_name("9lives", "ä"), "_9lives___");
        let long = guest_name("server", &"x".repeat(200));
        assert_eq!(long.len(), MAX_TOOL_NAME_BYTES);
        assert_ne!(long, guest_name("server", &"x".repeat(201)), "a cut name keeps a hash of the whole");
        let mut tools = wasmbox::Tools::new();
        for name in [guest_name("a.b", "c-d"), long, guest_name("9", "ü€")] {
            let tool = wasmbox::Tool::new(name, "", serde_json::json!({"type": "object"}), |_| async {
                Ok(serde_json::Value::Null)
            });
            tools.register(tool).expect("a valid wasmbox tool name");
        }
    }

    #[test]
    fn colliding_names_refuse_every_claimant() {
        let assigned = assign([("s", "get-sum"), ("s", "get_sum"), ("s", "echo")]);
        assert_eq!(assigned.len(), 3);
        let echo = assigned.iter().find(|a| a.tool == "echo").unwrap();
        assert_eq!(echo.name.as_deref(), Ok("s__echo"));
        for tool in ["get-sum", "get_sum"] {
            let refused = assigned.iter().find(|a| a.tool == tool).unwrap();
            let message = refused.name.as_ref().unwrap_err();
            assert!(message.contains("`get-sum` of `s` and `get_sum` of `s`"), "{message}");
        }
    }
}
