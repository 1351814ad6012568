//! Reads a tool's JSON Schema into [`SchemaType`]s, for any input, in bounded time.
//!
//! Understood: `type` (a name or a list), `properties`/`required`/`additionalProperties`,
//! `items`/`prefixItems`, `enum`/`const`, `anyOf`/`oneOf`, `allOf` (objects merged),
//! `nullable`, and `$ref` to a JSON pointer inside the same schema (`#`, `#/$defs/X`,
//! `#/definitions/X`, `#/properties/…`). Anything else, or anything past a cap, reads as
//! [`SchemaType::Any`]: a stub that says less is still right, one that hangs is not.
//!
//! # Termination
//! Each pointer is read once and its result remembered; an object is entered in that
//! memory before its fields are read, so a recursive object names itself. A pointer met
//! again while it is being read (a cycle through something that is not an object) reads
//! as `Any`. Depth is capped, and each read and each reuse of a remembered type spends
//! from a per-tool budget, so a schema that expands exponentially through shared
//! definitions stops at the budget.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::doc_text;
use crate::identifiers::{pascal_case, TypeNamer};
use crate::schema_type::{Extra, Field, FieldDoc, ObjectDef, SchemaType};

/// Deepest schema nesting read; deeper parts are `Any`.
pub(crate) const MAX_DEPTH: usize = 32;
/// Schema nodes read (and remembered types reused) per tool.
pub(crate) const NODE_BUDGET: usize = 4096;
/// Most values an `enum` may list and still be spelled as literals.
const MAX_LITERALS: usize = 64;
/// Longest string literal spelled; an `enum` with a longer one is spelled by its type.
const MAX_LITERAL_CHARS: usize = 200;
/// Most properties an object may have and still get a named type (else a mapping).
const MAX_PROPERTIES: usize = 256;
/// Longest property name spelled (else the object is a mapping).
const MAX_PROPERTY_NAME_BYTES: usize = 128;
/// Most members of a tuple type.
const MAX_TUPLE_ITEMS: usize = 32;
/// Longest property description kept.
const MAX_FIELD_DESCRIPTION_CHARS: usize = 500;
/// Longest `default` shown, as compact JSON.
const MAX_DEFAULT_CHARS: usize = 80;

enum Remembered {
    InProgress,
    Done(SchemaType),
}

/// Reads the schemas of one stub module's tools, sharing its object table and namer.
pub(crate) struct SchemaReader<'a> {
    objects: &'a mut Vec<ObjectDef>,
    namer: &'a mut TypeNamer,
}

/// The state of reading one tool's schema.
struct OneSchema<'r, 'a> {
    reader: &'r mut SchemaReader<'a>,
    root: &'r Value,
    remembered: HashMap<String, Remembered>,
    budget: usize,
}

impl<'a> SchemaReader<'a> {
    pub(crate) fn new(objects: &'a mut Vec<ObjectDef>, namer: &'a mut TypeNamer) -> Self {
        SchemaReader { objects, namer }
    }

    /// The type of `root`, a tool's whole argument schema; its objects are named from
    /// `base` (`GetSum` → `GetSumArgs`, `GetSumFilter`, …).
    pub(crate) fn read_root(&mut self, root: &Value, base: &str) -> SchemaType {
        let mut one = OneSchema { reader: self, root, remembered: HashMap::new(), budget: NODE_BUDGET };
        one.remembered.insert("#".to_owned(), Remembered::InProgress);
        let ty = one.read(root, base, "Args", 0, Some("#"));
        one.remembered.insert("#".to_owned(), Remembered::Done(ty.clone()));
        ty
    }
}

