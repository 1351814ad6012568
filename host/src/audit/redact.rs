//! Redaction of what the audit records: values under sensitive keys at any depth,
//! name/value pairs naming a sensitive header, strings that carry a credential, long
//! strings by size, and long keys by a prefix and their length.
//!
//! # How a key is matched
//!
//! A key is read as words: split at every character that is not a letter or digit and
//! at camelCase boundaries, lowercased (`X-Api-Key` → `x api key`, `sessionId` →
//! `session id`, `APIKey` → `api key`). Each configured entry is read the same way and
//! its words run together (`api_key` → `apikey`). An entry of five bytes or more matches
//! when it occurs anywhere in the key's words run together (`githubtoken`,
//! `client_secret`, `aws_credentials`, `Set-Cookie`); a shorter entry (`auth`, `pwd`,
//! `jwt`) must equal one word or consecutive words of the key (`auth`, `x-auth-token`,
//! `userPwd`), so that `author`, `oauth` or `pwdx` are not redacted. The rule errs on
//! the side of redacting: `max_tokens` and `tokenizer` contain `token`.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::{Map, Value};

/// Keys redacted by default (see the module documentation for how they match).
pub const DEFAULT_REDACT_KEYS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "auth",
    "authorization",
    "bearer",
    "jwt",
    "credential",
    "session",
    "cookie",
    "private_key",
    "access_key",
];

/// Strings longer than this many bytes are recorded as their size only, by default.
pub const DEFAULT_MAX_RECORDED_STRING_BYTES: usize = 256;

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Entries up to this many bytes match whole words only (`auth` must not catch `author`).
const WHOLE_WORD_MAX_BYTES: usize = 4;

/// Keys longer than this are recorded as a prefix and their length: a guest chooses its
/// argument keys, and a copy of each would otherwise go into the record whole.
const MAX_RECORDED_KEY_BYTES: usize = 128;
/// How much of a longer key is kept (short enough that the shortened key is itself
/// under [`MAX_RECORDED_KEY_BYTES`], so redacting twice changes nothing).
const RECORDED_KEY_PREFIX_BYTES: usize = 64;

/// Members that name the other members of their object: `{"name": "Authorization",
/// "value": "…"}` is a header whose value is sensitive.
const NAMING_MEMBERS: &[&str] = &["name", "key", "header", "field"];

/// A credential token after `Bearer` is at least this long (`Bearer of bad news` is not one).
const MIN_BEARER_TOKEN_BYTES: usize = 8;

/// A compiled redaction policy.
#[derive(Debug, Clone)]
pub(crate) struct Redactor {
    /// Each entry's words run together.
    keys: Vec<String>,
    max_string_bytes: usize,
}

impl Redactor {
    pub(crate) fn new(keys: &[String], max_string_bytes: usize) -> Self {
        let keys = keys.iter().map(|key| words(key).concat()).filter(|key| !key.is_empty()).collect();
        Redactor { keys, max_string_bytes }
    }

    /// True when values under `key` are redacted.
    pub(crate) fn is_sensitive(&self, key: &str) -> bool {
        let words = words(key);
        let joined = words.concat();
        self.keys.iter().any(|entry| {
            if entry.len() > WHOLE_WORD_MAX_BYTES {
                joined.contains(entry.as_str())
            } else {
                consecutive_words_equal(&words, entry)
            }
        })
    }

