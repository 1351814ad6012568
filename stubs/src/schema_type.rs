//! The language-neutral type a JSON Schema describes, as far as a stub can say it.
//!
//! [`crate::schema_reader`] makes these from schemas; [`crate::python`] and
//! [`crate::typescript`] spell them. Objects with named properties live in one table per
//! stub module and are referred to by index, so a recursive schema is a cycle of indices,
//! not an infinite tree.

use std::collections::BTreeSet;

use serde_json::Value;

/// Index of an [`ObjectDef`] in [`crate::tool_model::Catalogue::objects`].
pub(crate) type ObjectId = usize;

/// A value's type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SchemaType {
    /// Anything (an empty schema, or one the reader gave up on).
    Any,
    /// Nothing validates (the schema `false`).
    Never,
    Null,
    Bool,
    Integer,
    Number,
    String,
    /// One of these JSON scalars (`enum`, `const`).
    Literals(Vec<Value>),
    Array(Box<SchemaType>),
    /// A fixed-length array (`prefixItems`, or draft 7's `items: [...]`).
    Tuple(Vec<SchemaType>),
    /// An object with no named properties whose values all have this type.
    Map(Box<SchemaType>),
    /// An object with named properties.
    Object(ObjectId),
    /// Any of these (never nested, never fewer than two).
    Union(Vec<SchemaType>),
}

impl SchemaType {
    /// The union of `members`: nested unions flattened, duplicates and `Never` dropped,
    /// literal sets merged; `Any` if any member is.
    pub(crate) fn union(members: Vec<SchemaType>) -> SchemaType {
        let mut flat: Vec<SchemaType> = Vec::new();
        let mut literals: Vec<Value> = Vec::new();
        let mut stack: Vec<SchemaType> = members.into_iter().rev().collect();
        while let Some(member) = stack.pop() {
            match member {
                SchemaType::Any => return SchemaType::Any,
                SchemaType::Never => {}
                SchemaType::Union(inner) => stack.extend(inner.into_iter().rev()),
                SchemaType::Literals(values) => {
                    if literals.is_empty() {
                        flat.push(SchemaType::Literals(Vec::new())); // keeps the first literal's place
                    }
                    for value in values {
                        if !literals.contains(&value) {
                            literals.push(value);
                        }
                    }
                }
                other => {
                    if !flat.contains(&other) {
                        flat.push(other);
                    }
                }
            }
        }
        for member in &mut flat {
            if let SchemaType::Literals(values) = member {
                *values = std::mem::take(&mut literals);
            }
        }
        match flat.len() {
            0 => SchemaType::Never,
            1 => flat.pop().unwrap_or(SchemaType::Never),
            _ => SchemaType::Union(flat),
        }
    }

    /// How many nodes this type has: what copying it costs against a reader's budget.
    pub(crate) fn size(&self) -> usize {
        match self {
            SchemaType::Array(inner) | SchemaType::Map(inner) => 1 + inner.size(),
            SchemaType::Tuple(items) | SchemaType::Union(items) => {
                1 + items.iter().map(SchemaType::size).sum::<usize>()
            }
            SchemaType::Literals(values) => 1 + values.len(),
            _ => 1,
        }
    }

    /// How deeply this type nests (objects count as one: their fields are elsewhere).
    pub(crate) fn depth(&self) -> usize {
        match self {
            SchemaType::Array(inner) | SchemaType::Map(inner) => 1 + inner.depth(),
            SchemaType::Tuple(items) | SchemaType::Union(items) => {
                1 + items.iter().map(SchemaType::depth).max().unwrap_or(0)
            }
            _ => 1,
        }
    }

    /// Adds the objects this type names directly (not those their fields name) to `out`.
    pub(crate) fn objects_named(&self, out: &mut Vec<ObjectId>) {
        match self {
            SchemaType::Object(id) => out.push(*id),
            SchemaType::Array(inner) | SchemaType::Map(inner) => inner.objects_named(out),
            SchemaType::Tuple(items) | SchemaType::Union(items) => items.iter().for_each(|t| t.objects_named(out)),
            _ => {}
        }
    }
}

/// What an object allows beside its named properties.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Extra {
    /// `additionalProperties: false`.
    Closed,
    /// The schema does not say (JSON Schema allows any; most tools mean none).
    Unstated,
    /// `additionalProperties: true` or a schema: other keys with values of this type.
    Allowed(SchemaType),
}

/// An object type with named properties.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ObjectDef {
    /// Its type name, unique in the stub module.
    pub name: String,
    pub description: Option<String>,
    /// Required fields first, each group in the schema's key order.
    pub fields: Vec<Field>,
    pub extra: Extra,
}

/// One named property.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    pub ty: SchemaType,
    pub required: bool,
    pub doc: FieldDoc,
}

/// What a property's schema says about it besides its type.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldDoc {
    pub description: Option<String>,
    /// A short `default` (long ones are left out).
    pub default: Option<Value>,
    /// The schema has a default too long to show.
    pub default_hidden: bool,
    /// Constraints a type cannot carry: `minimum 1`, `format date-time`, ….
    pub notes: Vec<String>,
}

/// The objects reachable from `roots` through fields, in index order (which is the order
/// the reader made them: a parent before its children).
pub(crate) fn reachable_objects(objects: &[ObjectDef], roots: &[&SchemaType]) -> BTreeSet<ObjectId> {
    let mut seen = BTreeSet::new();
    let mut todo = Vec::new();
    for root in roots {
        root.objects_named(&mut todo);
    }
    while let Some(id) = todo.pop() {
        if id >= objects.len() || !seen.insert(id) {
            continue;
        }
        for field in &objects[id].fields {
            field.ty.objects_named(&mut todo);
        }
        if let Extra::Allowed(ty) = &objects[id].extra {
            ty.objects_named(&mut todo);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unions_flatten_and_merge() {
        use SchemaType::*;
        let t = SchemaType::union(vec![
            String,
            Union(vec![Null, String]),
            Literals(vec![json!("a")]),
            Never,
            Literals(vec![json!("b"), json!("a")]),
        ]);
        assert_eq!(t, Union(vec![String, Null, Literals(vec![json!("a"), json!("b")])]));
        assert_eq!(SchemaType::union(vec![String, Any]), Any);
        assert_eq!(SchemaType::union(vec![Integer, Integer]), Integer);
        assert_eq!(SchemaType::union(vec![]), Never);
    }
}