impl OneSchema<'_, '_> {
    /// `base` + `suffix` names an object found here; `ref_key` is the pointer this schema
    /// was reached by, remembered before the object's fields are read.
    fn read(&mut self, schema: &Value, base: &str, suffix: &str, depth: usize, ref_key: Option<&str>) -> SchemaType {
        if depth > MAX_DEPTH || self.budget == 0 {
            return SchemaType::Any;
        }
        self.budget -= 1;
        let map = match schema {
            Value::Bool(true) => return SchemaType::Any,
            Value::Bool(false) => return SchemaType::Never,
            Value::Object(map) => map,
            _ => return SchemaType::Any,
        };
        let ty = self.read_map(map, base, suffix, depth, ref_key);
        if map.get("nullable") == Some(&Value::Bool(true)) {
            SchemaType::union(vec![ty, SchemaType::Null])
        } else {
            ty
        }
    }

    fn read_map(
        &mut self,
        map: &Map<String, Value>,
        base: &str,
        suffix: &str,
        depth: usize,
        ref_key: Option<&str>,
    ) -> SchemaType {
        if let Some(reference) = map.get("$ref") {
            return match reference.as_str() {
                Some(reference) => self.read_ref(reference, depth),
                None => SchemaType::Any,
            };
        }
        if let Some(value) = map.get("const") {
            if let Some(literals) = literals(std::slice::from_ref(value)) {
                return literals;
            }
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            if let Some(literals) = literals(values) {
                return literals;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(members)) = map.get(key) {
                // Members that only constrain (`{"required": ["a"]}`) leave the type to
                // the schema's own keywords.
                if members.iter().any(says_a_type) {
                    let types = members
                        .iter()
                        .enumerate()
                        .map(|(i, member)| {
                            let suffix = if i == 0 { suffix.to_owned() } else { format!("{suffix}{}", i + 1) };
                            self.read(member, base, &suffix, depth + 1, None)
                        })
                        .collect();
                    return SchemaType::union(types);
                }
            }
        }
        if let Some(Value::Array(members)) = map.get("allOf") {
            if members.iter().any(says_a_type) {
                return self.read_all_of(map, members, base, suffix, depth, ref_key);
            }
        }
        match map.get("type") {
            Some(Value::String(name)) => self.read_typed(map, name, base, suffix, depth, ref_key),
            Some(Value::Array(names)) => {
                let types = names
                    .iter()
                    .take(8)
                    .map(|name| match name.as_str() {
                        Some(name) => self.read_typed(map, name, base, suffix, depth, ref_key),
                        None => SchemaType::Any,
                    })
                    .collect();
                SchemaType::union(types)
            }
            Some(_) => SchemaType::Any,
            None if ["properties", "additionalProperties", "required"].iter().any(|k| map.contains_key(*k)) => {
                self.read_typed(map, "object", base, suffix, depth, ref_key)
            }
            None if map.contains_key("items") || map.contains_key("prefixItems") => {
                self.read_typed(map, "array", base, suffix, depth, ref_key)
            }
            None => SchemaType::Any,
        }
    }

    fn read_typed(
        &mut self,
        map: &Map<String, Value>,
        name: &str,
        base: &str,
        suffix: &str,
        depth: usize,
        ref_key: Option<&str>,
    ) -> SchemaType {
        match name {
            "null" => SchemaType::Null,
            "boolean" => SchemaType::Bool,
            "integer" => SchemaType::Integer,
            "number" => SchemaType::Number,
            "string" => SchemaType::String,
            "array" => self.read_array(map, base, suffix, depth),
            "object" => self.read_object(map, base, suffix, depth, ref_key),
            _ => SchemaType::Any,
        }
    }

