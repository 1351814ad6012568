//! Tool argument schemas: compiled once at registration, checked on every call, with
//! messages a model can act on (`` `limit`: expected integer, got string ``).
//!
//! The validator is built without remote or file reference resolution, so a schema's
//! `$ref` can never make the host fetch anything.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::json_guard::type_name;

/// At most this many schema violations are listed in one message.
const MAX_REPORTED_ERRORS: usize = 3;

/// A compiled argument schema.
pub(crate) struct ArgsSchema {
    validator: jsonschema::Validator,
}

impl ArgsSchema {
    /// Compiles `schema`; the error explains what is wrong with it.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema).map(|validator| ArgsSchema { validator }).map_err(|e| e.to_string())
    }

    /// Checks `args`; the error lists the first few violations, each with its path.
    pub(crate) fn check(&self, args: &Value) -> Result<(), String> {
        let mut errors = self.validator.iter_errors(args).peekable();
        if errors.peek().is_none() {
            return Ok(());
        }
        let messages: Vec<String> = errors
            .take(MAX_REPORTED_ERRORS)
            .map(|error| {
                let path = model_path(error.instance_path().as_str());
                match error.kind() {
                    ValidationErrorKind::Type { kind } => {
                        let expected = match kind {
                            TypeKind::Single(t) => t.to_string(),
                            TypeKind::Multiple(set) => {
                                set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or ")
                            }
                        };
                        format!("`{path}`: expected {expected}, got {}", type_name(error.instance()))
                    }
                    _ => format!("`{path}`: {error}"),
                }
            })
            .collect();
        Err(messages.join("; "))
    }
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
    fn remote_references_are_never_fetched() {
        let err = ArgsSchema::compile(&json!({"$ref": "http://127.0.0.1:9/schema.json"})).err();
        assert!(err.is_some(), "a remote $ref must fail to compile, not be fetched");
    }
}