    /// A copy of `value` safe to record. Values reaching here passed the depth cap, so
    /// the recursion is bounded.
    pub(crate) fn redact(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let names_a_secret = map.iter().any(|(key, member)| self.is_naming_a_secret(key, member));
                Value::Object(
                    map.iter()
                        .map(|(key, member)| {
                            let hidden =
                                self.is_sensitive(key) || (names_a_secret && !self.is_naming_a_secret(key, member));
                            let kept = if hidden { Value::from(REDACTED) } else { self.redact(member) };
                            (recorded_key(key).into_owned(), kept)
                        })
                        .collect::<Map<_, _>>(),
                )
            }
            // `["Authorization", "Bearer …"]`: a header as a pair.
            Value::Array(items) if items.len() == 2 && items[0].as_str().is_some_and(|s| self.is_sensitive(s)) => {
                Value::Array(vec![self.redact(&items[0]), Value::from(REDACTED)])
            }
            Value::Array(items) => Value::Array(items.iter().map(|item| self.redact(item)).collect()),
            Value::String(s) if s.len() > self.max_string_bytes => Value::from(format!("[{} bytes]", s.len())),
            Value::String(s) if matches!(self.redact_text(s), Cow::Owned(_)) => Value::from(REDACTED),
            other => other.clone(),
        }
    }

    /// `text` with every credential it visibly carries replaced by [`REDACTED`]: the
    /// token after `Bearer`, JWT-shaped tokens, and what follows `key=` or `key:` when the
    /// key is sensitive (to the end of the line after `:`, as in a header). Borrowed when
    /// nothing was found.
    pub(crate) fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = String::new();
        let mut copied = 0;
        let mut at = 0;
        while at < text.len() {
            let Some(found) = self.next_credential(text, at) else { break };
            out.push_str(&text[copied..found.start]);
            out.push_str(REDACTED);
            copied = found.end;
            at = found.end.max(found.start + 1);
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// A message safe to record when payloads are: credentials redacted, cut to the
    /// string cap with its length noted.
    pub(crate) fn redact_message(&self, text: &str) -> String {
        let redacted = self.redact_text(text);
        if redacted.len() <= self.max_string_bytes {
            return redacted.into_owned();
        }
        let end = floor_char_boundary(&redacted, self.max_string_bytes);
        format!("{}…[{} bytes]", &redacted[..end], redacted.len())
    }

    fn is_naming_a_secret(&self, key: &str, member: &Value) -> bool {
        NAMING_MEMBERS.iter().any(|naming| key.eq_ignore_ascii_case(naming))
            && member.as_str().is_some_and(|name| self.is_sensitive(name))
    }

    /// The byte range of the first credential in `text` at or after `from`.
    fn next_credential(&self, text: &str, from: usize) -> Option<Range<usize>> {
        let bytes = text.as_bytes();
        let mut i = from;
        while i < bytes.len() {
            if !bytes[i].is_ascii_alphanumeric() || (i > 0 && is_identifier_byte(bytes[i - 1])) {
                i += 1;
                continue;
            }
            // A word starts here.
            let word_end = i + run(&bytes[i..], is_identifier_byte);
            let word = &text[i..word_end];
            if word.eq_ignore_ascii_case("bearer") {
                let token_start = word_end + run(&bytes[word_end..], |b| b.is_ascii_whitespace());
                let token_len = run(&bytes[token_start..], is_token_byte);
                if token_start > word_end && token_len >= MIN_BEARER_TOKEN_BYTES {
                    return Some(token_start..token_start + token_len);
                }
            }
            let token_end = i + run(&bytes[i..], is_token_byte);
            if is_jwt(&text[i..token_end]) {
                return Some(i..token_end);
            }
            if let Some(value) = self.value_after_sensitive_key(text, word, word_end) {
                return Some(value);
            }
            i = word_end;
        }
        None
    }

    /// After a sensitive `key` ending at `end`: the value of `key=value` (to the next
    /// space or separator) or of `key: value` (to the end of the line).
    fn value_after_sensitive_key(&self, text: &str, key: &str, end: usize) -> Option<Range<usize>> {
        let bytes = text.as_bytes();
        let mut i = end;
        // `"password": "…"` in quoted text.
        if bytes.get(i).is_some_and(|b| matches!(b, b'"' | b'\'')) {
            i += 1;
        }
        i += run(&bytes[i.min(bytes.len())..], |b| b == b' ');
        let separator = *bytes.get(i)?;
        if !matches!(separator, b'=' | b':') || !self.is_sensitive(key) {
            return None;
        }
        i += 1;
        i += run(&bytes[i..], |b| matches!(b, b' ' | b'\t' | b'"' | b'\''));
        let len = if separator == b':' {
            run(&bytes[i..], |b| !matches!(b, b'\n' | b'\r'))
        } else {
            run(&bytes[i..], |b| !b.is_ascii_whitespace() && !matches!(b, b'&' | b';' | b',' | b'"' | b'\''))
        };
        (len > 0).then_some(i..i + len)
    }
}

