//! Result projection: keep only the parts of a tool's result that the code needs.
//!
//! A projection is a list of JSON pointers (RFC 6901), where a `*` segment matches every
//! element of an array or every member of an object. The kept parts stay at their
//! places, so `["/items/*/name", "/total"]` turns
//! `{"items": [{"name": "a", "blob": "…"}], "total": 1, "debug": {…}}` into
//! `{"items": [{"name": "a"}], "total": 1}`. Pointers that match nothing are left out.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A parsed projection (a trie of pointer segments), built once per tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    /// True when a pointer ends here: keep the whole value.
    keep: bool,
    /// Named children (object keys, or array indices written as numbers).
    children: BTreeMap<String, Projection>,
    /// The `*` child.
    any: Option<Box<Projection>>,
}

impl Projection {
    /// Parses JSON pointers. An empty pointer (`""`) keeps everything.
    ///
    /// # Errors
    /// A pointer that is not empty and does not start with `/`.
    pub fn new<I, S>(pointers: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut root = Projection::default();
        for pointer in pointers {
            let pointer = pointer.as_ref();
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(format!("projection `{pointer}` is not a JSON pointer (it must start with `/`)"));
            }
            let mut node = &mut root;
            for segment in pointer.split('/').skip(1) {
                node = if segment == "*" {
                    node.any.get_or_insert_with(Default::default)
                } else {
                    node.children.entry(segment.replace("~1", "/").replace("~0", "~")).or_default()
                };
            }
            node.keep = true;
        }
        Ok(root)
    }

    /// The projected value, or `None` when nothing matched.
    pub fn apply(&self, value: &Value) -> Option<Value> {
        if self.keep {
            return Some(value.clone());
        }
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, member) in map {
                    let named = self.children.get(key).and_then(|child| child.apply(member));
                    let any = self.any.as_ref().and_then(|child| child.apply(member));
                    if let Some(projected) = merge(named, any) {
                        out.insert(key.clone(), projected);
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            Value::Array(items) => {
                let out: Vec<Value> = items
                    .iter()
                    .enumerate()
                    .filter_map(|(index, item)| {
                        let named = self.children.get(&index.to_string()).and_then(|child| child.apply(item));
                        let any = self.any.as_ref().and_then(|child| child.apply(item));
                        merge(named, any)
                    })
                    .collect();
                (!out.is_empty()).then_some(Value::Array(out))
            }
            _ => None,
        }
    }
}

/// Unions two projections of the same value (both came from the same source, so
/// object members can simply be combined).
fn merge(a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (Some(Value::Object(mut a)), Some(Value::Object(b))) => {
            for (key, value) in b {
                let merged = merge(a.remove(&key), Some(value));
                a.insert(key, merged.unwrap_or(Value::Null));
            }
            Some(Value::Object(a))
        }
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn project(pointers: &[&str], value: Value) -> Option<Value> {
        Projection::new(pointers).unwrap().apply(&value)
    }

    #[test]
    fn keeps_named_fields_and_wildcards_in_place() {
        let value = json!({"items": [{"name": "a", "blob": "xxx"}, {"name": "b", "blob": "yyy"}], "total": 2, "debug": {"t": 1}});
        assert_eq!(
            project(&["/items/*/name", "/total"], value),
            Some(json!({"items": [{"name": "a"}, {"name": "b"}], "total": 2}))
        );
    }

    #[test]
    fn indices_keys_with_slashes_and_misses() {
        let value = json!({"a/b": 1, "list": [10, 20, 30]});
        assert_eq!(project(&["/a~1b", "/list/1", "/missing/x"], value), Some(json!({"a/b": 1, "list": [20]})));
        assert_eq!(project(&["/nothing"], json!({"a": 1})), None);
        assert_eq!(project(&[""], json!([1])), Some(json!([1])));
    }

    #[test]
    fn overlapping_pointers_merge() {
        let value = json!({"user": {"id": 7, "name": "n", "token": "t"}});
        assert_eq!(project(&["/user/id", "/*/name"], value), Some(json!({"user": {"id": 7, "name": "n"}})));
    }

    #[test]
    fn pointers_must_start_with_a_slash() {
        assert!(Projection::new(["items"]).is_err());
    }
}
