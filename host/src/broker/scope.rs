//! Which registered tools one run may call. Nothing, by default.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::tool::{Tool, Tools};

/// A run's tool allowlist, parsed once into a set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// No tool at all (the default).
    #[default]
    None,
    /// Every registered tool.
    All,
    /// Exactly these tool names.
    Only(BTreeSet<String>),
}

impl Scope {
    /// A scope of exactly these names.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Scope::Only(names.into_iter().map(Into::into).collect())
    }

    /// The tools allowed by both scopes.
    pub fn intersect(&self, other: &Scope) -> Scope {
        match (self, other) {
            (Scope::None, _) | (_, Scope::None) => Scope::None,
            (Scope::All, other) | (other, Scope::All) => other.clone(),
            (Scope::Only(a), Scope::Only(b)) => Scope::Only(a.intersection(b).cloned().collect()),
        }
    }

    /// True when `name` is in scope.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Scope::None => false,
            Scope::All => true,
            Scope::Only(names) => names.contains(name),
        }
    }
}

/// What one run can actually call: its registry seen through its scope.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reach<'a> {
    tools: &'a Tools,
    scope: &'a Scope,
}

impl<'a> Reach<'a> {
    pub(crate) fn new(tools: &'a Tools, scope: &'a Scope) -> Self {
        Reach { tools, scope }
    }

    /// The tool called `name`, if the run can call it.
    fn callable(&self, name: &str) -> Option<&'a Arc<Tool>> {
        self.tools.get(name).filter(|_| self.scope.allows(name))
    }
}

/// What a nested run inherits of its parent's scope. It can never get more: the nested
/// scope is also intersected with the nested sandbox's own scope, and a tool is passed
/// on only if it is the very tool the parent can call — the same registration, not a
/// tool of the same name in the nested sandbox's registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inherit {
    /// No tools at all.
    None,
    /// Everything the parent run may call.
    All,
    /// These tools, each of which the parent run must be allowed to call.
    Listed(BTreeSet<String>),
}

impl Inherit {
    /// Inherit exactly these tools.
    pub fn listed<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Inherit::Listed(names.into_iter().map(Into::into).collect())
    }

    fn takes(&self, name: &str) -> bool {
        match self {
            Inherit::None => false,
            Inherit::All => true,
            Inherit::Listed(names) => names.contains(name),
        }
    }

    /// The nested run's scope over `nested`'s registry: the tools `nested` allows that
    /// this takes and that `parent` can call — compared by identity, so a nested
    /// registry's own tool of a parent tool's name is not granted. Or the first listed
    /// name the parent cannot call, or that names another tool in `nested`.
    pub(crate) fn derive(&self, parent: Reach<'_>, nested: Reach<'_>) -> Result<Scope, String> {
        if let Inherit::Listed(names) = self {
            let wider = names.iter().find(|name| match (parent.callable(name), nested.tools.get(name)) {
                (None, _) => true,
                (Some(theirs), Some(ours)) => !Arc::ptr_eq(theirs, ours),
                // Nothing of that name to grant.
                (Some(_), None) => false,
            });
            if let Some(wider) = wider {
                return Err(wider.clone());
            }
        }
        if *self == Inherit::None {
            return Ok(Scope::None);
        }
        let granted = nested
            .tools
            .iter()
            .filter(|tool| {
                let name = tool.name();
                self.takes(name)
                    && nested.scope.allows(name)
                    && parent.callable(name).is_some_and(|t| Arc::ptr_eq(t, tool))
            })
            .map(|tool| tool.name().to_owned())
            .collect();
        Ok(Scope::Only(granted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_allows_nothing() {
        assert!(!Scope::default().allows("add"));
        assert!(Scope::All.allows("add"));
        let only = Scope::only(["add"]);
        assert!(only.allows("add"));
        assert!(!only.allows("sub"));
    }

    #[test]
    fn intersections_never_widen() {
        let ab = Scope::only(["a", "b"]);
        assert_eq!(ab.intersect(&Scope::All), ab);
        assert_eq!(ab.intersect(&Scope::only(["b", "c"])), Scope::only(["b"]));
        assert_eq!(Scope::All.intersect(&Scope::None), Scope::None);
    }

    fn registry(names: &[&str]) -> Tools {
        let mut tools = Tools::new();
        for name in names {
            tools
                .register(Tool::new(*name, "d", serde_json::json!({"type": "object"}), |_| async {
                    Ok(serde_json::Value::Null)
                }))
                .unwrap();
        }
        tools
    }

    #[test]
    fn a_nested_run_cannot_list_a_tool_its_parent_lacks() {
        let tools = registry(&["a", "b", "c"]);
        let parent = Scope::only(["a", "b"]);
        let (parent, nested) = (Reach::new(&tools, &parent), Reach::new(&tools, &Scope::All));
        assert_eq!(Inherit::listed(["a"]).derive(parent, nested), Ok(Scope::only(["a"])));
        assert_eq!(Inherit::listed(["a", "c"]).derive(parent, nested), Err("c".to_string()));
        assert_eq!(Inherit::All.derive(parent, nested), Ok(Scope::only(["a", "b"])));
        assert_eq!(Inherit::None.derive(parent, nested), Ok(Scope::None));
        let narrow = Scope::only(["b"]);
        assert_eq!(Inherit::All.derive(parent, Reach::new(&tools, &narrow)), Ok(Scope::only(["b"])));
    }

    /// A parent with `Scope::All` over {delegate} and a nested sandbox over {delegate,
    /// danger}: `All` names no tools, so only identity can tell `danger` was never the
    /// parent's; and a nested `delegate` of its own is another tool.
    #[test]
    fn tools_are_compared_by_identity_not_by_name() {
        let parent_tools = registry(&["delegate", "shared"]);
        // Same names, other registrations, even a copy of the parent's `shared` tool.
        let mut nested_tools = registry(&["delegate", "danger"]);
        nested_tools.register((**parent_tools.get("shared").unwrap()).clone()).unwrap();
        // A clone of the parent's registry shares its tools.
        let mut cloned = parent_tools.clone();
        cloned.register((**nested_tools.get("danger").unwrap()).clone()).unwrap();

        let parent = Reach::new(&parent_tools, &Scope::All);
        let foreign = Reach::new(&nested_tools, &Scope::All);
        assert_eq!(Inherit::All.derive(parent, foreign), Ok(Scope::only(Vec::<String>::new())));
        assert_eq!(Inherit::listed(["danger"]).derive(parent, foreign), Err("danger".to_string()));
        assert_eq!(Inherit::listed(["delegate"]).derive(parent, foreign), Err("delegate".to_string()));

        let sharing = Reach::new(&cloned, &Scope::All);
        assert_eq!(Inherit::All.derive(parent, sharing), Ok(Scope::only(["delegate", "shared"])));
        assert_eq!(Inherit::listed(["shared"]).derive(parent, sharing), Ok(Scope::only(["shared"])));
        assert_eq!(Inherit::listed(["danger"]).derive(parent, sharing), Err("danger".to_string()));
    }
}