/// `key`, or for a key over [`MAX_RECORDED_KEY_BYTES`] its first bytes and its length.
fn recorded_key(key: &str) -> Cow<'_, str> {
    if key.len() <= MAX_RECORDED_KEY_BYTES {
        return Cow::Borrowed(key);
    }
    let end = floor_char_boundary(key, RECORDED_KEY_PREFIX_BYTES);
    Cow::Owned(format!("{}…[{} bytes]", &key[..end], key.len()))
}

/// The largest char boundary of `text` at or below `at`.
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// How many leading bytes of `bytes` satisfy `pred`.
fn run(bytes: &[u8], pred: impl Fn(u8) -> bool) -> usize {
    bytes.iter().take_while(|b| pred(**b)).count()
}

/// Bytes of a key in `key=value` text.
fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')
}

/// Bytes of a bearer token, a JWT or a `key=value` value (RFC 6750's token68, plus `.`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// `eyJ…` in three base64url parts separated by dots (the signature may be empty).
fn is_jwt(word: &str) -> bool {
    let mut parts = word.split('.');
    let (Some(header), Some(payload), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let base64url = |part: &str| part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='));
    header.starts_with("eyJ") && payload.len() >= 2 && [header, payload, signature].into_iter().all(base64url)
}

/// The words of a key: split at non-alphanumerics, between letters and digits and at
/// camelCase boundaries (`APIKey` → `api`, `key`), lowercased.
fn words(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let next = chars.get(i + 1);
        let boundary = match i.checked_sub(1).map(|p| chars[p]) {
            Some(p) if p.is_alphanumeric() => {
                p.is_numeric() != c.is_numeric()
                    || (c.is_uppercase()
                        && (p.is_lowercase() || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))))
            }
            _ => false,
        };
        if boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// True when some run of consecutive `words` spells exactly `entry`.
