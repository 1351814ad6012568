//! Named sessions of the run tools. A `run_python` or `run_javascript` call with a
//! `session` name runs as the next step of one [`wasmbox::Session`]: the variables,
//! imports and functions of earlier calls with that name are there. Sessions belong to
//! the client that opened them (each HTTP session of MCP has its own names), at most
//! [`MAX_SESSIONS`] at once; each ends as the core ends it (a step that breaches a limit,
//! [`SessionConfig`]'s idle timeout and lifetime) or with `end_session`. The step after
//! an ended session's `session_ended` answer opens a new one under the same name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wasmbox::{Outcome, Sandbox, Session, SessionConfig, Status};

use crate::server::Language;

/// The most sessions one client may hold open.
pub const MAX_SESSIONS: usize = 8;

/// The longest session name, in bytes.
pub const MAX_SESSION_NAME: usize = 64;

/// The sessions of one client, by name.
#[derive(Default)]
pub(crate) struct ClientSessions {
    open: Mutex<HashMap<String, Open>>,
}

struct Open {
    language: Language,
    session: Arc<Session>,
}

impl ClientSessions {
    /// The session named `name`, opened in `sandbox` if there is none. Errors are the
    /// message for the client.
    pub(crate) async fn get_or_open(
        &self,
        name: &str,
        language: Language,
        sandbox: impl FnOnce() -> Result<Sandbox, String>,
    ) -> Result<Arc<Session>, String> {
        check_name(name)?;
        {
            let open = self.lock();
            if let Some(existing) = open.get(name) {
                return same_language(name, existing, language).map(|()| Arc::clone(&existing.session));
            }
            if open.len() >= MAX_SESSIONS {
                return Err(format!(
                    "this client already has {MAX_SESSIONS} open sessions ({}): end one with `end_session`",
                    names(&open)
                ));
            }
        }
        let session = sandbox()?
            .session(SessionConfig::default())
            .await
            .map_err(|err| format!("the session `{name}` could not start: {err}"))?;
        let mut open = self.lock();
        // Another call may have opened it meanwhile: keep the first.
        if let Some(existing) = open.get(name) {
            return same_language(name, existing, language).map(|()| Arc::clone(&existing.session));
        }
        if open.len() >= MAX_SESSIONS {
            return Err(format!("this client already has {MAX_SESSIONS} open sessions ({})", names(&open)));
        }
        let session = Arc::new(session);
        open.insert(name.to_owned(), Open { language, session: Arc::clone(&session) });
        Ok(session)
    }

    /// Forgets `name` once a step said the session ended, so that the next call with
    /// the name opens a new one.
    pub(crate) fn after_step(&self, name: &str, session: &Arc<Session>, outcome: &Outcome) {
        let ended = outcome.status == Status::Rejected
            && outcome.error.as_ref().is_some_and(|error| error.kind == "session_ended");
        if ended {
            let mut open = self.lock();
            if open.get(name).is_some_and(|entry| Arc::ptr_eq(&entry.session, session)) {
                open.remove(name);
            }
        }
    }

    /// Ends the session `name` (its instance and admission slot are freed once a step
    /// still running on it returns). Answers whether there was one.
    pub(crate) fn end(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > MAX_SESSION_NAME || !name.chars().all(allowed) {
        return Err(format!(
            "`session` must be 1 to {MAX_SESSION_NAME} letters, digits, `_`, `-` or `.`, not {name:?}"
        ));
    }
    Ok(())
}

fn same_language(name: &str, open: &Open, language: Language) -> Result<(), String> {
    if open.language == language {
        return Ok(());
    }
    let other = match open.language {
        Language::Python => "a Python",
        Language::JavaScript => "a JavaScript",
    };
    Err(format!("`{name}` is {other} session: use another name, or end it with `end_session`"))
}

fn names(open: &HashMap<String, Open>) -> String {
    let mut names: Vec<&str> = open.keys().map(String::as_str).collect();
    names.sort_unstable();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_short_plain_words() {
        assert!(check_name("analysis-1.v2_x").is_ok());
        for bad in ["", "a b", "a/b", "ü", &"x".repeat(MAX_SESSION_NAME + 1)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
