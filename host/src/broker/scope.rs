//! Which registered tools one run may call. Nothing, by default.

use std::collections::BTreeSet;

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

/// What a nested run inherits of its parent's scope. It can never get more: the nested
/// scope is also intersected with the nested sandbox's own scope.
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

    /// The nested run's scope, or the first listed tool the parent lacks.
    pub(crate) fn derive(&self, parent: &Scope) -> Result<Scope, String> {
        match self {
            Inherit::None => Ok(Scope::None),
            Inherit::All => Ok(parent.clone()),
            Inherit::Listed(names) => match names.iter().find(|name| !parent.allows(name)) {
                Some(wider) => Err(wider.clone()),
                None => Ok(Scope::Only(names.clone())),
            },
        }
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

    #[test]
    fn a_nested_run_cannot_list_a_tool_its_parent_lacks() {
        let parent = Scope::only(["a", "b"]);
        assert_eq!(Inherit::listed(["a"]).derive(&parent), Ok(Scope::only(["a"])));
        assert_eq!(Inherit::listed(["a", "c"]).derive(&parent), Err("c".to_string()));
        assert_eq!(Inherit::All.derive(&parent), Ok(parent.clone()));
        assert_eq!(Inherit::None.derive(&parent), Ok(Scope::None));
    }
}
