//! Tool argument schemas: compiled once at registration, checked on every call, with
//! messages a model can act on (`` `limit`: expected integer, got string ``).
//!
//! A message names the path and the rule broken, never the offending value: it goes to
//! the audit record and the logs as well as to the guest, and an argument may be a
//! secret (`` `pin`: must be at most 4 characters ``, not `"hunter2" is longer…`).
//! Property names and paths come from the guest too; they are kept (a model needs them
//! to fix its call) but cut to a bounded length.
//!
//! The validator is built without remote or file reference resolution, so a schema's
//! `$ref` can never make the host fetch anything.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::json_guard::type_name;
use crate::audit::floor_char_boundary;

/// At most this many schema violations are listed in one message.
const MAX_REPORTED_ERRORS: usize = 3;
/// At most this many unexpected property names are listed in one violation.
const MAX_REPORTED_NAMES: usize = 3;
/// Paths, property names and schema constants longer than this are cut.
const MAX_QUOTED_BYTES: usize = 64;

/// A compiled argument schema.
pub(crate) struct ArgsSchema {
    validator: jsonschema::Validator,
}

impl ArgsSchema {
    /// Compiles `schema`; the error explains what is wrong with it.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema).map(|validator| ArgsSchema { validator }).map_err(|e| e.to_string())
    }

    /// Checks `args`; the error lists the first few violations, each with its path and
    /// the rule, without the values.
    pub(crate) fn check(&self, args: &Value) -> Result<(), String> {
        let mut errors = self.validator.iter_errors(args).peekable();
        if errors.peek().is_none() {
            return Ok(());
        }
        let messages: Vec<String> = errors
            .take(MAX_REPORTED_ERRORS)
            .map(|error| {
                let path = model_path(error.instance_path().as_str());
                format!("`{}`: {}", cut(&path), rule(error.kind(), error.instance()))
            })
            .collect();
        Err(messages.join("; "))
    }
}

/// What `kind` requires, in words, naming no part of the offending `instance` but its
/// JSON type.
fn rule(kind: &ValidationErrorKind, instance: &Value) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            format!("expected {expected}, got {}", type_name(instance))
        }
        K::Required { property } => format!("{} is a required property", cut(&property.to_string())),
        K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
            format!("unexpected {}", names(unexpected))
        }
        K::AdditionalItems { limit } => format!("at most {limit} items are allowed"),
        K::UnevaluatedItems { .. } => "has items the schema does not allow".into(),
        K::MaxItems { limit } => format!("must have at most {limit} items"),
        K::MinItems { limit } => format!("must have at least {limit} items"),
        K::MaxLength { limit } => format!("must be at most {limit} characters"),
        K::MinLength { limit } => format!("must be at least {limit} characters"),
        K::MaxProperties { limit } => format!("must have at most {limit} properties"),
        K::MinProperties { limit } => format!("must have at least {limit} properties"),
        K::Maximum { limit } => format!("must be at most {limit}"),
        K::Minimum { limit } => format!("must be at least {limit}"),
        K::ExclusiveMaximum { limit } => format!("must be less than {limit}"),
        K::ExclusiveMinimum { limit } => format!("must be greater than {limit}"),
        K::MultipleOf { multiple_of } => format!("must be a multiple of {multiple_of}"),
        K::Enum { options } => format!("must be one of {}", cut(&options.to_string())),
        K::Constant { expected_value } => format!("must be {}", cut(&expected_value.to_string())),
        K::Pattern { pattern } => format!("must match the pattern {}", cut(pattern)),
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            "could not be checked against its pattern".into()
        }
        K::Format { format } => format!("must be a valid {}", cut(format)),
        K::ContentEncoding { content_encoding } => format!("must be {} encoded", cut(content_encoding)),
        K::ContentMediaType { content_media_type } => format!("must be of media type {}", cut(content_media_type)),
        K::FromUtf8 { .. } => "must decode to UTF-8 text".into(),
        K::UniqueItems => "must not repeat an item".into(),
        K::Contains => "must contain an item the schema's `contains` allows".into(),
        K::AnyOf { .. } => "matches none of the schemas of `anyOf`".into(),
        K::OneOfNotValid { .. } => "matches none of the schemas of `oneOf`".into(),
        K::OneOfMultipleValid { .. } => "matches more than one schema of `oneOf`".into(),
        K::Not { .. } => "matches the schema of `not`, which it must not".into(),
        K::PropertyNames { .. } => "has a property name the schema does not allow".into(),
        K::FalseSchema => "is not allowed".into(),
        K::Referencing(_) => "could not be checked: the schema has an unresolvable `$ref`".into(),
        K::Custom { keyword, .. } => format!("breaks the schema's `{}` rule", cut(keyword)),
    }
}