    fn read_array(&mut self, map: &Map<String, Value>, base: &str, suffix: &str, depth: usize) -> SchemaType {
        let item_suffix = format!("{suffix}Item");
        let tuple = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => Some(items),
            _ => None,
        };
        if let Some(items) = tuple {
            if items.len() > MAX_TUPLE_ITEMS {
                return SchemaType::Array(Box::new(SchemaType::Any));
            }
            let types =
                items.iter().map(|item| self.read(item, base, &item_suffix, depth + 1, None)).collect::<Vec<_>>();
            // Further items are allowed unless the schema closes the array.
            let rest = if map.contains_key("prefixItems") { map.get("items") } else { map.get("additionalItems") };
            return match rest {
                Some(Value::Bool(false)) => SchemaType::Tuple(types),
                _ => SchemaType::Array(Box::new(SchemaType::union(
                    types
                        .into_iter()
                        .chain(std::iter::once(match rest {
                            Some(schema) => self.read(schema, base, &item_suffix, depth + 1, None),
                            None => SchemaType::Any,
                        }))
                        .collect(),
                ))),
            };
        }
        match map.get("items") {
            Some(items) => SchemaType::Array(Box::new(self.read(items, base, &item_suffix, depth + 1, None))),
            None => SchemaType::Array(Box::new(SchemaType::Any)),
        }
    }

    fn read_object(
        &mut self,
        map: &Map<String, Value>,
        base: &str,
        suffix: &str,
        depth: usize,
        ref_key: Option<&str>,
    ) -> SchemaType {
        let extra = match map.get("additionalProperties").or_else(|| map.get("unevaluatedProperties")) {
            None if map.contains_key("patternProperties") => Extra::Allowed(SchemaType::Any),
            None => Extra::Unstated,
            Some(Value::Bool(false)) => Extra::Closed,
            Some(Value::Bool(true)) => Extra::Allowed(SchemaType::Any),
            Some(schema) => Extra::Allowed(self.read(schema, base, &format!("{suffix}Value"), depth + 1, None)),
        };
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) => properties,
            _ if extra == Extra::Closed => &Map::new(),
            _ => {
                return SchemaType::Map(Box::new(match extra {
                    Extra::Allowed(ty) => ty,
                    _ => SchemaType::Any,
                }))
            }
        };
        if properties.len() > MAX_PROPERTIES || properties.keys().any(|k| k.len() > MAX_PROPERTY_NAME_BYTES) {
            return SchemaType::Map(Box::new(SchemaType::Any));
        }
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let id = self.reader.objects.len();
        let name = self.reader.namer.unique(&format!("{base}{suffix}"), "Object");
        self.reader.objects.push(ObjectDef {
            name,
            description: description(map, doc_text::MAX_TOOL_DESCRIPTION_CHARS),
            fields: Vec::new(),
            extra,
        });
        if let Some(key) = ref_key {
            self.remembered.insert(key.to_owned(), Remembered::Done(SchemaType::Object(id)));
        }
        let object_base = format!("{base}{suffix}");
        // A field's own types are named after the field, under the object's name minus
        // "Args" (`GetSumArgs` → `GetSumFilter`), so names stay short.
        let field_base = if suffix == "Args" { base.to_owned() } else { object_base };
        let mut fields = Vec::with_capacity(properties.len());
        for (key, schema) in properties {
            let ty = self.read(schema, &field_base, &pascal_case(key), depth + 1, None);
            let doc = self.field_doc(schema);
            fields.push(Field { name: key.clone(), ty, required: required.contains(&key.as_str()), doc });
        }
        fields.sort_by_key(|field| !field.required); // stable: key order within each group
        if let Some(object) = self.reader.objects.get_mut(id) {
            object.fields = fields;
        }
        SchemaType::Object(id)
    }

    /// `allOf`: one typed member is that member; several that are all objects are merged
    /// into one object (properties and required names together); anything else is `Any`.
    fn read_all_of(
        &mut self,
        map: &Map<String, Value>,
        members: &[Value],
        base: &str,
        suffix: &str,
        depth: usize,
        ref_key: Option<&str>,
    ) -> SchemaType {
        let typed: Vec<&Value> = members.iter().filter(|m| says_a_type(m)).collect();
        if let [only] = typed.as_slice() {
            return self.read(only, base, suffix, depth + 1, ref_key);
        }
        let mut sources = vec![map.clone()];
        for member in typed {
            match self.resolve_chain(member) {
                Some(object) => sources.push(object),
                None => return SchemaType::Any,
            }
        }
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut closed = false;
        for object in &sources {
            let is_object = object.get("type").is_none_or(|t| t == "object");
            if !is_object || object.contains_key("anyOf") || object.contains_key("oneOf") {
                return SchemaType::Any;
            }
            if let Some(Value::Object(more)) = object.get("properties") {
                for (key, schema) in more {
                    properties.entry(key.clone()).or_insert_with(|| schema.clone());
                }
            }
            if let Some(Value::Array(names)) = object.get("required") {
                required.extend(names.iter().cloned());
            }
            closed |= object.get("additionalProperties") == Some(&Value::Bool(false));
        }
        let mut merged = Map::new();
        merged.insert("type".into(), "object".into());
        merged.insert("properties".into(), Value::Object(properties));
        merged.insert("required".into(), Value::Array(required));
        if closed {
            merged.insert("additionalProperties".into(), false.into());
        }
        if let Some(text) = map.get("description") {
            merged.insert("description".into(), text.clone());
        }
        self.read_object(&merged, base, suffix, depth + 1, ref_key)
    }

    /// A member of `allOf` as an object schema, following a few `$ref`s.
    fn resolve_chain(&self, schema: &Value) -> Option<Map<String, Value>> {
        let mut current = schema;
        for _ in 0..8 {
            let map = current.as_object()?;
            match map.get("$ref").and_then(Value::as_str) {
                Some(reference) => current = pointer_target(self.root, reference)?,
                None => return Some(map.clone()),
            }
        }
        None
    }

    fn read_ref(&mut self, reference: &str, depth: usize) -> SchemaType {
        match self.remembered.get(reference) {
            Some(Remembered::Done(ty)) => {
                let cost = ty.size();
                // Reused deeper than it was read, a type must not nest past the cap
                // either (the spellings recurse over it).
                if cost > self.budget || depth + ty.depth() > MAX_DEPTH + 1 {
                    self.budget = 0;
                    return SchemaType::Any;
                }
                self.budget -= cost;
                return ty.clone();
            }
            Some(Remembered::InProgress) => return SchemaType::Any,
            None => {}
        }
        let Some(target) = pointer_target(self.root, reference) else { return SchemaType::Any };
        let last = reference.rsplit('/').next().unwrap_or_default().replace("~1", "/").replace("~0", "~");
        let base = pascal_case(&last);
        let base = if base.is_empty() { "Type".to_owned() } else { base };
        self.remembered.insert(reference.to_owned(), Remembered::InProgress);
        let ty = self.read(target, &base, "", depth + 1, Some(reference));
        self.remembered.insert(reference.to_owned(), Remembered::Done(ty.clone()));
        ty
    }

    fn field_doc(&self, schema: &Value) -> FieldDoc {
        let Some(map) = schema.as_object() else { return FieldDoc::default() };
        // A property that is only a `$ref` (pydantic's enums) says what it is there.
        let target = map.get("$ref").and_then(Value::as_str).and_then(|r| pointer_target(self.root, r));
        let description = description(map, MAX_FIELD_DESCRIPTION_CHARS)
            .or_else(|| target.and_then(Value::as_object).and_then(|t| description(t, MAX_FIELD_DESCRIPTION_CHARS)));
        let default = map.get("default").filter(|v| v.to_string().chars().count() <= MAX_DEFAULT_CHARS).cloned();
        let default_hidden = default.is_none() && map.contains_key("default");
        FieldDoc { description, default, default_hidden, notes: constraint_notes(map) }
    }
}

