//! Guest text made safe to print on a terminal.
//!
//! A guest's output, error message and traceback are the guest's to choose. Printed raw
//! on a terminal, control sequences in them act on the terminal: clear the screen, move
//! the cursor to overwrite what the CLI printed, set the window title, or (OSC 52) write
//! the user's clipboard. [`escape`] shows every such character as a visible escape, so
//! the text reads the same and does nothing; the CLI applies it only when the stream is
//! a terminal, and leaves pipes and `--json` unchanged.
//!
//! ```text
//! "\x1b[2Jhi\n"  ->  "\\x1b[2Jhi\n"
//! ```

use std::borrow::Cow;

/// `text` with every control character made visible: C0 controls (but tab and newline,
/// and carriage return before a newline) and DEL as `\xNN`, C1 controls (U+0080–U+009F,
/// which some terminals read as ESC sequences) and the bidirectional overrides and
/// isolates (which reorder what is displayed) as `\u{NNNN}`. Unchanged text is borrowed.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.char_indices().any(|(at, c)| needs_escape(c, &text[at..])) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for (at, c) in text.char_indices() {
        if !needs_escape(c, &text[at..]) {
            escaped.push(c);
        } else if c.is_ascii() {
            escaped.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    Cow::Owned(escaped)
}

/// [`escape`] when `terminal` (the text goes to a terminal), else `text` unchanged.
pub fn escape_on_terminal(text: &str, terminal: bool) -> Cow<'_, str> {
    if terminal {
        escape(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// Whether `c`, which starts `rest`, must be escaped.
fn needs_escape(c: char, rest: &str) -> bool {
    match c {
        '\t' | '\n' => false,
        // CRLF line ends are harmless; a lone CR returns to the line start to overwrite it.
        '\r' => !rest[1..].starts_with('\n'),
        '\u{00}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        // LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_osc_bel_and_c1_are_made_visible() {
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb", "clear screen");
        assert_eq!(escape("\x1b]52;c;aGVsbG8=\x07"), "\\x1b]52;c;aGVsbG8=\\x07", "OSC 52 clipboard write");
        assert_eq!(escape("ding\x07"), "ding\\x07", "bell");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m", "C1 CSI");
        assert_eq!(escape("\u{9d}0;title\u{9c}"), "\\u{9d}0;title\\u{9c}", "C1 OSC and ST");
        assert_eq!(escape("\x00\x08\x7f"), "\\x00\\x08\\x7f");
        assert_eq!(escape("user\u{202e}txt.exe"), "user\\u{202e}txt.exe", "right-to-left override");
    }

    #[test]
    fn tabs_newlines_and_text_are_kept() {
        assert!(matches!(escape("a\tb\nc\r\n"), Cow::Borrowed(_)));
        assert_eq!(escape("a\tb\nc\r\n"), "a\tb\nc\r\n");
        assert_eq!(escape("déjà vu — ünïcode ✓ 日本"), "déjà vu — ünïcode ✓ 日本");
        assert_eq!(escape(""), "");
    }

    #[test]
    fn only_a_terminal_gets_the_escaped_text() {
        assert_eq!(escape_on_terminal("\x1b[2J", true), "\\x1b[2J");
        assert_eq!(escape_on_terminal("\x1b[2J", false), "\x1b[2J");
    }

    #[test]
    fn a_lone_carriage_return_is_made_visible() {
        assert_eq!(escape("safe\rrm -rf"), "safe\\x0drm -rf");
        assert_eq!(escape("end\r"), "end\\x0d");
    }
}
