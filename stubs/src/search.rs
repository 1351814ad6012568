//! Finding tools in a large catalogue by name and description.
//!
//! The query and each tool's name and description are split into lower-case words (at
//! anything that is not a letter or digit, and at camelCase humps: `readFile` is `read`,
//! `file`; plurals count as singulars). A query word scores most when it is a word of the name, less when it begins
//! one or occurs inside the name, and less again when it is (or begins) a word of the
//! description; tools matching more of the query's words rank first, then by score, then
//! by name. A tool matching nothing is left out.

use std::collections::HashSet;

use wasmbox::ToolSummary;

/// Most query words considered.
const MAX_QUERY_WORDS: usize = 32;
/// Most description characters read per tool.
const MAX_DESCRIPTION_CHARS: usize = 4000;

/// The tools best matching `query`, best first, at most `limit`; deterministic for the
/// same input. An empty query (no letters or digits) lists the first `limit` tools in
/// the order given.
pub fn search<'t>(tools: &'t [ToolSummary], query: &str, limit: usize) -> Vec<&'t ToolSummary> {
    let mut query_words = Vec::new();
    let mut seen = HashSet::new();
    for word in words(query) {
        if query_words.len() == MAX_QUERY_WORDS {
            break;
        }
        if seen.insert(word.clone()) {
            query_words.push(word);
        }
    }
    if query_words.is_empty() {
        return tools.iter().take(limit).collect();
    }
    let whole_query = query.trim().to_lowercase();
    let mut ranked: Vec<(usize, u32, &ToolSummary)> = tools
        .iter()
        .filter_map(|tool| {
            let (matched, score) = score(tool, &query_words, &whole_query);
            (matched > 0).then_some((matched, score, tool))
        })
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then_with(|| a.2.name.cmp(&b.2.name)));
    ranked.into_iter().take(limit).map(|(_, _, tool)| tool).collect()
}

/// (how many query words matched, total score).
fn score(tool: &ToolSummary, query_words: &[String], whole_query: &str) -> (usize, u32) {
    let name = tool.name.to_lowercase();
    let name_words = words(&tool.name);
    let description: String = tool.description.chars().take(MAX_DESCRIPTION_CHARS).collect();
    let description_words = words(&description);
    let mut matched = 0;
    // The query is the name, give or take case and separators (`read file`, `readFile`).
    let mut total = if name == whole_query || name_words == query_words { 50 } else { 0 };
    for q in query_words {
        let in_name = if name_words.iter().any(|w| w == q) {
            10
        } else if q.chars().count() >= 2 && name_words.iter().any(|w| w.starts_with(q.as_str())) {
            6
        } else if q.chars().count() >= 3 && name.contains(q.as_str()) {
            3
        } else {
            0
        };
        let in_description = if description_words.iter().any(|w| w == q) {
            3
        } else if q.chars().count() >= 3 && description_words.iter().any(|w| w.starts_with(q.as_str())) {
            2
        } else {
            0
        };
        if in_name + in_description > 0 {
            matched += 1;
            total += in_name + in_description;
        }
    }
    (matched, total)
}

/// Lower-case words: split at non-alphanumerics and at a lower-case letter or digit
/// followed by an upper-case one; plurals made singular ([`singular`]).
fn words(text: &str) -> Vec<String> {
    split_words(text).into_iter().map(|w| singular(&w)).collect()
}

/// `directories` → `directory`, `files` → `file`: the English plural endings, so that a
/// query in the singular finds a name in the plural and the other way round.
fn singular(word: &str) -> String {
    if word.len() > 4 && word.ends_with("ies") {
        format!("{}y", &word[..word.len() - 3])
    } else if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_owned()
    } else {
        word.to_owned()
    }
}

fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_numeric();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_humps_and_punctuation() {
        assert_eq!(words("readFile get-sum HTTPServer a.b"), ["read", "file", "get", "sum", "httpserver", "a", "b"]);
        assert_eq!(words("directories files class"), ["directory", "file", "class"]);
    }
}
