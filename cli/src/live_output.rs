//! `wasmbox run`'s human mode prints the guest's stdout and stderr as the guest writes
//! them ([`LivePrinter`], an [`OutputSink`]), not at the end of the run.
//!
//! A pipe gets the bytes unchanged. A terminal gets the text with its control
//! characters made visible ([`terminal_text`]), decoded across chunk boundaries so that
//! neither a character nor a CRLF is split: a chunk's unfinished character, and a
//! carriage return at its end (which is harmless only before a newline), wait for the
//! next chunk or the end of the run.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, MutexGuard};

use wasmbox::live_output::TextChunks;
use wasmbox::{OutputSink, OutputStream};

use crate::terminal_text;

/// Prints each stream to the CLI's own stdout or stderr as it comes.
pub struct LivePrinter {
    stdout: Mutex<StreamPrinter>,
    stderr: Mutex<StreamPrinter>,
}

struct StreamPrinter {
    terminal: bool,
    text: TextChunks,
    /// A carriage return that ended the last chunk, not yet printed.
    held_cr: bool,
}

impl StreamPrinter {
    fn new(terminal: bool) -> Self {
        StreamPrinter { terminal, text: TextChunks::default(), held_cr: false }
    }

    /// What to print for `bytes` (everything, when at the end of the run).
    fn printable(&mut self, bytes: &[u8], at_end: bool) -> Vec<u8> {
        if !self.terminal {
            return bytes.to_vec();
        }
        let mut text = String::new();
        if std::mem::take(&mut self.held_cr) {
            text.push('\r');
        }
        text.push_str(&self.text.push(bytes));
        if at_end {
            text.push_str(&self.text.finish());
        } else if text.ends_with('\r') {
            text.pop();
            self.held_cr = true;
        }
        terminal_text::escape(&text).into_owned().into_bytes()
    }
}

impl LivePrinter {
    /// A printer for this process's stdout and stderr, escaping for whichever of them
    /// is a terminal.
    pub fn new() -> Self {
        LivePrinter {
            stdout: Mutex::new(StreamPrinter::new(std::io::stdout().is_terminal())),
            stderr: Mutex::new(StreamPrinter::new(std::io::stderr().is_terminal())),
        }
    }

    fn printer(&self, stream: OutputStream) -> MutexGuard<'_, StreamPrinter> {
        let printer = if stream == OutputStream::Stderr { &self.stderr } else { &self.stdout };
        printer.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn print(&self, stream: OutputStream, bytes: &[u8], at_end: bool) {
        let printable = self.printer(stream).printable(bytes, at_end);
        if printable.is_empty() {
            return;
        }
        // Nothing to do about a closed or failing stdout: the run goes on, and its exit
        // code still tells how it ended.
        let _ = if stream == OutputStream::Stderr {
            let mut err = std::io::stderr().lock();
            err.write_all(&printable).and_then(|()| err.flush())
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(&printable).and_then(|()| out.flush())
        };
    }

    /// Prints what the streams held back (an unfinished character, a last carriage
    /// return); call it once the run is over.
    pub fn finish(&self) {
        self.print(OutputStream::Stdout, &[], true);
        self.print(OutputStream::Stderr, &[], true);
    }
}

impl OutputSink for LivePrinter {
    fn write(&self, stream: OutputStream, bytes: &[u8]) {
        self.print(stream, bytes, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(chunks: &[&[u8]]) -> String {
        let mut printer = StreamPrinter::new(true);
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(printer.printable(chunk, false));
        }
        out.extend(printer.printable(&[], true));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_terminal_gets_whole_characters_and_crlf_across_chunks() {
        assert_eq!(shown(&[b"caf\xc3", b"\xa9\r", b"\nok"]), "caf\u{e9}\r\nok");
        assert_eq!(shown(&[b"a\r", b"b"]), "a\\x0db", "a lone CR is still shown");
        assert_eq!(shown(&[b"\x1b", b"[2J"]), "\\x1b[2J");
        assert_eq!(shown(&[b"end\r"]), "end\\x0d");
        assert_eq!(shown(&[b"\xc3"]), "\u{fffd}", "an unfinished character at the end is replaced");
    }

    #[test]
    fn a_pipe_gets_the_bytes_unchanged() {
        let mut printer = StreamPrinter::new(false);
        assert_eq!(printer.printable(b"\x1b[2J\xc3", false), b"\x1b[2J\xc3");
        assert!(printer.printable(&[], true).is_empty());
    }
}