fn consecutive_words_equal(words: &[String], entry: &str) -> bool {
    (0..words.len()).any(|start| {
        let mut spelled = String::new();
        for word in &words[start..] {
            spelled.push_str(word);
            if spelled.len() >= entry.len() {
                return spelled == entry;
            }
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn redactor() -> Redactor {
        let keys: Vec<String> = DEFAULT_REDACT_KEYS.iter().map(|k| k.to_string()).collect();
        Redactor::new(&keys, 16)
    }

    #[test]
    fn nested_secrets_are_redacted_at_any_depth() {
        let value = json!({
            "user": "ann",
            "request": {"Password": "hunter2", "headers": [{"Authorization": "Bearer x"}, {"X-Api-Key": "k"}]},
            "github_token": {"nested": "object"},
            "note": "a string that is much longer than sixteen bytes",
        });
        assert_eq!(
            redactor().redact(&value),
            json!({
                "user": "ann",
                "request": {"Password": REDACTED, "headers": [{"Authorization": REDACTED}, {"X-Api-Key": REDACTED}]},
                "github_token": REDACTED,
                "note": "[47 bytes]",
            })
        );
    }

    #[test]
    fn the_default_keys_cover_auth_sessions_and_credentials_as_words() {
        let redactor = Redactor::new(&DEFAULT_REDACT_KEYS.iter().map(|k| k.to_string()).collect::<Vec<_>>(), 256);
        let sensitive = [
            "auth",
            "X-Auth-Token",
            "authToken",
            "credentials",
            "aws_credential",
            "pwd",
            "userPwd",
            "session",
            "sessionId",
            "bearer",
            "jwt",
            "id_jwt",
            "cookie",
            "Set-Cookie",
            "client_secret",
            "SECRETS",
            "githubtoken",
        ];
        for key in sensitive {
            let redacted = redactor.redact(&json!({ key: "v" }));
            assert_eq!(redacted, json!({ key: REDACTED }), "{key}");
        }
        // Short entries match whole words only: these are not secrets.
        for key in ["author", "authors", "oauth_provider", "pwdx", "jwtish", "title"] {
            assert_eq!(redactor.redact(&json!({ key: "v" })), json!({ key: "v" }), "{key}");
        }
    }

    #[test]
    fn header_lists_and_bearer_strings_are_redacted() {
        let value = json!({
            "headers": [
                {"name": "Authorization", "value": "Basic dXNlcjpwYXNz"},
                {"Name": "X-Api-Key", "Value": "k-123"},
                {"name": "Accept", "value": "application/json"},
                ["Cookie", "sid=abc"],
                ["Accept", "text/plain"]
            ],
            "raw": "Authorization: Bearer abcdef0123456789",
            "note": "bearer abcdef0123456789",
            "claims": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
            "line": "password=hunter2 user=ann",
            "plain": "bear with me",
        });
        assert_eq!(
            redactor_of(256).redact(&value),
            json!({
                "headers": [
                    {"name": "Authorization", "value": REDACTED},
                    {"Name": "X-Api-Key", "Value": REDACTED},
                    {"name": "Accept", "value": "application/json"},
                    ["Cookie", REDACTED],
                    ["Accept", "text/plain"]
                ],
                "raw": REDACTED,
                "note": REDACTED,
                "claims": REDACTED,
                "line": REDACTED,
                "plain": "bear with me",
            })
        );
    }

    #[test]
    fn long_keys_are_recorded_as_a_prefix_and_a_length() {
        let key = "k".repeat(10_000);
        let redacted = redactor().redact(&json!({ key.clone(): 1, "short": 2 }));
        let keys: Vec<&String> = redacted.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 2);
        assert!(keys.iter().all(|k| k.len() <= 128), "{keys:?}");
        assert!(keys.iter().any(|k| k.contains("10000 bytes")), "{keys:?}");
    }

    fn redactor_of(max_string_bytes: usize) -> Redactor {
        let keys: Vec<String> = DEFAULT_REDACT_KEYS.iter().map(|k| k.to_string()).collect();
        Redactor::new(&keys, max_string_bytes)
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,40}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![Just("password".to_string()), Just("Api-Key".to_string()), "[a-z]{1,8}"],
                    inner,
                    0..8
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// No value under a sensitive key and no long string survives, anywhere.
    fn assert_clean(value: &Value, r: &Redactor) {
        match value {
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                if r.is_sensitive(k) {
                    assert_eq!(v, &Value::from(REDACTED));
                } else {
                    assert_clean(v, r);
                }
            }),
            Value::Array(items) => items.iter().for_each(|v| assert_clean(v, r)),
            Value::String(s) => assert!(s.len() <= 16 || s.starts_with('[')),
            _ => {}
        }
    }

    proptest! {
        #[test]
        fn redaction_leaves_no_secret_and_keeps_the_shape(value in json_value()) {
            let r = redactor();
            let redacted = r.redact(&value);
            assert_clean(&redacted, &r);
            // Idempotent: redacting twice changes nothing more.
            prop_assert_eq!(r.redact(&redacted), redacted.clone());
            // Shape is kept: same kind of value at the root.
            prop_assert_eq!(std::mem::discriminant(&value), std::mem::discriminant(&redacted));
        }
    }
}
