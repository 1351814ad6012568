//! Strict JSON at the boundary: size cap before parsing, depth cap before recursion,
//! no NaN/Infinity, no lone surrogates, objects where objects are required.
//!
//! serde_json already rejects `NaN`, `Infinity`, out-of-range numbers and unpaired
//! `\uD800` escapes, and Rust strings are valid UTF-8 by construction (the component
//! model validates guest strings). What this module adds is the order: the cheap
//! checks run before the parser sees a single byte of hostile input.

use serde_json::Value;

/// Why a JSON text or value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Bigger than its cap (checked before parsing).
    #[error("{what} is {actual} bytes, over the cap of {cap} bytes")]
    TooLarge {
        /// What was measured ("arguments", "result", …).
        what: &'static str,
        /// Its size.
        actual: usize,
        /// The cap.
        cap: u64,
    },
    /// Nested deeper than the cap.
    #[error("{what} nests deeper than {cap} levels")]
    TooDeep {
        /// What was measured.
        what: &'static str,
        /// The cap.
        cap: u32,
    },
    /// Not valid strict JSON.
    #[error("{what} is not valid JSON: {reason}")]
    Malformed {
        /// What was parsed.
        what: &'static str,
        /// The parser's explanation.
        reason: String,
    },
    /// Valid JSON, but not an object.
    #[error("{what} must be a JSON object, got {got}")]
    NotAnObject {
        /// What was checked.
        what: &'static str,
        /// The JSON type found instead.
        got: &'static str,
    },
}

/// Checks the nesting depth of JSON `text` without parsing it (one pass, no recursion).
pub(crate) fn check_text_depth(text: &str, cap: u32, what: &'static str) -> Result<(), JsonError> {
    let (mut depth, mut in_string, mut escaped) = (0u32, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > cap {
                    return Err(JsonError::TooDeep { what, cap });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Checks the nesting depth of an already-built value (iteratively: a tool written in
/// Rust can build a value deep enough to overflow a recursive walk).
pub(crate) fn check_value_depth(value: &Value, cap: u32, what: &'static str) -> Result<(), JsonError> {
    let mut stack = vec![(value, 0u32)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > cap {
            return Err(JsonError::TooDeep { what, cap });
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    Ok(())
}

/// Size cap, then depth cap, then a strict parse.
pub(crate) fn parse_capped(text: &str, max_bytes: u64, max_depth: u32, what: &'static str) -> Result<Value, JsonError> {
    if text.len() as u64 > max_bytes {
        return Err(JsonError::TooLarge { what, actual: text.len(), cap: max_bytes });
    }
    check_text_depth(text, max_depth, what)?;
    serde_json::from_str(text).map_err(|err| JsonError::Malformed { what, reason: err.to_string() })
}

/// Serializes `value` and applies the size and depth caps to it.
pub(crate) fn serialize_capped(
    value: &Value,
    max_bytes: u64,
    max_depth: u32,
    what: &'static str,
) -> Result<String, JsonError> {
    check_value_depth(value, max_depth, what)?;
    let text = value.to_string();
    if text.len() as u64 > max_bytes {
        return Err(JsonError::TooLarge { what, actual: text.len(), cap: max_bytes });
    }
    Ok(text)
}

/// The JSON type name of `value`, as a model would say it.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Value, JsonError> {
        parse_capped(text, 1 << 20, 64, "arguments")
    }

    #[test]
    fn size_is_checked_before_parsing() {
        // Not even valid JSON: the size cap must answer first.
        let err = parse_capped("{{{{{{{{{{", 4, 64, "arguments").unwrap_err();
        assert!(matches!(err, JsonError::TooLarge { actual: 10, cap: 4, .. }), "{err}");
    }

    #[test]
    fn depth_ten_thousand_is_refused_without_recursion() {
        let text = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(matches!(parse(&text), Err(JsonError::TooDeep { cap: 64, .. })));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!(r#"{{"a": "{}\"[[["}}"#, "[".repeat(100));
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn nan_infinity_and_lone_surrogates_are_refused() {
        for bad in
            [r#"{"x": NaN}"#, r#"{"x": Infinity}"#, r#"{"x": -Infinity}"#, r#"{"x": 1e999}"#, r#"{"x": "\ud800"}"#]
        {
            assert!(matches!(parse(bad), Err(JsonError::Malformed { .. })), "{bad}");
        }
        assert!(parse(r#"{"x": "\ud83d\ude00"}"#).is_ok(), "a surrogate pair is fine");
    }

    #[test]
    fn value_depth_is_checked_iteratively() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let err = serialize_capped(&value, u64::MAX, 64, "result").unwrap_err();
        assert!(matches!(err, JsonError::TooDeep { .. }));
        // Drop iteratively too: serde_json's recursive Drop would overflow the stack.
        let mut current = value;
        while let Value::Array(mut items) = current {
            current = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn serialized_size_is_capped() {
        let value = Value::String("x".repeat(100));
        assert!(matches!(serialize_capped(&value, 50, 8, "result"), Err(JsonError::TooLarge { .. })));
        assert_eq!(serialize_capped(&Value::Bool(true), 50, 8, "result").unwrap(), "true");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
                ".{0,20}".prop_map(Value::from),
            ];
            leaf.prop_recursive(12, 256, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(".{0,8}", inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn depth(value: &Value) -> u32 {
            match value {
                Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
                Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
                _ => 0,
            }
        }

        proptest! {
            /// Valid JSON within the caps round-trips; the text and value depth checks
            /// agree with the real depth, whatever the caps.
            #[test]
            fn caps_agree_with_the_value(value in json_value(), cap in 0u32..16) {
                let text = value.to_string();
                let fits = depth(&value) <= cap;
                prop_assert_eq!(check_text_depth(&text, cap, "x").is_ok(), fits);
                prop_assert_eq!(check_value_depth(&value, cap, "x").is_ok(), fits);
                if fits {
                    prop_assert_eq!(parse_capped(&text, text.len() as u64, cap, "x").unwrap(), value);
                }
                let too_small = text.len() as u64 - 1;
                let is_too_large = matches!(parse_capped(&text, too_small, 512, "x"), Err(JsonError::TooLarge { .. }));
                prop_assert!(is_too_large);
            }

            /// Arbitrary text never panics the validator, and what it accepts is JSON.
            #[test]
            fn arbitrary_text_is_accepted_only_if_it_is_json(text in "[\\[\\]{}\",:0-9a-zNI.eE+ -]{0,64}") {
                if let Ok(value) = parse_capped(&text, 1 << 20, 32, "x") {
                    prop_assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
                }
            }
        }
    }
}