/// Up to [`MAX_REPORTED_NAMES`] property names, each cut to a bounded length.
fn names(unexpected: &[String]) -> String {
    let mut listed: Vec<String> = unexpected.iter().take(MAX_REPORTED_NAMES).map(|n| format!("`{}`", cut(n))).collect();
    if unexpected.len() > MAX_REPORTED_NAMES {
        listed.push(format!("and {} more", unexpected.len() - MAX_REPORTED_NAMES));
    }
    let noun = if unexpected.len() == 1 { "property" } else { "properties" };
    format!("{noun} {}", listed.join(", "))
}

/// `text`, or its first [`MAX_QUOTED_BYTES`] and an ellipsis.
fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_QUOTED_BYTES {
        return text.into();
    }
    format!("{}…", &text[..floor_char_boundary(text, MAX_QUOTED_BYTES)]).into()
}

/// Turns a JSON pointer (`/items/0/name`) into the path a model writes (`items[0].name`).
fn model_path(pointer: &str) -> String {
    if pointer.is_empty() {
        return "arguments".into();
    }
    let mut path = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.parse::<usize>().is_ok() {
            path.push_str(&format!("[{segment}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&segment);
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ArgsSchema {
        ArgsSchema::compile(&json!({
            "type": "object",
            "properties": {
                "limit": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["fast", "slow"]}
            },
            "required": ["limit"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn a_type_mismatch_names_the_field_and_both_types() {
        assert_eq!(schema().check(&json!({"limit": "10"})).unwrap_err(), "`limit`: expected integer, got string");
        assert_eq!(
            schema().check(&json!({"limit": 1, "tags": ["a", 2]})).unwrap_err(),
            "`tags[1]`: expected string, got integer"
        );
    }

    #[test]
    fn missing_and_extra_properties_are_reported() {
        let err = schema().check(&json!({"limitt": 1})).unwrap_err();
        assert!(err.contains("\"limit\" is a required property"), "{err}");
        assert!(err.contains("limitt"), "{err}");
        assert!(schema().check(&json!({"limit": 1, "mode": "fast"})).is_ok());
    }

    #[test]
    fn messages_name_the_rule_and_never_the_value() {
        let pin = ArgsSchema::compile(&json!({"properties": {"pin": {"type": "string", "maxLength": 4}}})).unwrap();
        assert_eq!(pin.check(&json!({"pin": "hunter2"})).unwrap_err(), "`pin`: must be at most 4 characters");
        assert_eq!(
            schema().check(&json!({"limit": 1, "mode": "hunter2"})).unwrap_err(),
            r#"`mode`: must be one of ["fast","slow"]"#
        );
    }

    #[test]
    fn guest_chosen_names_in_a_message_are_cut() {
        let long = "k".repeat(10_000);
        let err = schema().check(&json!({"limit": 1, long.clone(): 1, "b": 2, "c": 3, "d": 4})).unwrap_err();
        assert!(err.len() < 512, "{err}");
        assert!(err.contains("and 1 more"), "{err}");
        let nested = ArgsSchema::compile(&json!({"additionalProperties": {"type": "integer"}})).unwrap();
        let err = nested.check(&json!({ long: "x" })).unwrap_err();
        assert!(err.len() < 256 && err.ends_with("expected integer, got string"), "{err}");
    }

    #[test]
    fn remote_references_are_never_fetched() {
        let err = ArgsSchema::compile(&json!({"$ref": "http://127.0.0.1:9/schema.json"})).err();
        assert!(err.is_some(), "a remote $ref must fail to compile, not be fetched");
    }
}
