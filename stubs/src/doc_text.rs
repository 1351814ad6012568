//! Putting text a tool's author chose into source code safely: string literals,
//! docstrings and comments that no description can end early, and no control or
//! bidirectional character that displays differently from what the parser reads.

/// Longest tool (and object) description kept.
pub(crate) const MAX_TOOL_DESCRIPTION_CHARS: usize = 4000;

/// `text` cut to `max_chars` characters, marked with `…` when cut.
pub(crate) fn truncated(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Characters that are spelled as escapes in literals and replaced in comments: C0 and
/// C1 controls, line and paragraph separators (a line break to some parsers), zero-width
/// and bidirectional formatting characters (they make code read differently than it runs).
fn is_hidden(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `text` as a double-quoted string literal that Python and JavaScript both read back
/// as `text`.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_hidden(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` as the body of a Python `"""` docstring, each line after the first indented by
/// `indent`. Backslashes are doubled; a quote that would make three in a row, or that
/// would end the text (and so touch the closing quotes), is escaped.
pub(crate) fn python_docstring_body(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quotes_in_a_row = 0;
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quotes_in_a_row == 2 || chars.peek().is_none() => {
                out.push_str("\\\"");
                quotes_in_a_row = 0;
                continue;
            }
            '"' => {
                out.push('"');
                quotes_in_a_row += 1;
                continue;
            }
            '\\' => out.push_str("\\\\"),
            '\n' => {
                out.push('\n');
                out.push_str(indent);
            }
            c if is_hidden(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
        quotes_in_a_row = 0;
    }
    // No trailing spaces on blank lines.
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// The lines of `text` as plain comment text: every hidden character, including line
/// breaks inside a line, becomes a space.
pub(crate) fn comment_lines(text: &str) -> Vec<String> {
    text.trim()
        .lines()
        .map(|line| line.chars().map(|c| if is_hidden(c) { ' ' } else { c }).collect::<String>().trim_end().to_owned())
        .collect()
}

/// [`comment_lines`] for inside a `/** … */` block: `*/` cannot end it early.
pub(crate) fn jsdoc_lines(text: &str) -> Vec<String> {
    comment_lines(text).into_iter().map(|line| line.replace("*/", "*\\/")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_what_could_end_or_hide() {
        assert_eq!(quoted("a\"b\\c\nd\u{202e}"), r#""a\"b\\c\nd\u202e""#);
        assert_eq!(truncated("héllo", 2), "hé…");
        assert_eq!(truncated("hé", 2), "hé");
    }

    #[test]
    fn docstrings_cannot_close_early() {
        assert_eq!(python_docstring_body(r#"say """hi""""#, ""), r#"say ""\"hi""\""#);
        assert_eq!(python_docstring_body(r#"4 """" quotes"#, ""), r#"4 ""\"" quotes"#);
        assert_eq!(python_docstring_body("ends with \"", ""), "ends with \\\"");
        assert_eq!(python_docstring_body("a\\nb\n\nc", "    "), "a\\\\nb\n\n    c");
        assert_eq!(jsdoc_lines("a */ b\nc\u{2028}d"), ["a *\\/ b", "c d"]);
    }
}