/// The schema at `reference`, a JSON pointer into `root` written as a URI fragment.
fn pointer_target<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.starts_with('/') {
        return None; // an anchor (`#name`), which this reader does not index
    }
    root.pointer(&percent_decoded(pointer)?)
}

/// `%24defs` → `$defs` (a pointer in a URI fragment may be percent-encoded).
fn percent_decoded(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether a member of `anyOf`/`oneOf`/`allOf` says what type a value has (rather than
/// only constraining one the schema's other keywords type).
fn says_a_type(member: &Value) -> bool {
    match member {
        Value::Object(map) => ["type", "$ref", "properties", "items", "enum", "const", "anyOf", "oneOf", "allOf"]
            .iter()
            .any(|k| map.contains_key(*k)),
        Value::Bool(false) => true,
        _ => false,
    }
}

/// `enum`/`const` values as a literal type, when every one is a short scalar.
fn literals(values: &[Value]) -> Option<SchemaType> {
    if values.is_empty() || values.len() > MAX_LITERALS {
        return None;
    }
    let spellable = |v: &Value| match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => true,
        Value::String(s) => s.chars().count() <= MAX_LITERAL_CHARS,
        _ => false,
    };
    if !values.iter().all(spellable) {
        return None;
    }
    let mut unique: Vec<Value> = Vec::new();
    for value in values {
        if !unique.contains(value) {
            unique.push(value.clone());
        }
    }
    Some(SchemaType::Literals(unique))
}

fn description(map: &Map<String, Value>, max_chars: usize) -> Option<String> {
    let text = map.get("description")?.as_str()?.trim();
    (!text.is_empty()).then(|| doc_text::truncated(text, max_chars))
}

/// The constraints worth telling a caller, as short phrases.
fn constraint_notes(map: &Map<String, Value>) -> Vec<String> {
    let mut notes = Vec::new();
    for (key, phrase) in [
        ("minimum", "minimum"),
        ("maximum", "maximum"),
        ("exclusiveMinimum", "greater than"),
        ("exclusiveMaximum", "less than"),
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
    ] {
        if let Some(Value::Number(n)) = map.get(key) {
            notes.push(if phrase.contains("{}") {
                phrase.replace("{}", &n.to_string())
            } else {
                format!("{phrase} {n}")
            });
        }
    }
    for key in ["format", "pattern"] {
        if let Some(Value::String(text)) = map.get(key) {
            notes.push(format!("{key} {}", doc_text::truncated(text, 80)));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(schema: Value) -> (SchemaType, Vec<ObjectDef>) {
        let mut objects = Vec::new();
        let mut namer = TypeNamer::new();
        let ty = SchemaReader::new(&mut objects, &mut namer).read_root(&schema, "T");
        (ty, objects)
    }

    #[test]
    fn recursive_refs_name_themselves() {
        let (ty, objects) = read(json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}, "self": {"$ref": "#"}},
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        }));
        assert_eq!(ty, SchemaType::Object(0));
        let node = objects.iter().position(|o| o.name == "Node").unwrap();
        assert_eq!(objects[node].fields[0].ty, SchemaType::Array(Box::new(SchemaType::Object(node))));
        assert_eq!(objects[0].fields.iter().find(|f| f.name == "self").unwrap().ty, SchemaType::Object(0));
    }

    #[test]
    fn cycles_through_non_objects_end_in_any() {
        let (ty, _) =
            read(json!({"$ref": "#/$defs/A", "$defs": {"A": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]}}}));
        assert_eq!(ty, SchemaType::union(vec![SchemaType::String, SchemaType::Any]));
        let (ty, _) = read(json!({"$ref": "#"}));
        assert_eq!(ty, SchemaType::Any);
        let (ty, _) =
            read(json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}));
        assert_eq!(ty, SchemaType::Any);
    }

    #[test]
    fn exponential_expansion_stops_at_the_budget() {
        // D0 = [D1, D1], D1 = [D2, D2], …: 2^40 nodes if expanded.
        let mut defs = Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
            defs.insert(format!("D{i}"), json!({"type": "array", "prefixItems": [next.clone(), next], "items": false}));
        }
        defs.insert("D40".into(), json!({"type": "string"}));
        let (ty, _) = read(json!({"$ref": "#/$defs/D0", "$defs": defs}));
        assert!(ty.size() <= NODE_BUDGET * 2, "{}", ty.size());
    }

    #[test]
    fn reused_definitions_do_not_nest_past_the_cap() {
        // D0 is 30 arrays deep and each Dk+1 puts Dk 30 arrays deeper; properties p00,
        // p01, … read each first near the top, where it fits.
        let mut defs = Map::new();
        let mut properties = Map::new();
        let arrays = |inner: Value| (0..30).fold(inner, |s, _| json!({"type": "array", "items": s}));
        defs.insert("D0".into(), arrays(json!({"type": "string"})));
        for k in 0..20 {
            defs.insert(format!("D{}", k + 1), arrays(json!({"$ref": format!("#/$defs/D{k}")})));
        }
        for k in 0..=20 {
            properties.insert(format!("p{k:02}"), json!({"$ref": format!("#/$defs/D{k}")}));
        }
        let (_, objects) = read(json!({"type": "object", "properties": properties, "$defs": defs}));
        let deepest = objects[0].fields.iter().map(|f| f.ty.depth()).max().unwrap();
        assert!(deepest <= MAX_DEPTH + 1, "{deepest}");
    }

    #[test]
    fn deep_nesting_is_capped() {
        let mut schema = json!({"type": "string"});
        for _ in 0..200 {
            schema = json!({"type": "array", "items": schema});
        }
        let (ty, _) = read(schema);
        let mut depth = 0;
        let mut t = &ty;
        while let SchemaType::Array(inner) = t {
            depth += 1;
            t = inner;
        }
        assert_eq!(*t, SchemaType::Any);
        assert!(depth <= MAX_DEPTH + 1, "{depth}");
    }

    #[test]
    fn odd_schemas() {
        assert_eq!(read(json!(42)).0, SchemaType::Any);
        assert_eq!(read(json!({"type": 7})).0, SchemaType::Any);
        assert_eq!(read(json!({"$ref": "https://example.com/x.json"})).0, SchemaType::Any);
        assert_eq!(read(json!({"$ref": "#/nowhere"})).0, SchemaType::Any);
        assert_eq!(read(json!({"$ref": 5})).0, SchemaType::Any);
        assert_eq!(read(json!({"type": "object"})).0, SchemaType::Map(Box::new(SchemaType::Any)));
        assert_eq!(
            read(json!({"type": ["string", "null"]})).0,
            SchemaType::union(vec![SchemaType::String, SchemaType::Null])
        );
        assert_eq!(
            read(json!({"type": "string", "nullable": true})).0,
            SchemaType::union(vec![SchemaType::String, SchemaType::Null])
        );
        assert_eq!(read(json!({"enum": [[1]]})).0, SchemaType::Any);
        assert_eq!(read(json!({"type": "string", "enum": ["x".repeat(500)]})).0, SchemaType::String);
        assert_eq!(
            read(
                json!({"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false})
            )
            .0,
            SchemaType::Tuple(vec![SchemaType::String, SchemaType::Integer])
        );
        assert_eq!(read(json!({"$ref": "#/%24defs/a~1b", "$defs": {"a/b": {"type": "boolean"}}})).0, SchemaType::Bool);
        // constraint-only anyOf keeps the object's own type
        let (ty, objects) = read(json!({"type": "object", "properties": {"a": {}}, "anyOf": [{"required": ["a"]}]}));
        assert_eq!((ty, objects[0].fields.len()), (SchemaType::Object(0), 1));
    }

    #[test]
    fn all_of_merges_objects() {
        let (ty, objects) = read(json!({
            "allOf": [{"$ref": "#/$defs/A"}, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}],
            "$defs": {"A": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}
        }));
        let SchemaType::Object(id) = ty else { panic!("{ty:?}") };
        let names: Vec<_> = objects[id].fields.iter().map(|f| (f.name.as_str(), f.required)).collect();
        assert_eq!(names, [("a", true), ("b", true)]);
    }
}
