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

    /// True when `name` is in scope.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Scope::None => false,
            Scope::All => true,
            Scope::Only(names) => names.contains(name),
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
}
