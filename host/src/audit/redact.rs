//! Redaction of recorded payloads: sensitive keys at any depth, long strings by size.

use serde_json::{Map, Value};

/// Keys redacted by default (matched case-insensitively, as substrings of the key with
/// `-` read as `_`, so `X-Api-Key` and `github_token` are caught too).
pub const DEFAULT_REDACT_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "private_key",
    "access_key",
];

/// Strings longer than this many bytes are recorded as their size only, by default.
pub const DEFAULT_MAX_RECORDED_STRING_BYTES: usize = 256;

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// A compiled redaction policy.
#[derive(Debug, Clone)]
pub(crate) struct Redactor {
    keys: Vec<String>,
    max_string_bytes: usize,
}

impl Redactor {
    pub(crate) fn new(keys: &[String], max_string_bytes: usize) -> Self {
        Redactor { keys: keys.iter().map(|k| normalize(k)).collect(), max_string_bytes }
    }

    fn is_sensitive(&self, key: &str) -> bool {
        let key = normalize(key);
        self.keys.iter().any(|sensitive| key.contains(sensitive.as_str()))
    }

    /// A copy of `value` safe to record. Values reaching here passed the depth cap, so
    /// the recursion is bounded.
    pub(crate) fn redact(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, member)| {
                        let kept = if self.is_sensitive(key) { Value::from(REDACTED) } else { self.redact(member) };
                        (key.clone(), kept)
                    })
                    .collect::<Map<_, _>>(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|item| self.redact(item)).collect()),
            Value::String(s) if s.len() > self.max_string_bytes => Value::from(format!("[{} bytes]", s.len())),
            other => other.clone(),
        }
    }
}

fn normalize(key: &str) -> String {
    key.to_ascii_lowercase().replace('-', "_")
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
            "auth": {"Password": "hunter2", "headers": [{"Authorization": "Bearer x"}, {"X-Api-Key": "k"}]},
            "github_token": {"nested": "object"},
            "note": "a string that is much longer than sixteen bytes",
        });
        assert_eq!(
            redactor().redact(&value),
            json!({
                "user": "ann",
                "auth": {"Password": REDACTED, "headers": [{"Authorization": REDACTED}, {"X-Api-Key": REDACTED}]},
                "github_token": REDACTED,
                "note": "[47 bytes]",
            })
        );
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
